package compaction

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// ExtractLimits bounds the extractive summary. Sizes are in bytes of UTF-8
// ("characters"), so they bound the token estimate too (bytes/4). A field at
// 0 or below takes its default.
type ExtractLimits struct {
	// MessageChars bounds one user message, the first and the latest request
	// and the agent's latest text. Default 2,000.
	MessageChars int
	// UserMessagesChars bounds the section of all user messages. Default 40,000.
	UserMessagesChars int
	// ItemChars bounds one tool error or one shell command. Default 500.
	ItemChars int
	// ListChars bounds each list: tools used, files touched, tool errors,
	// shell commands, pending tasks. Default 4,000.
	ListChars int
	// TotalChars bounds the whole summary. Default 60,000 (about 15K tokens).
	TotalChars int
	// Tools maps the tenant's tool names.
	Tools ToolNames
	// Focus is the compaction's instructions: the lines that name what they
	// ask to keep are kept in a section of their own (focus.go).
	Focus string
}

// Default extractive limits.
const (
	DefaultMessageChars      = 2_000
	DefaultUserMessagesChars = 40_000
	DefaultItemChars         = 500
	DefaultListChars         = 4_000
	DefaultTotalChars        = 60_000
)

func (l ExtractLimits) withDefaults() ExtractLimits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MessageChars, DefaultMessageChars)
	def(&l.UserMessagesChars, DefaultUserMessagesChars)
	def(&l.ItemChars, DefaultItemChars)
	def(&l.ListChars, DefaultListChars)
	def(&l.TotalChars, DefaultTotalChars)
	l.Tools = l.Tools.withDefaults()
	return l
}

// extractiveNote opens every extractive summary, so that it is never taken
// for a model's work.
const extractiveNote = "(Extractive summary, built without a language model from the conversation's own messages.)"

// noneRecorded fills a section the data says nothing about.
const noneRecorded = "None recorded."

// Extractive builds a summary without a model (see docs/compaction.md), under the same
// headings as the LLM summary: the first user request; the tools used; every
// file read, edited or written; the tool calls that failed; the shell
// commands run; every user message verbatim; the pending items of the latest
// todo list; the agent's latest text as the current work; and the latest
// user request, quoted. A user message is the text of a message that is not
// the assistant's, outside tool results. Each part is bounded by lim, and
// the whole by lim.TotalChars; a list that is too long keeps its first and
// its most recent items and says how many it left out. The output depends
// only on its input.
func Extractive(msgs []view.Message, lim ExtractLimits) string {
	lim = lim.withDefaults()
	f := ExtractFacts(msgs, lim.Tools)

	body := map[string]string{
		HeadingIntent:         labelled("The first request in this part of the conversation:", Clip(first(f.UserTexts), lim.MessageChars)),
		HeadingConcepts:       labelled("Tools used, with the number of calls:", FitList(f.ToolLines(), lim.ListChars, "tools")),
		HeadingFiles:          labelled("Files touched:", FitList(f.FileLines(), lim.ListChars, "files")),
		HeadingErrors:         labelled("Tool calls that failed:", FitList(clipAll(f.Errors, lim.ItemChars), lim.ListChars, "errors")),
		HeadingProblemSolving: labelled("Shell commands run, in order:", FitList(clipAll(f.Commands, lim.ItemChars), lim.ListChars, "commands")),
		HeadingPending:        labelled("Open items of the latest todo list:", FitList(f.PendingTodos(), lim.ListChars, "items")),
		HeadingCurrentWork:    labelled("The agent's latest message:", Clip(f.LastAssistant, lim.MessageChars)),
		HeadingNextStep:       labelled("Continue with the user's latest request, quoted:", quote(Clip(last(f.UserTexts), lim.MessageChars))),
	}
	focus := focusSection(msgs, lim)
	// The user messages get what the rest leaves of the total.
	used := len(extractiveNote) + len(focus) + 1
	for i, h := range Headings() {
		used += 1 + len(sectionTitle(i+1, h)) + 1 + len(body[h]) + 1
	}
	budget := min(lim.UserMessagesChars, lim.TotalChars-used)
	body[HeadingUserMessages] = labelled("", FitList(clipAll(f.UserTexts, lim.MessageChars), budget, "user messages"))

	var b strings.Builder
	b.WriteString(extractiveNote)
	b.WriteString(focus)
	b.WriteString("\n")
	for i, h := range Headings() {
		b.WriteString("\n")
		b.WriteString(sectionTitle(i+1, h))
		b.WriteString("\n")
		b.WriteString(body[h])
		b.WriteString("\n")
	}
	return Clip(strings.TrimSuffix(b.String(), "\n"), lim.TotalChars)
}

