package recall

import (
	"math"
	"strings"
	"unicode"
)

// BM25 parameters of the builtin selector. K1 saturates a term's frequency
// in a document, B weighs document length; Background is the number of
// notional documents that contain no query term, added to the candidates
// so that a term's weight does not collapse when there are few candidates
// (with three memories, a word in one of them is still a rare word).
const (
	K1         = 1.2
	B          = 0.75
	Background = 10
)

// MinScore is the builtin selector's score floor: a memory scoring below
// it is not surfaced, however few the candidates. A word of the request
// that only one memory has, once in a name and description of average
// length, scores from 2.1 (one candidate) to 5 (two hundred); a word a
// third of the candidates share scores 1.1 to 1.6. So a memory needs a rare
// word, or two ordinary ones, in common with the request.
const MinScore = 2.0

// Scored is a document's BM25 score.
type Scored struct {
	Index int
	Score float64
}

// Rank scores each document (as Terms returns them) against the query's
// terms with BM25 and returns those scoring at least floor, best first
// (ties in document order).
func Rank(query []string, docs [][]string, floor float64) []Scored {
	if len(docs) == 0 {
		return nil
	}
	qterms := map[string]bool{}
	for _, t := range query {
		qterms[t] = true
	}
	df := map[string]int{}
	total := 0
	tfs := make([]map[string]int, len(docs))
	for i, d := range docs {
		tfs[i] = map[string]int{}
		for _, t := range d {
			if !qterms[t] {
				continue
			}
			if tfs[i][t] == 0 {
				df[t]++
			}
			tfs[i][t]++
		}
		total += len(d)
	}
	avg := float64(total) / float64(len(docs))
	if avg == 0 {
		return nil
	}
	n := float64(len(docs) + Background)
	var out []Scored
	for i, d := range docs {
		var score float64
		for t, tf := range tfs[i] {
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			f := float64(tf)
			score += idf * f * (K1 + 1) / (f + K1*(1-B+B*float64(len(d))/avg))
		}
		if score > 0 && score >= floor {
			out = append(out, Scored{Index: i, Score: score})
		}
	}
	// Insertion sort: stable, and the lists are short.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Score > out[j-1].Score; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Terms splits text into the terms BM25 compares: lowercase runs of
// letters and digits, without common English function words, each cut to
// a rough stem so that "migrations" meets "migration" and "testing" meets
// "tests".
func Terms(text string) []string {
	var out []string
	for _, w := range words(text) {
		if stopWords[w] {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// words splits text into lowercase runs of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// stem strips the commonest English inflections: plural s, -ing, -ed, a
// final e. It is deliberately rough; the same word in two forms usually
// meets, and that is all lexical recall needs.
func stem(w string) string {
	n := len(w)
	switch {
	case n > 4 && strings.HasSuffix(w, "ies"):
		w = w[:n-3] + "y"
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:n-1]
	}
	switch n = len(w); {
	case n > 5 && strings.HasSuffix(w, "ing"):
		w = undouble(w[:n-3])
	case n > 4 && strings.HasSuffix(w, "ed"):
		w = undouble(w[:n-2])
	}
	if n = len(w); n > 4 && strings.HasSuffix(w, "e") {
		w = w[:n-1]
	}
	return w
}

// undouble drops the last letter of a stem ending in a doubled consonant
// ("runn" → "run"), except the doublings English keeps ("ll", "ss", "zz").
func undouble(w string) string {
	n := len(w)
	if n < 3 || w[n-1] != w[n-2] {
		return w
	}
	switch w[n-1] {
	case 'a', 'e', 'i', 'o', 'u', 'l', 's', 'z':
		return w
	}
	return w[:n-1]
}

// stopWords carry no topic of their own.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again all also am an and any are as at be been before being
		below between both but by can could did do does doing done down during each else few for from further had has
		have having he her here hers him his how i if in into is it its itself just let lets me more most my no nor not
		now of off on once only or other our ours out over own please same she should so some such than that the their
		theirs them then there these they this those through to too under until up us very was we were what when where
		which while who whom why will with would yes you your yours s t d ll m re ve`) {
		m[w] = true
	}
	return m
}()
