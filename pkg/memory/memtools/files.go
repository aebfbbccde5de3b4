package memtools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// The memory files: Anthropic's memory tool sees a scope's memories as a
// directory, /memories, holding one file per memory (<name>.md, its whole
// markdown) and the index, MEMORY.md. FileCommand runs that tool's commands
// over the executor's scope with the same checks, revisions and staging as
// the named tools above.

// MemoryDir is the directory the memory files are in.
const MemoryDir = "/memories"

// IndexFile is the index's file name in MemoryDir.
const IndexFile = "MEMORY.md"

// The commands of the memory tool.
const (
	CommandView       = "view"
	CommandCreate     = "create"
	CommandStrReplace = "str_replace"
	CommandInsert     = "insert"
	CommandDelete     = "delete"
	CommandRename     = "rename"
)

// Commands lists the commands, in the order the tool describes them.
var Commands = []string{CommandView, CommandCreate, CommandStrReplace, CommandInsert, CommandDelete, CommandRename}

// FileCommand is one call of the memory tool. Which fields a command reads
// is in the jsonschema descriptions; a field it needs and lacks is an error
// result.
type FileCommand struct {
	Command    string  `json:"command" jsonschema:"one of view, create, str_replace, insert, delete, rename"`
	Path       string  `json:"path,omitempty" jsonschema:"the file or directory: /memories, /memories/MEMORY.md or /memories/<name>.md (view, create, str_replace, insert, delete)"`
	ViewRange  []int   `json:"view_range,omitempty" jsonschema:"view of a file: the first and last line to show, counted from 1; -1 as the last shows to the end"`
	FileText   *string `json:"file_text,omitempty" jsonschema:"create: the whole file"`
	OldStr     *string `json:"old_str,omitempty" jsonschema:"str_replace: the exact text to replace, which must occur once in the file"`
	NewStr     *string `json:"new_str,omitempty" jsonschema:"str_replace: the text to put in its place"`
	InsertLine *int    `json:"insert_line,omitempty" jsonschema:"insert: the line after which the text goes; 0 puts it first"`
	InsertText *string `json:"insert_text,omitempty" jsonschema:"insert: the text to insert"`
	OldPath    string  `json:"old_path,omitempty" jsonschema:"rename: the memory file to rename"`
	NewPath    string  `json:"new_path,omitempty" jsonschema:"rename: its new path, a memory file that does not exist yet"`
}

// memoryFile is a path of MemoryDir, parsed: the directory itself, the
// index, or one memory's file.
type memoryFile struct {
	path  string
	dir   bool
	index bool
	name  memory.Name
}

// parseFile reads a path of the memory tool, refusing one outside
// MemoryDir, one that climbs (..), one deeper than the directory and one
// that is not text.
func parseFile(p string) (memoryFile, error) {
	switch {
	case p == "":
		return memoryFile{}, memory.Refuse(memory.ReasonBadRequest, "no path: name %s or a file in it", MemoryDir)
	case !utf8.ValidString(p) || strings.ContainsRune(p, 0):
		return memoryFile{}, memory.Refuse(memory.ReasonBadName, "the path is not valid text (invalid UTF-8 or NUL)")
	case slices.Contains(strings.Split(p, "/"), ".."):
		return memoryFile{}, memory.Refuse(memory.ReasonOutOfScope, "%.80q climbs out with '..'; paths are %s/<file>", p, MemoryDir)
	}
	rest, ok := strings.CutPrefix(strings.TrimSuffix(p, "/"), MemoryDir)
	if !ok || rest != "" && rest[0] != '/' {
		return memoryFile{}, memory.Refuse(memory.ReasonOutOfScope, "%.80q is outside %s; every memory file is in it", p, MemoryDir)
	}
	rest = strings.TrimPrefix(rest, "/")
	switch {
	case rest == "":
		return memoryFile{path: MemoryDir, dir: true}, nil
	case strings.Contains(rest, "/"):
		return memoryFile{}, memory.Refuse(memory.ReasonOutOfScope, "%.80q: %s holds files only, no directories", p, MemoryDir)
	case rest == IndexFile:
		return memoryFile{path: MemoryDir + "/" + IndexFile, index: true}, nil
	case !strings.HasSuffix(rest, memory.FileExt):
		return memoryFile{}, memory.Refuse(memory.ReasonBadName, "%.80q: a memory file is <name>%s", p, memory.FileExt)
	}
	n, err := memory.ParseRef(rest)
	if err != nil {
		return memoryFile{}, err
	}
	return memoryFile{path: MemoryDir + "/" + n.File(), name: n}, nil
}

