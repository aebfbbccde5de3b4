package searcheval

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTokens: lowercased, split on everything that is not a letter or a
// digit, letters of any script kept, nothing stemmed.
func TestTokens(t *testing.T) {
	require.Equal(t, []string{"don", "t", "e", "mail", "bob", "s", "3d", "printers", "café"},
		Tokens("Don't e-mail Bob's 3D-printers, CAFÉ!"))
	require.Empty(t, Tokens(" -- ?! "))
}

// TestBM25Scores: the scores are Okapi BM25's with k1 = 1.2 and b = 0.75,
// worked out here from the formula for a corpus of three documents of 2,
// 3 and 1 tokens (average 2): "apple" is in two, so its idf is
// ln(1 + 1.5/2.5) = ln 1.6.
func TestBM25Scores(t *testing.T) {
	ix := NewBM25([]string{"Apple banana", "apple, apple cherry", "dog"})
	idf := math.Log(1.6)
	got := ix.Search("APPLE", 10)
	require.Len(t, got, 2, "a document without the term is no hit")
	// document 1: tf 2, length 3: norm 1.2·(0.25 + 0.75·1.5) = 1.65
	require.Equal(t, 1, got[0].Doc)
	require.InDelta(t, idf*2*2.2/(2+1.65), got[0].Score, 1e-12)
	// document 0: tf 1, length 2 (the average): norm 1.2
	require.Equal(t, 0, got[1].Doc)
	require.InDelta(t, idf*1*2.2/(1+1.2), got[1].Score, 1e-12)

	// A rare term outweighs a frequent common one: "banana" is in one
	// document, idf ln(1 + 2.5/1.5); a repeated query term counts once.
	rare := math.Log(1 + 2.5/1.5)
	got = ix.Search("apple banana banana", 10)
	require.Equal(t, 0, got[0].Doc)
	require.InDelta(t, idf+rare, got[0].Score, 1e-12)
	require.Equal(t, 1, got[1].Doc)

	require.Empty(t, ix.Search("zebra", 10))
	require.Len(t, ix.Search("apple", 1), 1, "limit")
}

// TestBM25KeepsOrderOnTies: equal scores come in the documents' order.
func TestBM25KeepsOrderOnTies(t *testing.T) {
	ix := NewBM25([]string{"red fox", "blue owl", "red fox", "red fox"})
	got := ix.Search("fox", 10)
	require.Equal(t, []int{0, 2, 3}, []int{got[0].Doc, got[1].Doc, got[2].Doc})
}

// TestRanks: each evidence turn's first place among the hits, 0 when
// absent; a memory hit ("") is never evidence.
func TestRanks(t *testing.T) {
	require.Equal(t, []int{2, 0, 4}, Ranks([]string{"D1:2", "D3:1", "D2:5"}, []string{"", "D1:2", "D1:9", "D2:5", "D1:2"}))
	require.Equal(t, []int{0}, Ranks([]string{"D1:1"}, nil))
}

// TestScore: five questions whose ranks are chosen to tell the figures
// apart.
func TestScore(t *testing.T) {
	s := Score([][]int{
		{1},    // found first
		{6},    // found, past 5
		{0},    // not found
		{2, 7}, // one within 5, both within 10
		{3, 0}, // one within 5, the other never
	})
	require.Equal(t, 5, s.Questions)
	require.InDelta(t, 3.0/5, s.AnyAt5, 1e-12)
	require.InDelta(t, 4.0/5, s.AnyAt10, 1e-12)
	require.InDelta(t, 1.0/5, s.AllAt5, 1e-12)
	require.InDelta(t, 3.0/5, s.AllAt10, 1e-12)
	require.InDelta(t, (1+1.0/6+0+1.0/2+1.0/3)/5, s.MRR, 1e-12)

	require.Equal(t, Scores{}, Score(nil))
	require.Equal(t, 0.0, Score([][]int{{}}).AllAt10, "a question without evidence is never all found")
}
