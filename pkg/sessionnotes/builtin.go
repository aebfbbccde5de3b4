package sessionnotes

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// Bounds of what the builtin writer puts in a section, in bytes. They keep
// each section well under the default 2,000-token limit.
const (
	builtinListBytes  = 6_000
	builtinItemBytes  = 400
	builtinQuoteBytes = 1_500
	builtinTitleBytes = 100
)

// Builtin answers an update request built by Request without a model, for
// the builtin provider (llm.TaskNotes): it reads the conversation and the
// current notes back out of the request and fills the sections from the
// data itself, the way compaction's extractive summary does — a title from
// the first request, the latest request and answer as the current state,
// every request in the task specification, the files touched, the shell
// commands run, the tool calls that failed, and one numbered worklog line —
// merging what the notes already list. It answers with the changed
// sections, as a model would, so the answer goes through ParseEdits too.
// Tool names are the defaults. The output depends only on the request.
func Builtin(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, fmt.Errorf("sessionnotes: builtin: %w", err)
	}
	conv, notes, err := splitRequest(req.Messages)
	if err != nil {
		return llm.Response{}, &llm.Error{Kind: llm.KindRequest, Err: err}
	}
	doc, err := Parse(notes)
	if err != nil {
		return llm.Response{}, &llm.Error{Kind: llm.KindRequest, Err: err}
	}
	return llm.Response{Text: RenderEdits(builtinEdits(doc, conv)), StopReason: "end_turn", Model: "builtin"}, nil
}

// builtinEdits fills the sections of doc from msgs and returns those that changed.
func builtinEdits(doc Document, msgs []view.Message) []Section {
	f := compaction.ExtractFacts(msgs, compaction.ToolNames{})
	var edits []Section
	set := func(heading, body string) {
		s, ok := doc.Section(heading)
		if !ok || body == "" || body == s.Body {
			return
		}
		s.Body = body
		edits = append(edits, s)
	}
	body := func(heading string) string {
		s, _ := doc.Section(heading)
		return s.Body
	}

	if body(HeadingTitle) == "" && len(f.UserTexts) > 0 {
		set(HeadingTitle, plain(compaction.OneLine(f.UserTexts[0], builtinTitleBytes)))
	}
	set(HeadingState, currentState(f))
	set(HeadingTask, parseList(body(HeadingTask)).add(lines(f.UserTexts)...).render(builtinListBytes, "requests"))
	set(HeadingFiles, mergeFiles(body(HeadingFiles), f.Files))
	set(HeadingWorkflow, parseList(body(HeadingWorkflow)).add(codeLines(f.Commands)...).render(builtinListBytes, "commands"))
	set(HeadingErrors, parseList(body(HeadingErrors)).add(lines(f.Errors)...).render(builtinListBytes, "errors"))
	// Each entry is numbered: two updates over windows that read alike
	// would otherwise write the same line, which the list drops, and
	// answer no change at all.
	log := parseList(body(HeadingWorklog))
	entry := fmt.Sprintf("Update %d: %s", len(log.items)+log.omitted+1, worklogLine(msgs, f))
	set(HeadingWorklog, log.add(entry).render(builtinListBytes, "entries"))
	return edits
}

// currentState quotes the latest request and the latest answer, and lists
// the open todo items.
func currentState(f compaction.Facts) string {
	var parts []string
	if n := len(f.UserTexts); n > 0 {
		parts = append(parts, "Latest request:\n"+quote(compaction.Clip(f.UserTexts[n-1], builtinQuoteBytes)))
	}
	if f.LastAssistant != "" {
		parts = append(parts, "Latest answer:\n"+quote(compaction.Clip(f.LastAssistant, builtinQuoteBytes)))
	}
	if todos := f.PendingTodos(); len(todos) > 0 {
		parts = append(parts, "Open items:\n"+list{items: lines(todos)}.render(builtinQuoteBytes, "items"))
	}
	return strings.Join(parts, "\n\n")
}

