package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/searcheval"
)

const checkedIn = "../../testdata/search/eval.json"

// TestEvalSetIsGenerated: the checked-in set is what the conversation
// files make now; after editing them, run
// `go run ./internal/searchevalgen -o testdata/search/eval.json`.
func TestEvalSetIsGenerated(t *testing.T) {
	want, err := generate()
	require.NoError(t, err)
	got, err := os.ReadFile(checkedIn)
	require.NoError(t, err)
	require.True(t, string(want) == string(got), "testdata/search/eval.json is stale: run go run ./internal/searchevalgen -o testdata/search/eval.json")
}

// TestEvalSetIsWhatTheIssueAsks: the set reads as `mnemos eval search`
// reads it, nothing skipped: at least four long conversations of many
// sessions, hundreds of turns, at least 150 questions, some needing
// several turns and some asking when.
func TestEvalSetIsWhatTheIssueAsks(t *testing.T) {
	data, err := generate()
	require.NoError(t, err)
	ds, shape, skipped, err := searcheval.Parse(data)
	require.NoError(t, err)
	require.Equal(t, searcheval.ShapeMnemos, shape)
	require.Empty(t, skipped)
	require.GreaterOrEqual(t, len(ds.Conversations), 4)
	for _, c := range ds.Conversations {
		require.GreaterOrEqual(t, len(c.Sessions), 10, c.ID)
	}
	require.GreaterOrEqual(t, ds.Turns(), 500)
	require.GreaterOrEqual(t, ds.Questions(), 150)
	kinds := map[string]int{}
	for _, c := range ds.Conversations {
		for _, q := range c.Questions {
			kinds[q.Kind]++
			if q.Kind == "multi" {
				require.Greater(t, len(q.Evidence), 1, q.ID)
			}
		}
	}
	require.GreaterOrEqual(t, kinds["multi"], 10)
	require.GreaterOrEqual(t, kinds["time"], 10)
}

// TestParseSourceRefusesBadFiles: a conversation file that cannot be laid
// out is refused with its line.
func TestParseSourceRefusesBadFiles(t *testing.T) {
	head := "speakers: A B\nstart: 2026-01-01T00:00:00Z\nsessions: 2\n"
	for _, c := range []struct{ text, want string }{
		{head + "### owner=0\nA: hi\n? q => 2\n", `line 6: evidence "2" names no line`},
		{head + "### owner=0\nA: hi\n? q\n", "line 6: a question needs =>"},
		{head + "### owner=2\n", "line 4: owner is 0 or 1"},
		{head + "A: hi\n", `line 4: "A: hi" before the first thread`},
		{head + "### owner=0\nC: hi\n", `line 5: cannot read "C: hi"`},
		{"speakers: A\n", "line 1: want two speakers"},
		{"speakers: A B\n", "want speakers, start, sessions and threads"},
	} {
		_, err := parseSource(c.text)
		require.ErrorContains(t, err, c.want, c.text)
	}
}
