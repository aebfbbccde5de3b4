// Package compaction holds the compaction algorithms of docs/compaction.md, as pure
// logic: the LLM summary (Summarize) with its prompt-too-long retries, the
// extractive summary that needs no model (Extractive, BuiltinSummarizer),
// what is restored after a compaction (Restore), and where session-memory
// compaction starts keeping messages (KeepFrom). The only I/O is the
// llm.Provider that Summarize calls; storage, events and the boundary marker
// belong to the compactor service.
package compaction

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// The section headings of a compaction summary, in order. The LLM summary is
// asked for them and the extractive summary fills them, so both read alike.
const (
	HeadingIntent         = "Primary Request and Intent"
	HeadingConcepts       = "Key Technical Concepts"
	HeadingFiles          = "Files and Code Sections"
	HeadingErrors         = "Errors and Fixes"
	HeadingProblemSolving = "Problem Solving"
	HeadingUserMessages   = "All User Messages"
	HeadingPending        = "Pending Tasks"
	HeadingCurrentWork    = "Current Work"
	HeadingNextStep       = "Optional Next Step"
)

// Headings returns the section headings of a summary, in order. The slice is
// the caller's to keep.
func Headings() []string {
	return []string{
		HeadingIntent, HeadingConcepts, HeadingFiles, HeadingErrors, HeadingProblemSolving,
		HeadingUserMessages, HeadingPending, HeadingCurrentWork, HeadingNextStep,
	}
}

// sectionTitle is how a summary writes the n-th (1-based) heading.
func sectionTitle(n int, heading string) string {
	return fmt.Sprintf("## %d. %s", n, heading)
}

// ToolNames maps the tenant's tool names to the roles compaction cares
// about. A nil field takes its default; an empty non-nil slice means the
// tenant has no such tool.
type ToolNames struct {
	// Read tools: their tool_use input names a file (file_path, path or
	// notebook_path) and their result is the file's content. Default ["Read"].
	Read []string
	// Edit tools change a file. Default ["Edit", "MultiEdit", "NotebookEdit"].
	Edit []string
	// Write tools create or overwrite a file. Default ["Write"].
	Write []string
	// Shell tools run a command (input "command"). Default ["Bash"].
	Shell []string
	// Todo tools replace the todo list (input "todos"). Default ["TodoWrite"].
	Todo []string
}

// DefaultToolNames is the mapping used for every nil field of ToolNames.
func DefaultToolNames() ToolNames {
	return ToolNames{
		Read:  []string{"Read"},
		Edit:  []string{"Edit", "MultiEdit", "NotebookEdit"},
		Write: []string{"Write"},
		Shell: []string{"Bash"},
		Todo:  []string{"TodoWrite"},
	}
}

func (n ToolNames) withDefaults() ToolNames {
	d := DefaultToolNames()
	if n.Read == nil {
		n.Read = d.Read
	}
	if n.Edit == nil {
		n.Edit = d.Edit
	}
	if n.Write == nil {
		n.Write = d.Write
	}
	if n.Shell == nil {
		n.Shell = d.Shell
	}
	if n.Todo == nil {
		n.Todo = d.Todo
	}
	return n
}

func isOneOf(name string, names []string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// inputPath returns the file a tool_use input names: its file_path, else
// path, else notebook_path; "" when there is none or the input is not a
// JSON object.
func inputPath(input json.RawMessage) string {
	var in struct {
		FilePath     string `json:"file_path"`
		Path         string `json:"path"`
		NotebookPath string `json:"notebook_path"`
	}
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	for _, p := range []string{in.FilePath, in.Path, in.NotebookPath} {
		if p != "" {
			return p
		}
	}
	return ""
}

// inputString returns the string field key of a tool_use input, or "".
func inputString(input json.RawMessage, key string) string {
	var in map[string]json.RawMessage
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(in[key], &s) != nil {
		return ""
	}
	return s
}

// messageText joins the non-blank text blocks of a message's content.
func messageText(c turn.Content) string {
	var parts []string
	for _, b := range c {
		if b.Type == turn.BlockText && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// resultText renders a tool result's content as text: its text blocks, with
// [image] and [document] standing in for media.
func resultText(c *turn.Content) string {
	if c == nil {
		return ""
	}
	var parts []string
	for _, b := range *c {
		switch b.Type {
		case turn.BlockText:
			parts = append(parts, b.Text)
		case turn.BlockImage:
			parts = append(parts, imagePlaceholder)
		case turn.BlockDocument:
			parts = append(parts, documentPlaceholder)
		}
	}
	return strings.Join(parts, "\n")
}

// The text that stands in for media in what a model or a summary sees.
const (
	imagePlaceholder    = "[image]"
	documentPlaceholder = "[document]"
)

// OneLine folds s onto one line (runs of white space become one space)
// and bounds it to n bytes, cut on a rune boundary and ended with "…".
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Clip bounds s to at most n bytes. A longer s is cut on a rune boundary and
// ends with a marker saying how many bytes were cut; the marker counts
// toward n, unless n is too small to hold it (then s is only cut).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	k := n - len(cutMarker(len(s)))
	if k < 0 {
		return s[:runeStart(s, n)]
	}
	k = runeStart(s, k)
	// The marker of what is actually cut may be a digit shorter: use the byte.
	if k2 := runeStart(s, n-len(cutMarker(len(s)-k))); k2 > k {
		k = k2
	}
	return s[:k] + cutMarker(len(s)-k)
}

func cutMarker(cut int) string {
	return fmt.Sprintf("\n[… truncated: %d more bytes]", cut)
}

// runeStart returns the largest i ≤ n that starts a rune of s (or is len(s)).
func runeStart(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
