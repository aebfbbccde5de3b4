package consolidate

import (
	"sort"
	"strings"
	"unicode"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// Two memories are near-exact duplicates when they have the same type and
// their texts (description and body) are the same once normalized —
// lowercased, every run of characters that are not letters or digits made
// one space — or, when each holds at least MinTokens distinct words, when
// the sets of their words overlap by at least MinSimilarity (Jaccard:
// shared words over all words). Names do not count: duplicates are usually
// the same fact saved under two names.
const (
	MinSimilarity = 0.9
	MinTokens     = 8
)

// Normalize is a text as the duplicate test compares it.
func Normalize(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}), " ")
}

func words(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(s) {
		out[w] = true
	}
	return out
}

// Similarity is the Jaccard similarity of two sets of words.
func Similarity(a, b map[string]bool) float64 {
	if len(a) == 0 && len(b) == 0 {
		return 1
	}
	shared := 0
	for w := range a {
		if b[w] {
			shared++
		}
	}
	return float64(shared) / float64(len(a)+len(b)-shared)
}

// sample is what the duplicate test reads of a document.
type sample struct {
	typ   memory.Type
	text  string
	words map[string]bool
}

func sampleOf(d memory.Document) sample {
	t := Normalize(d.Description + "\n" + d.Body)
	return sample{typ: d.Type, text: t, words: words(t)}
}

func (a sample) duplicates(b sample) bool {
	if a.typ != b.typ {
		return false
	}
	if a.text == b.text {
		return true
	}
	return len(a.words) >= MinTokens && len(b.words) >= MinTokens && Similarity(a.words, b.words) >= MinSimilarity
}

// NearDuplicate reports whether a and b are near-exact duplicates.
func NearDuplicate(a, b memory.Document) bool { return sampleOf(a).duplicates(sampleOf(b)) }

// Clusters groups the indexes of docs into sets of near-exact duplicates
// (joined transitively); only groups of two or more are returned, each in
// index order, the groups by their first index.
func Clusters(docs []memory.Document) [][]int {
	parent := make([]int, len(docs))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	samples := make([]sample, len(docs))
	for i, d := range docs {
		samples[i] = sampleOf(d)
	}
	for i := range docs {
		for j := i + 1; j < len(docs); j++ {
			if find(i) != find(j) && samples[i].duplicates(samples[j]) {
				parent[find(j)] = find(i)
			}
		}
	}
	groups := map[int][]int{}
	for i := range docs {
		r := find(i)
		groups[r] = append(groups[r], i)
	}
	var out [][]int
	for _, g := range groups {
		if len(g) > 1 {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// Merge folds near-exact duplicates into one document named name: the
// description and body of latest (the most recently written), then every
// body line of the others whose normalized text it does not hold yet, so
// nothing one of them said is lost. Lines are added only while the result
// stays within maxBytes as markdown.
func Merge(name memory.Name, latest memory.Document, others []memory.Document, maxBytes int) memory.Document {
	out := memory.Document{Name: name, Description: latest.Description, Type: latest.Type, Body: latest.Body}
	have := map[string]bool{}
	for _, l := range strings.Split(latest.Body, "\n") {
		have[Normalize(l)] = true
	}
	for _, o := range others {
		for _, l := range strings.Split(o.Body, "\n") {
			k := Normalize(l)
			if k == "" || have[k] {
				continue
			}
			next := out
			next.Body = strings.TrimRight(out.Body, "\n") + "\n" + l
			if len(next.Canonical().Markdown()) > maxBytes {
				continue
			}
			out, have[k] = next, true
		}
	}
	return out.Canonical()
}
