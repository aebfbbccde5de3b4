// Package consolidate is the deterministic consolidation of a scope's
// memories, with no model: near-exact duplicates merged into one memory,
// relative dates made absolute against each memory's own date, and the
// index re-sorted and trimmed to its limits. Plan computes it; Builtin is
// the builtin provider's answer to the dreaming task, which carries the plan
// out through the same tools a model uses.
package consolidate

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// Deletion is a memory a plan deletes, and why.
type Deletion struct {
	Name   memory.Name
	Reason string
}

// Result is what a plan does to a scope.
type Result struct {
	// Writes are the memories whose content changes, with their new content.
	Writes []memory.Document
	// Deletes are the duplicates merged into another memory.
	Deletes []Deletion
	// Index is the scope's index after the plan: one line per memory left,
	// most recently updated first, within the limits where it can be.
	Index []memory.Line
	// Merged counts the memories folded into others; Dates the relative
	// dates rewritten.
	Merged, Dates int
}

// Plan consolidates ms, the live memories of a scope (with their dates),
// whose index lines are index:
//   - every relative date is resolved against the memory's UpdatedAt (when
//     its current text was written), in its description and body;
//   - each group of near-exact duplicates (NearDuplicate) becomes one
//     memory: the one created first keeps its name and takes the text of the
//     one written last, plus the lines only the others had (Merge); the
//     others are deleted;
//   - the index lists every memory left once, most recently updated first
//     (a merged memory takes its group's latest date), each keeping its
//     title and hook (a hook that was its old description follows the new
//     one); lines of memories that are gone are dropped; when the index is
//     over l.IndexMaxBytes, the lines longer than their share of it have
//     their hooks shortened (and, if that is not enough, their titles
//     reset to the name). An index can only be as short in lines as the
//     memories are few: it keeps a line for each.
func Plan(ms []memory.Memory, index []memory.Line, l memory.Limits) Result {
	var res Result
	docs := make([]memory.Document, len(ms))
	for i, m := range ms {
		d := m.Document
		var n1, n2 int
		d.Description, n1 = ResolveDates(d.Description, m.UpdatedAt)
		d.Body, n2 = ResolveDates(d.Body, m.UpdatedAt)
		d = d.Canonical()
		if d.Validate(l) != nil {
			d = m.Document // a rewrite that would not be valid is not made
		} else {
			res.Dates += n1 + n2
		}
		docs[i] = d
	}
	gone := make([]bool, len(ms))
	latest := make([]int64, len(ms)) // the index's order: UnixNano of the latest date
	for i, m := range ms {
		latest[i] = m.UpdatedAt.UnixNano()
	}
	for _, group := range Clusters(docs) {
		first, last := group[0], group[0]
		for _, i := range group {
			if ms[i].CreatedAt.Before(ms[first].CreatedAt) || ms[i].CreatedAt.Equal(ms[first].CreatedAt) && ms[i].Name < ms[first].Name {
				first = i
			}
			if ms[i].UpdatedAt.After(ms[last].UpdatedAt) {
				last = i
			}
		}
		var others []memory.Document
		for _, i := range group {
			if i != last {
				others = append(others, docs[i])
			}
		}
		docs[first] = Merge(ms[first].Name, docs[last], others, l.MaxBytes)
		latest[first] = latest[last]
		for _, i := range group {
			if i != first {
				gone[i] = true
				res.Deletes = append(res.Deletes, Deletion{Name: ms[i].Name, Reason: "merged into " + ms[first].Name.File()})
				res.Merged++
			}
		}
	}
	for i, m := range ms {
		if !gone[i] && docs[i] != m.Document {
			res.Writes = append(res.Writes, docs[i])
		}
	}
	res.Index = planIndex(ms, docs, gone, latest, index, l)
	return res
}

// planIndex is the index of the memories left (see Plan).
func planIndex(ms []memory.Memory, docs []memory.Document, gone []bool, latest []int64, index []memory.Line, l memory.Limits) []memory.Line {
	old := map[memory.Name]memory.Line{}
	for _, ln := range index {
		if _, dup := old[ln.Name]; !dup {
			old[ln.Name] = ln
		}
	}
	var order []int
	for i := range ms {
		if !gone[i] {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		i, j := order[a], order[b]
		if latest[i] != latest[j] {
			return latest[i] > latest[j]
		}
		return ms[i].Name < ms[j].Name
	})
	lines := make([]memory.Line, 0, len(order))
	for _, i := range order {
		m, d := ms[i], docs[i]
		ln := memory.DefaultLine(m.Name, d.Description, l.IndexLineMaxChars)
		if was, ok := old[m.Name]; ok && was.Hook != memory.DefaultLine(m.Name, m.Description, l.IndexLineMaxChars).Hook {
			ln.Title, ln.Hook = was.Title, was.Hook // an editor chose this line
		} else if ok {
			ln.Title = was.Title
		}
		lines = append(lines, ln)
	}
	return Fit(lines, l)
}

// Fit shortens index lines so the index stays within l: every line within
// l.IndexLineMaxChars, and when the whole is over l.IndexMaxBytes, each line
// longer than an equal share of it cut to that share — its hook shortened
// (ending in "…"), then if need be dropped and the title reset to the name.
func Fit(lines []memory.Line, l memory.Limits) []memory.Line {
	out := slices.Clone(lines)
	share := l.IndexMaxBytes
	if size := len(memory.FormatIndex(out)); size > l.IndexMaxBytes && len(out) > 0 {
		share = l.IndexMaxBytes/len(out) - 1 // its newline
	}
	for i, ln := range out {
		out[i] = fitLine(ln, l.IndexLineMaxChars, share)
	}
	return out
}

// fitLine cuts ln to at most maxChars characters and maxBytes bytes.
func fitLine(ln memory.Line, maxChars, maxBytes int) memory.Line {
	fits := func(l memory.Line) bool {
		s := l.String()
		return utf8.RuneCountInString(s) <= maxChars && len(s) <= maxBytes
	}
	if fits(ln) {
		return ln
	}
	for ln.Hook != "" && !fits(ln) {
		r := []rune(strings.TrimSuffix(ln.Hook, "…"))
		over := max(len(ln.String())-maxBytes, utf8.RuneCountInString(ln.String())-maxChars, 1)
		keep := len(r) - over
		if keep < 8 {
			ln.Hook = ""
			break
		}
		ln.Hook = strings.TrimRightFunc(string(r[:keep]), unicode.IsSpace) + "…"
	}
	if !fits(ln) {
		ln.Title = string(ln.Name)
	}
	return ln
}

// Summary says what a plan did, for the end of the builtin's run.
func (r Result) Summary() string {
	return fmt.Sprintf("Consolidated without a model: %d near-duplicate memories merged into others, %d relative dates made absolute, %d memories rewritten, the index re-sorted to %d lines.",
		r.Merged, r.Dates, len(r.Writes), len(r.Index))
}
