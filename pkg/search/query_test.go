package search_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/search"
)

func TestParseReadsWordsPhrasesAndExclusions(t *testing.T) {
	t.Parallel()
	q, err := search.Parse(`When did Caroline go to the "LGBTQ support group"? -online -"zoom call" e-mail`)
	require.NoError(t, err)
	assert.Equal(t, []string{"when", "did", "caroline", "go", "to", "the", "lgbtq", "support", "group", "e", "mail"}, q.Words)
	assert.Equal(t, [][]string{{"lgbtq", "support", "group"}}, q.Phrases)
	assert.Equal(t, [][]string{{"online"}, {"zoom", "call"}}, q.Excluded)
	assert.Equal(t, `'lgbtq support group' & !'online' & !'zoom call'`, q.Filter())
	assert.Equal(t, `'when' | 'did' | 'caroline' | 'go' | 'to' | 'the' | 'lgbtq' | 'support' | 'group' | 'e' | 'mail'`, q.Match())

	q, err = search.Parse(`"unterminated phrase`)
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"unterminated", "phrase"}}, q.Phrases)
	assert.Equal(t, `'unterminated phrase'`, q.Filter())
	q, err = search.Parse("Ünïcode Straße 42")
	require.NoError(t, err)
	assert.Equal(t, []string{"ünïcode", "straße", "42"}, q.Words)
	assert.Empty(t, q.Filter())
}

func TestParseRefusesWhatCannotBeSearched(t *testing.T) {
	t.Parallel()
	for query, reason := range map[string]string{
		"":                       search.ReasonEmpty,
		"  ?! ":                  search.ReasonEmpty,
		"-alone":                 search.ReasonEmpty,
		`-"only this"`:           search.ReasonEmpty,
		strings.Repeat("x", 501): search.ReasonTooLong,
		"nul\x00":                search.ReasonTooLong,
		"bad \xff utf8":          search.ReasonTooLong,
		many():                   search.ReasonTooMany,
	} {
		_, err := search.Parse(query)
		var bad *search.InputError
		require.True(t, errors.As(err, &bad), "%q: %v", query, err)
		assert.Equal(t, reason, bad.Reason, query)
	}
}

// many is a query of 33 distinct words.
func many() string {
	var b strings.Builder
	for i := range 33 {
		b.WriteString("w" + strconv.Itoa(i) + " ")
	}
	return b.String()
}

// FuzzParse: on any input, Parse answers a query or an *InputError, never
// panics; a query's words are non-empty runs of lowercase letters and
// digits, each once, its phrases' words among them, at most MaxWords in
// all; its tsqueries quote every operand; and writing it back (String)
// parses to the same query's words, phrases and exclusions.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`When did Caroline go to the LGBTQ support group?`,
		`"support group" -online`, `-"zoom call" meeting`, `"unterminated`, `--x y`, `a"b"c`, `''' \\ "`, `Straße 42 ünï`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := search.Parse(s)
		if err != nil {
			var bad *search.InputError
			require.ErrorAs(t, err, &bad)
			require.NotEmpty(t, bad.Reason)
			return
		}
		require.NotEmpty(t, q.Words)
		seen := map[string]bool{}
		for _, w := range q.Words {
			require.False(t, seen[w], "%q twice", w)
			seen[w] = true
			checkWord(t, w)
		}
		distinct := len(seen)
		for _, p := range q.Phrases {
			require.NotEmpty(t, p)
			for _, w := range p {
				require.True(t, seen[w], "phrase word %q among the words", w)
			}
		}
		for _, p := range q.Excluded {
			require.NotEmpty(t, p)
			for _, w := range p {
				checkWord(t, w)
				if !seen[w] {
					seen[w] = true
					distinct++
				}
			}
		}
		require.LessOrEqual(t, distinct, search.MaxWords)
		for _, tsq := range []string{q.Match(), q.Filter()} {
			require.Zero(t, strings.Count(tsq, "'")%2, "every operand quoted: %s", tsq)
			require.NotContains(t, tsq, `\`)
		}
		again, err := search.Parse(q.String())
		require.NoError(t, err, q.String())
		require.ElementsMatch(t, q.Words, again.Words)
		require.Equal(t, q.Phrases, again.Phrases)
		require.Equal(t, q.Excluded, again.Excluded)
	})
}

func checkWord(t *testing.T, w string) {
	t.Helper()
	require.NotEmpty(t, w)
	require.True(t, utf8.ValidString(w))
	for _, r := range w {
		require.True(t, unicode.IsLetter(r) || unicode.IsDigit(r), "%q holds %q", w, r)
		require.NotEqual(t, "'", string(r))
	}
	require.Equal(t, strings.ToLower(w), w)
}
