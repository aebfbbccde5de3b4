package compaction

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// RestoreLimits bounds the files restored after a compaction. A field at 0
// or below takes its default.
type RestoreLimits struct {
	// Files is how many of the most recently read files are restored. Default 5.
	Files int
	// FileTokens bounds one file's content, estimated as bytes/4; longer
	// content is cut with a marker. Default 5,000.
	FileTokens int64
	// TotalTokens bounds the content of all restored files; a file that would
	// pass it is skipped. Default 50,000.
	TotalTokens int64
}

// Default restore limits.
const (
	DefaultRestoreFiles       = 5
	DefaultRestoreFileTokens  = 5_000
	DefaultRestoreTotalTokens = 50_000
)

func (l RestoreLimits) withDefaults() RestoreLimits {
	if l.Files <= 0 {
		l.Files = DefaultRestoreFiles
	}
	if l.FileTokens <= 0 {
		l.FileTokens = DefaultRestoreFileTokens
	}
	if l.TotalTokens <= 0 {
		l.TotalTokens = DefaultRestoreTotalTokens
	}
	return l
}

// Restorable attachments: a user text block that starts with attachmentOpen
// and ends with attachmentClose.
const (
	attachmentOpen  = `<mnemos:attachment restorable="true"`
	attachmentClose = `</mnemos:attachment>`
)

// clearedResult is the text micro-compaction leaves in place of a cleared
// tool result (docs/compaction.md); such a result is no file content.
const clearedResult = "[Old tool result content cleared]"

// Restore returns what to put back in context after a compaction (see
// docs/compaction.md), one text block per item, in this order:
//   - the most recently read files, at most lim.Files, each from the latest
//     successful result of a read tool call naming it (input file_path, path
//     or notebook_path), cut to lim.FileTokens, lim.TotalTokens in all; a file
//     whose latest read result is still in kept is skipped, and so are
//     instruction files (CLAUDE.md, AGENTS.md, …) and plan files, never
//     restored as files (restore_more.go); oldest read first;
//   - the latest todo list (the input of the latest todo tool call), unless
//     that call is still in kept or the list is empty;
//   - the latest plan (the input of the latest ExitPlanMode call), unless
//     that call is still in kept;
//   - every skill loaded (a Skill call and its result), each its latest
//     load, unless that result is still in kept;
//   - the latest restorable attachment of each name (a user text block
//     starting with <mnemos:attachment restorable="true" and ending with
//     </mnemos:attachment>, as is), unless the same text is in kept; in the
//     order they were last attached.
//
// all is the context before the compaction, kept the messages it keeps.
// The output depends only on the input.
func Restore(all, kept []view.Message, lim RestoreLimits, names ToolNames) []turn.Block {
	lim = lim.withDefaults()
	seen := scanTranscript(all, names.withDefaults())
	k := keptOf(kept)

	var out []turn.Block
	for _, f := range pickFiles(seen.reads, seen.changed, k, lim) {
		out = append(out, textBlock(f.render()))
	}
	if todo := seen.todo; todo != nil && !k.calls[todo.ID] {
		if text, ok := renderTodos(todo.Input, int(lim.FileTokens*4)); ok {
			out = append(out, textBlock(text))
		}
	}
	if plan := seen.plan; plan != nil && !k.calls[plan.ID] {
		out = append(out, textBlock(renderPlan(planOf(*plan), int(lim.FileTokens*4))))
	}
	for _, sk := range seen.skills {
		if !k.results[sk.callID] {
			out = append(out, textBlock(renderSkill(sk.name, sk.body, int(lim.FileTokens*4))))
		}
	}
	for _, a := range seen.attachmentsInOrder() {
		if !k.texts[a.text] {
			out = append(out, textBlock(a.text))
		}
	}
	return out
}

// kept is what the messages a compaction keeps hold: tool results and calls
// by id, and texts.
type kept struct {
	results, calls, texts map[string]bool
}

func keptOf(msgs []view.Message) kept {
	k := kept{results: map[string]bool{}, calls: map[string]bool{}, texts: map[string]bool{}}
	for _, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case turn.BlockToolResult:
				k.results[b.ToolUseID] = true
			case turn.BlockToolUse:
				k.calls[b.ID] = true
			case turn.BlockText:
				k.texts[b.Text] = true
			}
		}
	}
	return k
}

// fileRead is the latest successful read of a file.
type fileRead struct {
	path, text, callID string
	// seq orders the blocks of the transcript: where the read's result is.
	seq int
}

type attachment struct {
	text string
	seq  int
}

// transcriptScan is what one pass over the context before a compaction
// finds that may be restored.
type transcriptScan struct {
	reads       map[string]*fileRead // path → its latest successful read
	changed     map[string]int       // path → seq of its latest edit or write
	todo        *turn.Block          // the latest todo tool call
	plan        *turn.Block          // the latest plan tool call
	skills      []loadedSkill        // the skills loaded, each its latest load, in load order
	attachments map[string]attachment
}

// loadedSkill is a skill a skill tool call loaded, with what its result said.
type loadedSkill struct {
	name, callID, body string
}

