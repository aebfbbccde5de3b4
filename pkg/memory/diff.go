package memory

import (
	"fmt"
	"strings"
)

// DiffRevisions is the unified diff (three lines of context) from a's
// markdown to b's, headed "--- <name>.md@<rev>" and "+++ <name>.md@<rev>". A
// deleted revision diffs as an empty document. Equal documents give "".
func DiffRevisions(a, b Revision) string {
	return UnifiedDiff(revisionText(a), revisionText(b),
		fmt.Sprintf("%s@%d", a.Name.File(), a.Revision), fmt.Sprintf("%s@%d", b.Name.File(), b.Revision))
}

func revisionText(r Revision) string {
	if r.Deleted {
		return ""
	}
	return r.Markdown()
}

// diffContext is how many unchanged lines surround a change.
const diffContext = 3

// maxDiffCells bounds the table of the line diff; larger inputs diff as a
// whole replacement.
const maxDiffCells = 4 << 20

// UnifiedDiff returns the unified diff of two texts, line by line; "" when
// they are equal.
func UnifiedDiff(a, b, nameA, nameB string) string {
	if a == b {
		return ""
	}
	x, y := splitLines(a), splitLines(b)
	ops := diffLines(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
	// Group the edit script into hunks of changes with their context.
	for start := 0; start < len(ops); {
		first := -1
		for i := start; i < len(ops); i++ {
			if ops[i].kind != ' ' {
				first = i
				break
			}
		}
		if first < 0 {
			break
		}
		lo := max(first-diffContext, start)
		hi, unchanged := first, 0
		for i := first; i < len(ops); i++ {
			if ops[i].kind == ' ' {
				unchanged++
				if unchanged > 2*diffContext {
					break
				}
			} else {
				unchanged = 0
				hi = i
			}
		}
		end := min(hi+diffContext+1, len(ops))
		writeHunk(&out, ops[lo:end])
		start = end
	}
	return out.String()
}

type diffOp struct {
	kind         byte // ' ', '-', '+'
	text         string
	lineA, lineB int // 1-based line numbers in a and b before this op
}

func writeHunk(out *strings.Builder, ops []diffOp) {
	var na, nb int
	for _, op := range ops {
		if op.kind != '+' {
			na++
		}
		if op.kind != '-' {
			nb++
		}
	}
	startA, startB := ops[0].lineA, ops[0].lineB
	if na == 0 {
		startA--
	}
	if nb == 0 {
		startB--
	}
	fmt.Fprintf(out, "@@ -%d,%d +%d,%d @@\n", startA, na, startB, nb)
	for _, op := range ops {
		out.WriteByte(op.kind)
		out.WriteString(op.text)
		out.WriteByte('\n')
	}
}

// splitLines splits s into lines without their newlines.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// diffLines is a longest-common-subsequence edit script from x to y.
func diffLines(x, y []string) []diffOp {
	// Common prefix and suffix need no table.
	p := 0
	for p < len(x) && p < len(y) && x[p] == y[p] {
		p++
	}
	s := 0
	for s < len(x)-p && s < len(y)-p && x[len(x)-1-s] == y[len(y)-1-s] {
		s++
	}
	e := &editScript{la: 1, lb: 1}
	for _, l := range x[:p] {
		e.emit(' ', l)
	}
	e.middle(x[p:len(x)-s], y[p:len(y)-s])
	for _, l := range x[len(x)-s:] {
		e.emit(' ', l)
	}
	return e.ops
}

// editScript collects diff operations, numbering lines on both sides.
type editScript struct {
	ops    []diffOp
	la, lb int
}

func (e *editScript) emit(kind byte, text string) {
	e.ops = append(e.ops, diffOp{kind: kind, text: text, lineA: e.la, lineB: e.lb})
	if kind != '+' {
		e.la++
	}
	if kind != '-' {
		e.lb++
	}
}

// middle emits the edit script of the part between the common prefix and
// suffix: by the LCS table when it fits in maxDiffCells, else as a removal
// of all of mx and an addition of all of my.
func (e *editScript) middle(mx, my []string) {
	n, m := len(mx), len(my)
	if (n+1)*(m+1) > maxDiffCells {
		for _, l := range mx {
			e.emit('-', l)
		}
		for _, l := range my {
			e.emit('+', l)
		}
		return
	}
	// lcs[i][j]: the LCS length of mx[i:] and my[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if mx[i] == my[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && mx[i] == my[j]:
			e.emit(' ', mx[i])
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] > lcs[i+1][j]):
			e.emit('+', my[j])
			j++
		default:
			e.emit('-', mx[i])
			i++
		}
	}
}
