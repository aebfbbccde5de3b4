package searcheval

import (
	"math"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// BM25's parameters: term frequency saturation and length normalization,
// the usual values.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Tokens is the baseline's tokenizer: the text lowercased and split on
// every character that is not a letter or a digit. There is no stemming and
// no stop list: rare words weigh more through the inverse document
// frequency alone.
func Tokens(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// BM25 is an Okapi BM25 index over a fixed list of documents (k1 = 1.2,
// b = 0.75, idf = ln(1 + (N − n + 0.5)/(n + 0.5))).
type BM25 struct {
	docs   []map[string]int // term frequencies of each document
	length []int
	df     map[string]int
	avg    float64
}

// NewBM25 indexes docs; a document is named by its index in docs.
func NewBM25(docs []string) *BM25 {
	ix := &BM25{docs: make([]map[string]int, len(docs)), length: make([]int, len(docs)), df: map[string]int{}}
	total := 0
	for i, d := range docs {
		tf := map[string]int{}
		toks := Tokens(d)
		for _, t := range toks {
			tf[t]++
		}
		for t := range tf {
			ix.df[t]++
		}
		ix.docs[i], ix.length[i] = tf, len(toks)
		total += len(toks)
	}
	if len(docs) > 0 {
		ix.avg = float64(total) / float64(len(docs))
	}
	return ix
}

// Scored is a document's index and its score.
type Scored struct {
	Doc   int
	Score float64
}

// Search scores every document against the query's distinct tokens and
// returns the best limit with a score above 0, best first; equal scores
// keep the documents' order.
func (ix *BM25) Search(query string, limit int) []Scored {
	terms := Tokens(query)
	sort.Strings(terms) // the same sum in the same order every time
	terms = slices.Compact(terms)
	n := float64(len(ix.docs))
	var out []Scored
	for i, tf := range ix.docs {
		score := 0.0
		norm := bm25K1 * (1 - bm25B + bm25B*float64(ix.length[i])/ix.avg)
		for _, t := range terms {
			f := float64(tf[t])
			if f == 0 {
				continue
			}
			df := float64(ix.df[t])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			score += idf * f * (bm25K1 + 1) / (f + norm)
		}
		if score > 0 {
			out = append(out, Scored{Doc: i, Score: score})
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Score > out[b].Score })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
