package search

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds of a query.
const (
	// MaxQueryChars bounds a query, in characters.
	MaxQueryChars = 500
	// MaxWords bounds the distinct words of a query, excluded ones
	// included.
	MaxWords = 32
)

// Query is a search query parsed: plain words, any of which may match,
// "quoted phrases", each of which every hit holds, and -words (or
// -"phrases"), which no hit holds. A word is a run of letters and digits,
// lowercased; anything else separates words. Postgres stems the words
// (English) when it looks them up.
type Query struct {
	// Words are the words a hit is ranked by: the plain words and the
	// phrases' words, each once, in the order the query names them.
	Words []string
	// Phrases are the quoted phrases (one quoted word is a phrase of one).
	Phrases [][]string
	// Excluded are the -words and -"phrases".
	Excluded [][]string
}

// InputError is a query that cannot be searched, with what is wrong.
type InputError struct {
	// Reason is the stable code of the refusal.
	Reason string
	Detail string
}

func (e *InputError) Error() string { return e.Detail }

// Reasons of refused searches: the error codes the API answers with and
// the reason label of mnemos.search.requests.
const (
	ReasonEmpty      = "empty_query"    // no word to search for
	ReasonTooLong    = "query_too_long" // over MaxQueryChars, a NUL, not UTF-8
	ReasonTooMany    = "too_many_words" // over MaxWords
	ReasonBadLimit   = "bad_limit"      // the limit is not 1 to MaxLimit
	ReasonBadSource  = "bad_source"     // the source is not memory or message
	ReasonBadScope   = "bad_scope"      // the scope is not one
	ReasonBadSession = "bad_session_id" // the session id is not one
)

func refuse(reason, format string, args ...any) *InputError {
	return &InputError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Parse reads a query. It refuses one with no plain or quoted word, one
// longer than MaxQueryChars or holding a NUL or invalid UTF-8, and one of
// more than MaxWords distinct words.
func Parse(s string) (Query, error) {
	if utf8.RuneCountInString(s) > MaxQueryChars || strings.ContainsRune(s, 0) || !utf8.ValidString(s) {
		return Query{}, refuse(ReasonTooLong, "the query is longer than %d characters, holds a NUL or is not UTF-8: search for something specific", MaxQueryChars)
	}
	var q Query
	rest := s
	for {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			break
		}
		exclude := false
		if strings.HasPrefix(rest, "-") {
			exclude, rest = true, rest[1:]
		}
		var words []string
		quoted := strings.HasPrefix(rest, `"`)
		if quoted {
			text, after, _ := strings.Cut(rest[1:], `"`)
			words, rest = splitWords(text), after
		} else {
			end := strings.IndexFunc(rest, unicode.IsSpace)
			if end < 0 {
				end = len(rest)
			}
			words, rest = splitWords(rest[:end]), rest[end:]
		}
		q.add(words, exclude, quoted)
	}
	switch {
	case len(q.Words) == 0:
		return Query{}, refuse(ReasonEmpty, "the query %q holds no word to search for", s)
	case q.distinct() > MaxWords:
		return Query{}, refuse(ReasonTooMany, "the query holds more than %d distinct words: search for something specific", MaxWords)
	}
	return q, nil
}

// add files the words of one term: excluded, a phrase, or plain words.
func (q *Query) add(words []string, exclude, quoted bool) {
	switch {
	case len(words) == 0:
	case exclude:
		q.Excluded = appendNew(q.Excluded, words)
	case quoted:
		q.Phrases = appendNew(q.Phrases, words)
		for _, w := range words {
			q.addWord(w)
		}
	default:
		for _, w := range words {
			q.addWord(w)
		}
	}
}

func (q *Query) addWord(w string) {
	if !slices.Contains(q.Words, w) {
		q.Words = append(q.Words, w)
	}
}

// appendNew appends phrase to list unless list holds it.
func appendNew(list [][]string, phrase []string) [][]string {
	if slices.ContainsFunc(list, func(p []string) bool { return slices.Equal(p, phrase) }) {
		return list
	}
	return append(list, phrase)
}

func (q Query) distinct() int {
	seen := map[string]bool{}
	for _, w := range q.Words {
		seen[w] = true
	}
	for _, p := range q.Excluded {
		for _, w := range p {
			seen[w] = true
		}
	}
	return len(seen)
}

// splitWords returns the runs of letters and digits of s, lowercased.
func splitWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !isWordRune(r) })
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// Match is a tsquery (to_tsquery's syntax, English) that any of the
// query's words matches: what snippets mark.
func (q Query) Match() string {
	parts := make([]string, len(q.Words))
	for i, w := range q.Words {
		parts[i] = operand([]string{w})
	}
	return strings.Join(parts, " | ")
}

// Filter is a tsquery every hit matches besides holding a word: each
// phrase, and none of the excluded words and phrases; "" when the query
// has neither.
func (q Query) Filter() string {
	var parts []string
	for _, p := range q.Phrases {
		parts = append(parts, operand(p))
	}
	for _, p := range q.Excluded {
		parts = append(parts, "!"+operand(p))
	}
	return strings.Join(parts, " & ")
}

// operand quotes words as one to_tsquery operand: a quoted text of more
// than one word is a phrase. Words are letters and digits, which a quoted
// operand holds as they are.
func operand(words []string) string {
	return "'" + strings.Join(words, " ") + "'"
}

// String writes the query back in its own syntax: the plain words, the
// phrases quoted, the excluded terms after a '-'.
func (q Query) String() string {
	var parts []string
	inPhrase := map[string]bool{}
	for _, p := range q.Phrases {
		for _, w := range p {
			inPhrase[w] = true
		}
	}
	for _, w := range q.Words {
		if !inPhrase[w] {
			parts = append(parts, w)
		}
	}
	for _, p := range q.Phrases {
		parts = append(parts, `"`+strings.Join(p, " ")+`"`)
	}
	for _, p := range q.Excluded {
		parts = append(parts, `-"`+strings.Join(p, " ")+`"`)
	}
	return strings.Join(parts, " ")
}
