package memory

import (
	_ "embed" // the memory section's instructions
	"fmt"
	"strings"
)

// Truncation says what TruncateIndex cut.
type Truncation struct {
	// TotalLines and TotalBytes measure the whole index; KeptLines and
	// KeptBytes what was kept (bytes count each line's newline).
	TotalLines, TotalBytes int
	KeptLines, KeptBytes   int
	// By is "lines" or "bytes": the limit that cut ("" when nothing was cut).
	By string
}

// Cut reports whether anything was cut.
func (t Truncation) Cut() bool { return t.By != "" }

// TruncateIndex keeps the longest run of whole lines from the start of an
// index that holds at most maxLines lines and at most maxBytes bytes (each
// line counted with its newline), whichever limit comes first. Blank lines
// are not lines of the index and are dropped. kept ends with a newline
// unless it is empty.
func TruncateIndex(content string, maxLines, maxBytes int) (kept string, t Truncation) {
	lines := indexLines(content)
	for _, l := range lines {
		t.TotalBytes += len(l) + 1
	}
	t.TotalLines = len(lines)
	var b strings.Builder
	for _, l := range lines {
		switch {
		case t.KeptLines == maxLines:
			t.By = "lines"
		case t.KeptBytes+len(l)+1 > maxBytes:
			t.By = "bytes"
		}
		if t.By != "" {
			break
		}
		b.WriteString(l)
		b.WriteByte('\n')
		t.KeptLines++
		t.KeptBytes += len(l) + 1
	}
	return b.String(), t
}

// indexLines splits content into its non-blank lines, trailing blanks
// dropped.
func indexLines(content string) []string {
	var out []string
	for _, raw := range strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n") {
		if raw = strings.TrimRight(raw, " \t\r"); raw != "" {
			out = append(out, raw)
		}
	}
	return out
}

// Warning is the line that follows a truncated index in a context, naming
// what was cut; "" when nothing was.
func (t Truncation) Warning(maxLines, maxBytes int) string {
	if !t.Cut() {
		return ""
	}
	limit := fmt.Sprintf("%d lines", maxLines)
	if t.By == "bytes" {
		limit = fmt.Sprintf("%d bytes", maxBytes)
	}
	cut := t.TotalLines - t.KeptLines
	which := fmt.Sprintf("lines %d-%d (%d memories, %d bytes) were", t.KeptLines+1, t.TotalLines, cut, t.TotalBytes-t.KeptBytes)
	if cut == 1 {
		which = fmt.Sprintf("line %d (1 memory, %d bytes) was", t.TotalLines, t.TotalBytes-t.KeptBytes)
	}
	return fmt.Sprintf("> WARNING: this MEMORY.md has %d lines (%d bytes), over the limit of %s; "+
		"%s not loaded. Read the index with the memory tools to see the rest, "+
		"and keep the index to one short line per memory.",
		t.TotalLines, t.TotalBytes, limit, which)
}

// ScopeIndex is the stored index of one scope.
type ScopeIndex struct {
	Scope   Scope
	Content string
}

//go:embed prompts/instructions.md
var instructionsText string

// Instructions is the first text of the memory section: how to use memory
// (prompts/instructions.md).
var Instructions = strings.TrimSpace(instructionsText)

// Section renders the memory section of a context: Instructions, then for
// each scope its index truncated to l (with the warning line when cut). It
// returns the texts of the system blocks, none when there is no scope.
func Section(indexes []ScopeIndex, l Limits) []string {
	if len(indexes) == 0 {
		return nil
	}
	out := []string{Instructions}
	for _, ix := range indexes {
		kept, t := TruncateIndex(ix.Content, l.IndexMaxLines, l.IndexMaxBytes)
		var b strings.Builder
		fmt.Fprintf(&b, "## MEMORY.md of %s (%s)\n\n", ix.Scope, scopeLabel(ix.Scope.Kind))
		if kept == "" && !t.Cut() {
			b.WriteString("(no memories saved in this scope yet)\n")
		}
		b.WriteString(kept)
		if w := t.Warning(l.IndexMaxLines, l.IndexMaxBytes); w != "" {
			b.WriteString(w)
			b.WriteByte('\n')
		}
		out = append(out, strings.TrimSuffix(b.String(), "\n"))
	}
	return out
}

func scopeLabel(k Kind) string {
	switch k {
	case KindUser:
		return "the user's memories"
	case KindProject:
		return "the project's memories, shared with everyone on it"
	case KindLocal:
		return "the user's private memories of this checkout of the project"
	default:
		return "the memories of your agent type"
	}
}
