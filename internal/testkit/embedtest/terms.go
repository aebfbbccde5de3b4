package embedtest

import (
	"strings"
	"unicode"
)

// Terms is how the server reads a text, and the keys Concepts maps:
// lowercase runs of letters and digits, without common English function
// words, each cut to a rough stem so that "migrations" meets "migration"
// and "testing" meets "tests".
func Terms(text string) []string {
	var out []string
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		if stopWords[w] {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// stem strips the commonest English inflections: plural s, -ing, -ed, a
// final e. It is deliberately rough; the same word in two forms usually
// meets, and that is all the vectors need.
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