// labelled writes body under a label, or noneRecorded when body is empty.
func labelled(label, body string) string {
	switch {
	case body == "":
		return noneRecorded
	case label == "":
		return body
	}
	return label + "\n" + body
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func last(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

func clipAll(items []string, n int) []string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = Clip(s, n)
	}
	return out
}

// quote writes s as a markdown quote.
func quote(s string) string {
	if s == "" {
		return ""
	}
	return "> " + strings.ReplaceAll(s, "\n", "\n> ")
}

// FitList writes items as a markdown list of at most limit bytes. When they
// do not all fit it keeps the first item and as many of the most recent as
// fit, with a line saying how many were left out between them.
func FitList(items []string, limit int, noun string) string {
	lines := make([]string, len(items))
	total := 0
	for i, it := range items {
		lines[i] = "- " + it
		total += len(lines[i]) + 1
	}
	if total <= limit+1 {
		return strings.Join(lines, "\n")
	}
	omitted := func(n int) string { return fmt.Sprintf("[… %d %s left out here]", n, noun) }
	budget := limit - len(omitted(len(lines)))
	head, used := 0, 0
	if len(lines) > 0 && len(lines[0])+1 <= budget {
		head, used = 1, len(lines[0])+1
	}
	tail := len(lines)
	for tail > head && used+len(lines[tail-1])+1 <= budget {
		tail--
		used += len(lines[tail]) + 1
	}
	out := append([]string{}, lines[:head]...)
	out = append(out, omitted(tail-head))
	out = append(out, lines[tail:]...)
	return strings.Join(out, "\n")
}

// Facts is what the extractive summary reads from the messages. Session
// notes written without a model read the same.
type Facts struct {
	// UserTexts are the texts of the messages that are not the
	// assistant's, outside tool results, in order.
	UserTexts []string
	// LastAssistant is the assistant's latest text.
	LastAssistant string
	// Files are the files read, edited or written, in the order first touched.
	Files []FileTouch
	// Tools counts the calls of each tool.
	Tools map[string]int
	// Errors are the tool calls that failed: the call's tool and file, then the result.
	Errors []string
	// Commands are the shell commands run, in order.
	Commands []string
	// Todos is the input of the latest todo tool call.
	Todos json.RawMessage
}

// FileTouch is what was done to one file.
type FileTouch struct {
	Path                  string
	Read, Edited, Written bool
}