// worklogLine is the one line the builtin writer logs for msgs.
func worklogLine(msgs []view.Message, f compaction.Facts) string {
	calls := 0
	for _, n := range f.Tools {
		calls += n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d messages", len(msgs))
	if calls == 0 {
		b.WriteString(", no tool calls")
	} else {
		fmt.Fprintf(&b, ", %d tool calls (%s)", calls, strings.Join(f.ToolLines(), ", "))
	}
	if len(f.Errors) > 0 {
		fmt.Fprintf(&b, ", %d failed", len(f.Errors))
	}
	if len(f.Files) > 0 {
		var names []string
		for _, t := range f.Files[:min(len(f.Files), 3)] {
			names = append(names, t.Path)
		}
		b.WriteString("; files: " + strings.Join(names, ", "))
		if more := len(f.Files) - len(names); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
	}
	if n := len(f.UserTexts); n > 0 {
		b.WriteString("; latest request: " + compaction.OneLine(f.UserTexts[n-1], 80))
	}
	return b.String()
}

// mergeFiles merges the files touched into the file lines the notes have
// ("- path (read, edited)"), keeping the order of first touch.
func mergeFiles(prev string, touched []compaction.FileTouch) string {
	l := parseList(prev)
	at := map[string]int{}
	files := make([]compaction.FileTouch, 0, len(l.items)+len(touched))
	for _, it := range l.items {
		ft, ok := parseFileLine(it)
		if !ok {
			ft = compaction.FileTouch{Path: it}
		}
		at[ft.Path] = len(files)
		files = append(files, ft)
	}
	for _, t := range touched {
		i, ok := at[t.Path]
		if !ok {
			at[t.Path] = len(files)
			files = append(files, t)
			continue
		}
		files[i].Read = files[i].Read || t.Read
		files[i].Edited = files[i].Edited || t.Edited
		files[i].Written = files[i].Written || t.Written
	}
	f := compaction.Facts{Files: files}
	return list{items: lines(f.FileLines()), omitted: l.omitted}.render(builtinListBytes, "files")
}

// parseFileLine reads "path (read, edited, written)".
func parseFileLine(s string) (compaction.FileTouch, bool) {
	i := strings.LastIndex(s, " (")
	if i < 0 || !strings.HasSuffix(s, ")") {
		return compaction.FileTouch{}, false
	}
	ft := compaction.FileTouch{Path: s[:i]}
	for _, what := range strings.Split(s[i+2:len(s)-1], ", ") {
		switch what {
		case "read":
			ft.Read = true
		case "edited":
			ft.Edited = true
		case "written":
			ft.Written = true
		case "":
		default:
			return compaction.FileTouch{}, false
		}
	}
	return ft, true
}

// list is a markdown list as the builtin writer keeps it: the first item,
// then (when some did not fit) a line saying how many were left out, then
// the most recent items.
type list struct {
	items   []string
	omitted int // left out between items[0] and items[1]
}

const omittedFormat = "[… %d earlier %s left out]"

var omittedRe = regexp.MustCompile(`^\[… (\d+) earlier .+ left out\]$`)

// parseList reads a list the builtin writer rendered (or any body: each
// "- " line is an item, other lines are taken as items too, except the
// left-out line, whose count is kept).
func parseList(body string) list {
	var l list
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if m := omittedRe.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			l.omitted += n
			continue
		}
		l.items = append(l.items, strings.TrimPrefix(line, "- "))
	}
	return l
}

// add appends items, skipping one that repeats the item before it.
func (l list) add(items ...string) list {
	out := list{items: slices.Clone(l.items), omitted: l.omitted}
	for _, it := range items {
		if it == "" || (len(out.items) > 0 && out.items[len(out.items)-1] == it) {
			continue
		}
		out.items = append(out.items, it)
	}
	return out
}

// render writes the list within limit bytes: the first item, the count of
// those left out, and as many of the most recent items as fit.
func (l list) render(limit int, noun string) string {
	if len(l.items) == 0 {
		return ""
	}
	lines := make([]string, len(l.items))
	total := 0
	for i, it := range l.items {
		lines[i] = "- " + it
		total += len(lines[i]) + 1
	}
	if l.omitted == 0 && total <= limit+1 {
		return strings.Join(lines, "\n")
	}
	marker := func(n int) string { return fmt.Sprintf(omittedFormat, n, noun) }
	budget := limit - len(marker(l.omitted+len(lines))) - len(lines[0]) - 2
	tail, used := len(lines), 0
	for tail > 1 && used+len(lines[tail-1])+1 <= budget {
		tail--
		used += len(lines[tail]) + 1
	}
	omitted := l.omitted + tail - 1
	out := []string{lines[0]}
	if omitted > 0 {
		out = append(out, marker(omitted))
	}
	return strings.Join(append(out, lines[tail:]...), "\n")
}

// lines turns texts into list items: one line each, bounded.
func lines(texts []string) []string {
	out := make([]string, 0, len(texts))
	for _, t := range texts {
		if s := compaction.OneLine(t, builtinItemBytes); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// codeLines turns shell commands into list items in backticks.
func codeLines(cmds []string) []string {
	out := make([]string, 0, len(cmds))
	for _, c := range lines(cmds) {
		out = append(out, "`"+strings.ReplaceAll(c, "`", "'")+"`")
	}
	return out
}

// plain keeps a line from reading as a heading or a code fence.
func plain(s string) string {
	if strings.HasPrefix(s, "#") || strings.HasPrefix(s, "`") || strings.HasPrefix(s, "~") {
		return "\\" + s
	}
	return s
}

// quote writes s as a markdown quote, so no line of it reads as a heading.
func quote(s string) string {
	return "> " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n> ")
}
