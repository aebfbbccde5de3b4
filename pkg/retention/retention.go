// Package retention scores what a compaction kept of the messages it
// replaced, with no model (see docs/compaction.md#retention). Extract lists
// what must survive a span of messages, in six categories: the user's
// instructions and corrections, the latest request, the files touched, the
// errors met, the open todo items and the identifiers the user named.
// Measure looks for each item in what replaces the span (the compaction's
// head: summary and restored blocks; and the messages it keeps) and reports
// the share found, per category and overall.
//
// Matching is on words: both sides are cut into runs of letters, digits and
// underscores, lowercased, and an item is found when its words appear in a
// row in what replaces the span. White space, case, punctuation and markdown
// around them do not matter; a paraphrase does not count. Everything is
// deterministic and linear in the size of its input.
package retention

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// The categories of what must survive, as the score names them.
const (
	// Instructions are the sentences of the user's own messages that tell
	// the agent what to do or not to do, or correct it.
	Instructions = "instructions"
	// LastRequest is the latest message the user wrote.
	LastRequest = "last_request"
	// Files are the paths tool calls named (file_path, path,
	// notebook_path) and the paths the user wrote.
	Files = "files"
	// Errors are the first lines of failed tool results and the error lines
	// of shell output.
	Errors = "errors"
	// Todos are the items of the latest todo list that are not completed.
	Todos = "todos"
	// Identifiers are the code names the user wrote: backticked spans,
	// CamelCase and snake_case words.
	Identifiers = "identifiers"
)

// Categories returns the categories in the order they are reported. The
// slice is the caller's.
func Categories() []string {
	return []string{Instructions, LastRequest, Files, Errors, Todos, Identifiers}
}

// Bounds on what becomes an item.
const (
	// maxSentenceWords: a longer "sentence" is pasted text, not an instruction.
	maxSentenceWords = 80
	// maxRequestBytes: a longer latest request is matched on its opening.
	maxRequestBytes = 1_000
	// maxErrorBytes: an error line is matched on its opening.
	maxErrorBytes = 200
	// maxErrorLines is how many error lines one shell result gives.
	maxErrorLines = 3
	// maxIdentifierBytes bounds a backticked span taken as an identifier.
	maxIdentifierBytes = 80
)

// Item is one thing that must survive a compaction.
type Item struct {
	Category string
	// Text is the item as the span holds it.
	Text string
	// keys are its forms as matched (see normalize), each between spaces;
	// finding any of them finds the item.
	keys []string
}

// Extract lists what must survive of span, the messages a compaction
// replaces, in category order and, within a category, in the order first
// met; an item that normalizes to the same words as an earlier one of its
// category is left out. Messages a compaction made (not Stored) are skipped:
// what they hold was scored when they were made. names maps the tenant's
// shell and todo tools (nil fields take the defaults).
func Extract(span []view.Message, names compaction.ToolNames) []Item {
	names = withDefaults(names)
	var x extraction
	calls := map[string]turn.Block{}
	var todos json.RawMessage
	last := ""
	for _, m := range span {
		if !m.Stored() {
			continue
		}
		if m.Role != "assistant" {
			if t := UserText(m.Content); t != "" {
				x.fromUser(t)
				last = t
			}
		}
		for _, b := range m.Content {
			switch b.Type {
			case turn.BlockToolUse:
				calls[b.ID] = b
				for _, p := range inputPaths(b.Input) {
					x.add(Files, p, pathKeys(p)...)
				}
				if slices.Contains(names.Todo, b.Name) {
					todos = b.Input
				}
			case turn.BlockToolResult:
				x.fromResult(b, slices.Contains(names.Shell, calls[b.ToolUseID].Name))
			}
		}
	}
	if last != "" {
		x.add(LastRequest, last, normalizePrefix(last, maxRequestBytes))
	}
	for _, t := range openTodos(todos) {
		x.add(Todos, t, normalize(t))
	}
	return x.items()
}

func withDefaults(n compaction.ToolNames) compaction.ToolNames {
	d := compaction.DefaultToolNames()
	if n.Shell == nil {
		n.Shell = d.Shell
	}
	if n.Todo == nil {
		n.Todo = d.Todo
	}
	return n
}

// extraction collects items by category, without repeats.
type extraction struct {
	by   map[string][]Item
	seen map[string]bool
}