func scanTranscript(all []view.Message, names ToolNames) transcriptScan {
	s := transcriptScan{reads: map[string]*fileRead{}, changed: map[string]int{}, attachments: map[string]attachment{}}
	readCalls := map[string]string{}  // tool_use id → path
	skillCalls := map[string]string{} // tool_use id → skill
	seq := 0
	for _, m := range all {
		for _, b := range m.Content {
			seq++
			switch b.Type {
			case turn.BlockToolUse:
				path := inputPath(b.Input)
				switch {
				case path != "" && isOneOf(b.Name, names.Read) && !neverRestored(path):
					readCalls[b.ID] = path
				case path != "" && (isOneOf(b.Name, names.Edit) || isOneOf(b.Name, names.Write)):
					s.changed[path] = seq
				case isOneOf(b.Name, names.Todo):
					s.todo = &b
				case b.Name == planTool && planOf(b) != "":
					s.plan = &b
				case b.Name == skillTool && skillOf(b) != "":
					skillCalls[b.ID] = skillOf(b)
				}
			case turn.BlockToolResult:
				if name, ok := skillCalls[b.ToolUseID]; ok && !b.IsError {
					s.skills = slices.DeleteFunc(s.skills, func(l loadedSkill) bool { return l.name == name })
					s.skills = append(s.skills, loadedSkill{name: name, callID: b.ToolUseID, body: resultText(b.Content)})
					continue
				}
				path, ok := readCalls[b.ToolUseID]
				text := resultText(b.Content)
				if !ok || b.IsError || strings.TrimSpace(text) == "" || text == clearedResult {
					continue
				}
				s.reads[path] = &fileRead{path: path, text: text, callID: b.ToolUseID, seq: seq}
			case turn.BlockText:
				if m.Role == roleAssistant {
					continue
				}
				if name, ok := restorableAttachment(b.Text); ok {
					s.attachments[name] = attachment{text: b.Text, seq: seq}
				}
			}
		}
	}
	return s
}

// attachmentsInOrder lists the latest attachment of each name in the order
// they were last attached.
func (s transcriptScan) attachmentsInOrder() []attachment {
	out := make([]attachment, 0, len(s.attachments))
	for _, a := range s.attachments {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b attachment) int { return a.seq - b.seq })
	return out
}

// restoredFile is a file chosen to be restored, its content cut to fit.
type restoredFile struct {
	read *fileRead
	body string
	// stale: the file was edited or written after this read.
	stale bool
}

// pickFiles chooses the files to restore: the most recently read first,
// skipping those whose read is still kept and those that would pass the
// total, at most lim.Files; returned oldest read first.
func pickFiles(reads map[string]*fileRead, changed map[string]int, k kept, lim RestoreLimits) []restoredFile {
	var candidates []*fileRead
	for _, r := range reads {
		if !k.results[r.callID] {
			candidates = append(candidates, r)
		}
	}
	slices.SortFunc(candidates, func(a, b *fileRead) int { return b.seq - a.seq })
	var files []restoredFile
	var total int64
	for _, c := range candidates {
		if len(files) == lim.Files {
			break
		}
		body := Clip(c.text, int(lim.FileTokens*4))
		n := textTokens(body)
		if total+n > lim.TotalTokens {
			continue
		}
		total += n
		files = append(files, restoredFile{read: c, body: body, stale: changed[c.path] > c.seq})
	}
	slices.Reverse(files)
	return files
}

func (f restoredFile) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "<restored-file path=\"%s\">\n", attrEscape(f.read.path))
	b.WriteString("Content of this file as last read before the conversation was summarized.")
	if f.stale {
		b.WriteString(" The file was changed after that read, so this may be out of date.")
	}
	b.WriteString("\n")
	b.WriteString(f.body)
	b.WriteString("\n</restored-file>")
	return b.String()
}

// textTokens is the estimate of a text: UTF-8 bytes/4, rounded up.
func textTokens(s string) int64 { return int64(len(s)+3) / 4 }

// renderTodos renders the latest todo list readably, bounded to limit
// bytes; false when there is nothing to restore (an empty list).
func renderTodos(input []byte, limit int) (string, bool) {
	var body string
	if items, ok := parseTodos(input); ok {
		if len(items) == 0 {
			return "", false
		}
		lines := make([]string, len(items))
		for i, t := range items {
			lines[i] = "- " + todoLine(t)
		}
		body = "The latest todo list ([x] done, [~] in progress, [ ] to do):\n" + strings.Join(lines, "\n")
	} else {
		if len(strings.TrimSpace(string(input))) == 0 {
			return "", false
		}
		body = "The input of the latest todo tool call:\n" + string(input)
	}
	return "<restored-todos>\n" + Clip(body, limit) + "\n</restored-todos>", true
}

// restorableAttachment reports whether text is a restorable attachment, and its name attribute.
func restorableAttachment(text string) (string, bool) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, attachmentOpen) || !strings.HasSuffix(t, attachmentClose) {
		return "", false
	}
	tag, _, ok := strings.Cut(t, ">")
	if !ok {
		return "", false
	}
	_, rest, ok := strings.Cut(tag, ` name="`)
	if !ok {
		return "", true
	}
	name, _, _ := strings.Cut(rest, `"`)
	return name, true
}

var attrEscaper = strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `<`, "&lt;", `>`, "&gt;")

func attrEscape(s string) string { return attrEscaper.Replace(s) }