// ExtractFacts reads the facts of msgs, with the tenant's tool names.
func ExtractFacts(msgs []view.Message, names ToolNames) Facts {
	names = names.withDefaults()
	f := Facts{Tools: map[string]int{}}
	fileAt := map[string]int{}
	calls := map[string]turn.Block{}
	touch := func(path string) *FileTouch {
		i, ok := fileAt[path]
		if !ok {
			i = len(f.Files)
			fileAt[path] = i
			f.Files = append(f.Files, FileTouch{Path: path})
		}
		return &f.Files[i]
	}
	for _, m := range msgs {
		if m.Role == roleAssistant {
			if t := messageText(m.Content); t != "" {
				f.LastAssistant = t
			}
		} else if t := messageText(m.Content); t != "" {
			f.UserTexts = append(f.UserTexts, t)
		}
		for _, b := range m.Content {
			switch b.Type {
			case turn.BlockToolUse:
				calls[b.ID] = b
				f.Tools[b.Name]++
				path := inputPath(b.Input)
				switch {
				case path != "" && isOneOf(b.Name, names.Read):
					touch(path).Read = true
				case path != "" && isOneOf(b.Name, names.Edit):
					touch(path).Edited = true
				case path != "" && isOneOf(b.Name, names.Write):
					touch(path).Written = true
				case isOneOf(b.Name, names.Shell):
					if cmd := inputString(b.Input, "command"); cmd != "" {
						f.Commands = append(f.Commands, cmd)
					}
				case isOneOf(b.Name, names.Todo):
					f.Todos = b.Input
				}
			case turn.BlockToolResult:
				if b.IsError {
					f.Errors = append(f.Errors, callLabel(calls[b.ToolUseID])+": "+resultText(b.Content))
				}
			}
		}
	}
	return f
}

// callLabel names a tool call in the list of errors: its tool and the file
// it names, if any.
func callLabel(call turn.Block) string {
	if call.Name == "" {
		return "A tool call"
	}
	if p := inputPath(call.Input); p != "" {
		return call.Name + " " + p
	}
	return call.Name
}

// ToolLines lists the tools used, "Name: calls", most used first.
func (f *Facts) ToolLines() []string {
	type count struct {
		name string
		n    int
	}
	var counts []count
	for name, n := range f.Tools {
		counts = append(counts, count{name, n})
	}
	slices.SortFunc(counts, func(a, b count) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	out := make([]string, len(counts))
	for i, c := range counts {
		out[i] = fmt.Sprintf("%s: %d", c.name, c.n)
	}
	return out
}

// FileLines lists the files touched, in the order first touched, each as
// "path (read, edited, written)" with what was done to it.
func (f *Facts) FileLines() []string {
	out := make([]string, len(f.Files))
	for i, t := range f.Files {
		var what []string
		if t.Read {
			what = append(what, "read")
		}
		if t.Edited {
			what = append(what, "edited")
		}
		if t.Written {
			what = append(what, "written")
		}
		out[i] = t.Path + " (" + strings.Join(what, ", ") + ")"
	}
	return out
}

// todoItem is one entry of a todo tool's input.
type todoItem struct {
	Content    string `json:"content"`
	Status     string `json:"status"`
	ActiveForm string `json:"activeForm"`
}

// Todo statuses.
const (
	todoPending    = "pending"
	todoInProgress = "in_progress"
	todoCompleted  = "completed"
)

// parseTodos reads the "todos" list of a todo tool's input.
func parseTodos(input json.RawMessage) ([]todoItem, bool) {
	var in struct {
		Todos []todoItem `json:"todos"`
	}
	if len(input) == 0 || json.Unmarshal(input, &in) != nil || in.Todos == nil {
		return nil, false
	}
	return in.Todos, true
}

// todoLine renders one todo item.
func todoLine(t todoItem) string {
	switch t.Status {
	case todoCompleted:
		return "[x] " + t.Content
	case todoInProgress:
		return "[~] " + t.Content + " (in progress)"
	case todoPending, "":
		return "[ ] " + t.Content
	default:
		return "[ ] " + t.Content + " (" + t.Status + ")"
	}
}

// PendingTodos lists the items of the latest todo list that are not completed.
func (f *Facts) PendingTodos() []string {
	return pendingTodos(f.Todos)
}

// pendingTodos lists the items of the todo input that are not completed.
func pendingTodos(input json.RawMessage) []string {
	items, _ := parseTodos(input)
	var out []string
	for _, t := range items {
		if t.Status != todoCompleted {
			out = append(out, todoLine(t))
		}
	}
	return out
}