// add records an item of category with its keys (the first is its own
// form). One without words is left out, and so is one with a key an item
// of its category has, or a file whose path ends with one of an earlier
// file's or is the end of one (the same file named by its whole path and
// by its last segments).
func (x *extraction) add(category, text string, keys ...string) {
	if len(keys) == 0 || keys[0] == "" {
		return
	}
	if x.by == nil {
		x.by, x.seen = map[string][]Item{}, map[string]bool{}
	}
	padded := make([]string, 0, len(keys))
	for _, k := range keys {
		if k == "" {
			continue
		}
		if x.seen[category+"\x00"+k] {
			return
		}
		padded = append(padded, " "+k+" ")
	}
	if category == Files {
		for _, it := range x.by[Files] {
			if strings.HasSuffix(it.keys[0], padded[0]) || strings.HasSuffix(padded[0], it.keys[0]) {
				return
			}
		}
	}
	for _, k := range keys {
		x.seen[category+"\x00"+k] = true
	}
	x.by[category] = append(x.by[category], Item{Category: category, Text: text, keys: padded})
}

func (x *extraction) items() []Item {
	var out []Item
	for _, c := range Categories() {
		out = append(out, x.by[c]...)
	}
	return out
}

// fromUser takes the instructions, paths and identifiers of a user's text.
func (x *extraction) fromUser(text string) {
	prose := stripFences(text)
	for _, s := range sentences(prose) {
		if isInstruction(s) {
			x.add(Instructions, s, normalize(s))
		}
	}
	for _, w := range strings.Fields(prose) {
		if p := cleanWord(w); isPath(p) {
			x.add(Files, p, pathKeys(p)...)
		}
	}
	for _, id := range identifiers(prose) {
		x.add(Identifiers, id, normalize(id))
	}
}

// fromResult takes the errors of a tool result: the first line of a failed
// one; the first lines of a shell command's output that report an error,
// of two words or more (a lone "FAIL" says nothing a summary could keep).
func (x *extraction) fromResult(b turn.Block, shell bool) {
	text := resultText(b.Content)
	if b.IsError {
		for _, line := range strings.Split(text, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				x.add(Errors, line, normalizePrefix(line, maxErrorBytes))
				return
			}
		}
		return
	}
	if !shell {
		return
	}
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); reportsError(line) && strings.Contains(normalize(line), " ") {
			x.add(Errors, line, normalizePrefix(line, maxErrorBytes))
			if n++; n == maxErrorLines {
				return
			}
		}
	}
}

// errorLine finds the lines of shell output that report an error: one of
// errorWords as a word of its own, in any case, or "error:" anywhere.
var errorLine = regexp.MustCompile(`(?i)\berror\b|\berrors\b|error:|\bfailed\b|\bfail\b|\bpanic\b|\bfatal\b|\bexception\b|\btraceback\b`)

var errorWords = [...]string{"error", "errors", "failed", "fail", "panic", "fatal", "exception", "traceback"}

// reportsError is errorLine.MatchString(line) without the regexp machine,
// which backtracked through every line of every shell result the
// compactor vets: a tenth of the process's CPU in the ingest benchmark.
// It looks only where a word of errorWords can start. A line with a byte
// outside ASCII goes to errorLine, whose case folding is Unicode's (the
// Kelvin sign matches "k"); \b is ASCII's in both.
func reportsError(line string) bool {
	for i := 0; i < len(line); i++ {
		if line[i] >= utf8.RuneSelf {
			return errorLine.MatchString(line) // a match found before here is the pattern's too
		}
		switch line[i] | 0x20 { // ASCII lowercase for letters
		case 'e', 'f', 'p', 't':
		default:
			continue
		}
		rest := line[i:]
		if len(rest) > 5 && rest[5] == ':' && strings.EqualFold(rest[:5], "error") {
			return true
		}
		if i > 0 && isWordByte(line[i-1]) {
			continue
		}
		for _, w := range errorWords {
			if len(rest) >= len(w) && strings.EqualFold(rest[:len(w)], w) &&
				(len(rest) == len(w) || !isWordByte(rest[len(w)])) {
				return true
			}
		}
	}
	return false
}

// isWordByte is \w of RE2: an ASCII letter, digit or underscore.
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z'
}

// UserText is what the user wrote in a message's content: its text blocks,
// outside tool results, without <system-reminder> sections and without
// blocks that are wholly markup a client added (a block that starts with
// "<" and a letter and ends with ">", like a slash command's record or a
// Mnemos attachment). "" when nothing is left.
func UserText(c turn.Content) string {
	var parts []string
	for _, b := range c {
		if b.Type != turn.BlockText {
			continue
		}
		t := strings.TrimSpace(systemReminder.ReplaceAllString(b.Text, ""))
		if t == "" || isMarkup(t) {
			continue
		}
		parts = append(parts, t)
	}
	return strings.Join(parts, "\n\n")
}

var systemReminder = regexp.MustCompile(`(?s)<system-reminder>.*?</system-reminder>`)

func isMarkup(t string) bool {
	return len(t) > 2 && t[0] == '<' && unicode.IsLetter(rune(t[1])) && t[len(t)-1] == '>'
}