// FileCommand runs one command of the memory tool. Like Run, every
// mistake of the caller is an error result and err is left for failures of
// the system.
func (e *Executor) FileCommand(ctx context.Context, c FileCommand) (Result, error) {
	if c.Command == CommandRename {
		return e.renameFile(ctx, c.OldPath, c.NewPath)
	}
	if !slices.Contains(Commands, c.Command) {
		return e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "unknown command %.40q; the commands are %s", c.Command, strings.Join(Commands, ", ")))
	}
	f, err := parseFile(c.Path)
	if err != nil {
		return e.refused(ctx, err)
	}
	if f.dir && c.Command != CommandView {
		return e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "%s is the directory; %s takes a file in it", MemoryDir, c.Command))
	}
	switch c.Command {
	case CommandView:
		return e.view(ctx, f, c.ViewRange)
	case CommandCreate:
		if c.FileText == nil {
			return e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "create needs file_text: the whole file"))
		}
		return e.save(ctx, f, *c.FileText, memory.Expect{})
	case CommandStrReplace:
		if c.OldStr == nil || c.NewStr == nil {
			return e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "str_replace needs old_str and new_str"))
		}
		return e.editFile(ctx, f, func(text string) (string, error) { return replaceOnce(f, text, *c.OldStr, *c.NewStr) })
	case CommandInsert:
		if c.InsertLine == nil || c.InsertText == nil {
			return e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "insert needs insert_line and insert_text"))
		}
		return e.editFile(ctx, f, func(text string) (string, error) { return insertAt(f, text, *c.InsertLine, *c.InsertText) })
	default: // CommandDelete
		if f.index {
			return e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "%s cannot be deleted: it lists every memory; delete the memories instead", IndexFile))
		}
		return e.delete(ctx, string(f.name), "")
	}
}