// stripFences drops fenced code blocks: what the user pasted there is data.
func stripFences(text string) string {
	if !strings.Contains(text, "```") && !strings.Contains(text, "~~~") {
		return text
	}
	var out []string
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
			fence = t[:3]
		case fence != "" && strings.HasPrefix(t, fence):
			fence = ""
		case fence == "":
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// sentences cuts text into lines, and lines after ".", "!", "?" or ";"
// followed by white space.
func sentences(text string) []string {
	var out []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		start := 0
		for i := 0; i < len(line); i++ {
			switch line[i] {
			case '.', '!', '?', ';':
				if i+1 == len(line) || line[i+1] == ' ' || line[i+1] == '\t' {
					add(line[start : i+1])
					start = i + 1
				}
			}
		}
		add(line[start:])
	}
	return out
}

// isInstruction reports whether a sentence of the user's tells the agent
// what to do: it starts (after list markers and words like "please",
// "now", "also") with a verb in the imperative, a correction ("no,",
// "actually") or a request ("can you", "let's"); or it says "don't",
// "never", "always", "instead", "must", "should", "make sure", "please",
// "I want", "I need" and the like.
func isInstruction(s string) bool {
	words := instructionWords(s)
	if len(words) < 2 || len(words) > maxSentenceWords {
		return false
	}
	i := 0
	for i < len(words)-1 && fillers[words[i]] {
		i++
	}
	first := words[i]
	switch {
	case first == "do" && strings.HasSuffix(s, "?"):
		return false // a question ("Do the totals match?")
	case imperatives[first], corrections[first]:
		return true
	case noComma.MatchString(s):
		return true
	case i+1 < len(words) && askers[first] && (words[i+1] == "you" || words[i+1] == "we"):
		return true
	}
	for j, w := range words {
		if markers[w] {
			return true
		}
		if j+1 < len(words) && pairs[w+" "+words[j+1]] {
			return true
		}
	}
	return false
}

// instructionWords are the lowercased words of s: runs of letters, digits
// and apostrophes (a curly one made straight), list numbers dropped.
func instructionWords(s string) []string {
	s = strings.ToLower(strings.ReplaceAll(s, "’", "'"))
	words := strings.FieldsFunc(s, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
	out := words[:0]
	for _, w := range words {
		if w = strings.Trim(w, "'"); w != "" {
			out = append(out, w)
		}
	}
	for len(out) > 0 && isNumber(out[0]) {
		out = out[1:]
	}
	return out
}

func isNumber(w string) bool {
	for _, r := range w {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// noComma is a correction that starts "No," (a list marker may come first).
var noComma = regexp.MustCompile(`(?i)^[\W\d]*no\s*,`)

// fillers may come before the verb of an instruction.
var fillers = set("please", "now", "also", "then", "and", "but", "so", "ok", "okay", "first", "next", "finally",
	"just", "oh", "hey", "yes", "yeah", "alright", "instead", "again", "still", "lastly", "afterwards")

// imperatives are verbs an instruction to an agent starts with.
var imperatives = set("add", "adjust", "answer", "apply", "ask", "avoid", "build", "bump", "call", "change", "check",
	"clean", "clear", "commit", "compare", "compile", "configure", "confirm", "continue", "convert", "copy", "count",
	"create", "debug", "delete", "deploy", "describe", "do", "don't", "dont", "double", "drop", "edit", "enable",
	"disable", "ensure", "explain", "export", "extract", "find", "finish", "fix", "follow", "format", "generate",
	"get", "give", "go", "grep", "handle", "ignore", "implement", "import", "include", "inspect", "install", "keep",
	"leave", "let", "let's", "lets", "limit", "list", "load", "look", "make", "mark", "merge", "migrate", "move",
	"name", "never", "always", "note", "open", "pick", "print", "prefer", "push", "put", "read", "rebase", "refactor",
	"reject", "remember", "remove", "rename", "reorder", "replace", "report", "rerun", "reset", "restore", "retry",
	"return", "revert", "review", "rewrite", "run", "save", "search", "send", "set", "show", "skip", "sort", "split",
	"start", "stop", "summarize", "summarise", "switch", "take", "tell", "test", "try", "turn", "undo", "update",
	"upgrade", "use", "verify", "wait", "watch", "write")

// corrections start a sentence that corrects the agent.
var corrections = set("actually", "nope", "wrong", "instead")

// askers start a request when "you" or "we" follows.
var askers = set("can", "could", "would", "will")

// markers make a sentence an instruction wherever they are.
var markers = set("don't", "dont", "never", "always", "instead", "must", "mustn't", "should", "shouldn't", "please",
	"avoid", "shan't")

// pairs are two-word markers.
var pairs = set("do not", "make sure", "be sure", "i want", "i'd like", "i need", "we need", "need to", "have to",
	"rather than", "no longer", "from now")

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// cleanWord trims the punctuation around a word of prose.
func cleanWord(w string) string {
	w = strings.TrimLeft(w, "([{<\"'`*")
	return strings.TrimRight(w, ".,;:!?)]}>\"'`*")
}

// isPath reports whether a word of prose is a file path: an absolute or
// home- or dot-relative path of two segments or more; a relative path of
// three segments or more, or of two whose last has an extension; or a file
// name with an extension ("notes.md"). An extension is 1 to 8 letters and
// digits, the first a letter, after a dot; a bare file name needs 2
// characters before it ("e.g" is no file). URLs are not paths.
func isPath(w string) bool {
	if w == "" || strings.Contains(w, "://") || strings.Contains(w, "//") {
		return false
	}
	for _, r := range w {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("_-./~@+", r) {
			return false
		}
	}
	segs := strings.Split(strings.Trim(w, "/"), "/")
	last := segs[len(segs)-1]
	dot := strings.LastIndexByte(last, '.')
	ext := dot > 0 && isExtension(last[dot+1:])
	switch {
	case strings.HasPrefix(w, "/"), strings.HasPrefix(w, "~/"), strings.HasPrefix(w, "./"), strings.HasPrefix(w, "../"):
		return len(segs) >= 2 || ext
	case strings.Contains(w, "/"):
		return len(segs) >= 3 || (len(segs) == 2 && ext)
	default:
		return ext && dot >= 2 && strings.IndexFunc(last[:dot], unicode.IsLetter) >= 0
	}
}

func isExtension(e string) bool {
	if len(e) == 0 || len(e) > 8 || !unicode.IsLetter(rune(e[0])) {
		return false
	}
	for _, r := range e {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// pathKeys are the forms a path is found by: itself, or its last two
// segments (a summary often writes a path relative to the work directory).
func pathKeys(p string) []string {
	keys := []string{normalize(p)}
	segs := strings.Split(strings.Trim(p, "/"), "/")
	if len(segs) > 2 {
		keys = append(keys, normalize(strings.Join(segs[len(segs)-2:], "/")))
	}
	return keys
}

// inputPaths are the file_path, path and notebook_path of a tool call's
// input (a JSON object); none when it is not one.
func inputPaths(input json.RawMessage) []string {
	if len(input) == 0 {
		return nil
	}
	var in struct {
		FilePath     string `json:"file_path"`
		Path         string `json:"path"`
		NotebookPath string `json:"notebook_path"`
	}
	if json.Unmarshal(input, &in) != nil {
		return nil
	}
	var out []string
	for _, p := range []string{in.FilePath, in.Path, in.NotebookPath} {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

var (
	backticked = regexp.MustCompile("`([^`\n]+)`")
	codeWord   = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
)

// identifiers are the code names in a user's text: backticked spans (up to
// 80 bytes, not paths), then CamelCase words (a lowercase letter or digit
// followed by an uppercase one) and snake_case words (letters or digits on
// both sides of an underscore) outside paths and backticks.
func identifiers(text string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(text, -1) {
		s := strings.TrimSpace(m[1])
		if len(s) >= 2 && len(s) <= maxIdentifierBytes && !isPath(s) {
			out = append(out, s)
		}
	}
	rest := backticked.ReplaceAllString(text, " ")
	for _, w := range strings.Fields(rest) {
		if isPath(cleanWord(w)) {
			continue
		}
		for _, id := range codeWord.FindAllString(w, -1) {
			if isCamel(id) || isSnake(id) {
				out = append(out, id)
			}
		}
	}
	return out
}

func isCamel(w string) bool {
	for i := 1; i < len(w); i++ {
		p := w[i-1]
		if (p >= 'a' && p <= 'z' || p >= '0' && p <= '9') && w[i] >= 'A' && w[i] <= 'Z' {
			return true
		}
	}
	return false
}

func isSnake(w string) bool {
	i := strings.IndexByte(w, '_')
	return i > 0 && i < len(w)-1 && strings.Trim(w, "_") == w
}

// todoList is a todo tool's input.
type todoList struct {
	Todos []struct {
		Content string `json:"content"`
		Status  string `json:"status"`
	} `json:"todos"`
}

// openTodos are the items of a todo tool's input that are not completed.
func openTodos(input json.RawMessage) []string {
	var l todoList
	if len(input) == 0 || json.Unmarshal(input, &l) != nil {
		return nil
	}
	var out []string
	for _, t := range l.Todos {
		if t.Status != "completed" && strings.TrimSpace(t.Content) != "" {
			out = append(out, strings.TrimSpace(t.Content))
		}
	}
	return out
}

// resultText is the text of a tool result's content.
func resultText(c *turn.Content) string {
	if c == nil {
		return ""
	}
	var parts []string
	for _, b := range *c {
		if b.Type == turn.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