// view lists the directory, or shows a file's lines numbered from 1.
func (e *Executor) view(ctx context.Context, f memoryFile, viewRange []int) (Result, error) {
	if f.dir {
		return e.listDir(ctx)
	}
	text, _, err := e.readFile(ctx, f)
	if err != nil {
		return e.failed(err)
	}
	if text == "" {
		return Result{Text: fmt.Sprintf("%s is empty.", f.path)}, nil
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	first, last := 1, len(lines)
	if viewRange != nil {
		if len(viewRange) != 2 || viewRange[0] < 1 || viewRange[0] > len(lines) ||
			(viewRange[1] != -1 && (viewRange[1] < viewRange[0] || viewRange[1] > len(lines))) {
			return e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "view_range %v: want [first, last] within lines 1 to %d of %s (last -1 for the end)", viewRange, len(lines), f.path))
		}
		first = viewRange[0]
		if viewRange[1] != -1 {
			last = viewRange[1]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, lines %d to %d of %d:\n", f.path, first, last, len(lines))
	for i := first; i <= last; i++ {
		fmt.Fprintf(&b, "%6d\t%s\n", i, lines[i-1])
	}
	return Result{Text: strings.TrimSuffix(b.String(), "\n")}, nil
}

// listDir lists the index and every live memory's file, as the run sees them.
func (e *Executor) listDir(ctx context.Context) (Result, error) {
	live, err := e.live(ctx)
	if err != nil {
		return e.failed(err)
	}
	names := make([]memory.Name, 0, len(live))
	for n := range live {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s), %d memories:\n", MemoryDir, e.b.Scope, len(names))
	fmt.Fprintf(&b, "- %s/%s: the index, one line per memory\n", MemoryDir, IndexFile)
	for _, n := range names {
		h := live[n]
		fmt.Fprintf(&b, "- %s/%s [%s]: %s\n", MemoryDir, n.File(), h.Type, h.Description)
	}
	return Result{Text: strings.TrimSuffix(b.String(), "\n")}, nil
}

// readFile returns a file's text and the revision it was read at (the
// index's revision is not kept: an index edit is checked whole instead).
func (e *Executor) readFile(ctx context.Context, f memoryFile) (string, int64, error) {
	if f.index && e.opts.Stage {
		text, err := e.stagedIndexContent(ctx)
		return text, 0, err
	}
	if f.index {
		ix, err := e.store.Index(ctx, e.b.Tenant, e.b.Scope)
		return ix.Content, 0, err
	}
	m, err := e.get(ctx, f.name)
	if err != nil {
		return "", 0, err
	}
	return m.Markdown(), m.Revision, nil
}

// editFile changes a file's text with edit and saves it over the revision
// it was read at.
func (e *Executor) editFile(ctx context.Context, f memoryFile, edit func(string) (string, error)) (Result, error) {
	text, rev, err := e.readFile(ctx, f)
	if err != nil {
		return e.failed(err)
	}
	next, err := edit(text)
	if err != nil {
		return e.refused(ctx, err)
	}
	return e.save(ctx, f, next, memory.Expect{Revision: rev})
}

// save writes a file's whole text: the index is replaced (see PutIndex), a
// memory's markdown parsed and written, its frontmatter naming the file.
func (e *Executor) save(ctx context.Context, f memoryFile, text string, exp memory.Expect) (Result, error) {
	if f.index {
		return e.writeIndex(ctx, text)
	}
	doc, err := memory.ParseDocument(text)
	if err != nil {
		return e.refused(ctx, err)
	}
	if doc.Name != f.name {
		return e.refused(ctx, memory.Refuse(memory.ReasonNameMismatch,
			"the frontmatter names %s and the path %s; a memory's name is its file name without .md (rename moves a memory)", doc.Name, f.name.File()))
	}
	return e.put(ctx, doc, exp)
}

// replaceOnce replaces old, which must occur exactly once in text.
func replaceOnce(f memoryFile, text, old, replacement string) (string, error) {
	switch n := strings.Count(text, old); {
	case old == "":
		return "", memory.Refuse(memory.ReasonBadEdit, "old_str is empty; give the exact text to replace")
	case n == 0:
		return "", memory.Refuse(memory.ReasonBadEdit, "old_str does not occur in %s; view it and copy the text exactly", f.path)
	case n > 1:
		return "", memory.Refuse(memory.ReasonBadEdit, "old_str occurs %d times in %s; include more of the text around it", n, f.path)
	}
	return strings.Replace(text, old, replacement, 1), nil
}

// insertAt puts insertion after line `after` of text (0: before the first).
func insertAt(f memoryFile, text string, after int, insertion string) (string, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if text == "" {
		lines = nil
	}
	if after < 0 || after > len(lines) {
		return "", memory.Refuse(memory.ReasonBadEdit, "insert_line %d: %s has %d lines; want 0 to %d", after, f.path, len(lines), len(lines))
	}
	added := strings.Split(strings.TrimSuffix(insertion, "\n"), "\n")
	out := slices.Concat(lines[:after], added, lines[after:])
	return strings.Join(out, "\n") + "\n", nil
}

// renameFile moves a memory to a new name: the new one written (it must
// not exist yet) and the old one deleted, together when changes are made
// at once, one after the other when staged.
func (e *Executor) renameFile(ctx context.Context, oldPath, newPath string) (Result, error) {
	from, err := parseFile(oldPath)
	if err != nil {
		return e.refused(ctx, err)
	}
	to, err := parseFile(newPath)
	if err != nil {
		return e.refused(ctx, err)
	}
	if from.dir || from.index || to.dir || to.index {
		return e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "rename moves one memory file to another; %s and the directory stay", IndexFile))
	}
	if from.name == to.name {
		return e.refused(ctx, memory.Refuse(memory.ReasonBadRequest, "old_path and new_path are the same file"))
	}
	m, err := e.get(ctx, from.name)
	if err != nil {
		return e.failed(err)
	}
	doc := m.Document
	doc.Name = to.name
	if e.opts.Stage {
		if r, err := e.stageWrite(ctx, doc); err != nil || r.IsError {
			return r, err
		}
		return e.stageDelete(ctx, from.name, "renamed to "+to.name.File())
	}
	res, err := e.store.Apply(ctx, e.b.Tenant, e.b.Scope, memory.Batch{Edits: []memory.Edit{
		{Name: to.name, Document: &doc, Expect: memory.Expect{Absent: true}},
		{Name: from.name, Expect: memory.Expect{Revision: m.Revision}, Reason: "renamed to " + to.name.File()},
	}}, e.change(""), nil)
	if err != nil {
		return e.failed(err)
	}
	for _, r := range res.Results {
		e.record(ctx, r)
	}
	return Result{Text: fmt.Sprintf("Renamed %s to %s (revision %d); the index points to the new file.", from.path, to.path, res.Results[0].Memory.Revision)}, nil
}
