package memtools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// stage is what a staging executor (Options.Stage) keeps instead of
// changing the store: each memory's content after the run's changes, and
// the index. Later calls read through it.
type stage struct {
	memories map[memory.Name]*stagedMemory
	order    []memory.Name
	// index is the staged index, nil until one is written; indexBase the
	// stored index's revision it was made on.
	index     *string
	indexBase int64
}

// stagedMemory is one memory as the run left it.
type stagedMemory struct {
	doc     memory.Document
	deleted bool
	// base is the live memory the run's first change was made on; nil
	// when the memory was not live then (the run creates it).
	base    *memory.Memory
	reasons []string
}

// Staged is what a staging executor kept: one batch to apply, and what it
// would do to the scope.
type Staged struct {
	// Batch holds one edit per memory changed (its final content, or its
	// deletion), each expecting the revision its first change was made on,
	// and the staged index, if any, without lines of memories it deletes.
	Batch memory.Batch
	// Written are the memories created or rewritten; Deleted those deleted.
	Written []memory.Name
	Deleted []memory.Name
	// Rewritten are the memories that were live and get new content.
	Rewritten []memory.Name
}

// Destructive is how many memories that were live the batch deletes or
// rewrites: what a guard on a run's share of changes counts.
func (s Staged) Destructive() int { return len(s.Deleted) + len(s.Rewritten) }

// Empty reports whether nothing was staged.
func (s Staged) Empty() bool { return len(s.Batch.Edits) == 0 && s.Batch.Index == nil }

// Staged returns the changes a staging executor kept, in the order they
// were first made.
func (e *Executor) Staged() Staged {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out Staged
	gone := map[memory.Name]bool{}
	for _, n := range e.stage.order {
		sm := e.stage.memories[n]
		reason := strings.Join(sm.reasons, "; ")
		switch {
		case sm.deleted && sm.base == nil:
			gone[n] = true // created and deleted in the run: nothing to do
		case sm.deleted:
			gone[n] = true
			out.Batch.Edits = append(out.Batch.Edits, memory.Edit{Name: n, Expect: memory.Expect{Revision: sm.base.Revision}, Reason: reason})
			out.Deleted = append(out.Deleted, n)
		case sm.base != nil && sm.base.Document == sm.doc:
		case sm.base != nil:
			doc := sm.doc
			out.Batch.Edits = append(out.Batch.Edits, memory.Edit{Name: n, Document: &doc, Expect: memory.Expect{Revision: sm.base.Revision}, Reason: reason})
			out.Written = append(out.Written, n)
			out.Rewritten = append(out.Rewritten, n)
		default:
			doc := sm.doc
			out.Batch.Edits = append(out.Batch.Edits, memory.Edit{Name: n, Document: &doc, Expect: memory.Expect{Absent: true}, Reason: reason})
			out.Written = append(out.Written, n)
		}
	}
	if e.stage.index != nil {
		lines, _ := memory.ParseIndex(*e.stage.index) // staged only after CheckIndex
		lines = slices.DeleteFunc(lines, func(l memory.Line) bool { return gone[l.Name] })
		content := memory.FormatIndex(lines)
		out.Batch.Index, out.Batch.IndexRevision = &content, e.stage.indexBase
	}
	return out
}

// get reads a memory through the stage: as the run left it, else as stored.
func (e *Executor) get(ctx context.Context, n memory.Name) (memory.Memory, error) {
	if e.opts.Stage {
		e.mu.Lock()
		sm, ok := e.stage.memories[n]
		e.mu.Unlock()
		if ok && sm.deleted {
			return memory.Memory{}, fmt.Errorf("%s was deleted in this run: %w", n.File(), memory.ErrNotFound)
		}
		if ok {
			return stagedMemoryOf(e.b.Scope, sm), nil
		}
	}
	return e.store.Get(ctx, e.b.Tenant, e.b.Scope, n)
}

func stagedMemoryOf(scope memory.Scope, sm *stagedMemory) memory.Memory {
	m := memory.Memory{Scope: scope, Document: sm.doc}
	if sm.base != nil {
		m.Revision, m.CreatedAt, m.UpdatedAt = sm.base.Revision, sm.base.CreatedAt, sm.base.UpdatedAt
	}
	return m
}

// stagedRead answers memory_read for a memory the run changed.
func (e *Executor) stagedRead(n memory.Name) (Result, bool) {
	e.mu.Lock()
	sm, ok := e.stage.memories[n]
	e.mu.Unlock()
	switch {
	case !ok:
		return Result{}, false
	case sm.deleted:
		return Result{Text: fmt.Sprintf("Not found: %s was deleted in this run.", n.File()), IsError: true}, true
	}
	m := stagedMemoryOf(e.b.Scope, sm)
	from := "new in this run"
	if sm.base != nil {
		from = fmt.Sprintf("changed in this run from revision %d, created %s", sm.base.Revision, sm.base.CreatedAt.Format(time.RFC3339))
	}
	return Result{Text: fmt.Sprintf("%s of %s, %s:\n\n%s", n.File(), e.b.Scope, from, m.Markdown())}, true
}

// stageWrite keeps a write (or an edit's result) for later.
func (e *Executor) stageWrite(ctx context.Context, doc memory.Document) (Result, error) {
	doc = doc.Canonical()
	l, err := e.store.Limits(ctx, e.b.Tenant)
	if err != nil {
		return Result{}, fmt.Errorf("memtools: limits: %w", err)
	}
	if err := doc.Validate(l); err != nil {
		return e.refused(ctx, err)
	}
	sm, err := e.staged(ctx, doc.Name)
	if err != nil {
		return e.failed(err)
	}
	e.mu.Lock()
	if !sm.deleted && sm.doc == doc && (sm.base != nil || e.stage.has(doc.Name)) {
		e.mu.Unlock()
		return Result{Text: fmt.Sprintf("%s already holds exactly this; nothing changed.", doc.Name.File())}, nil
	}
	created := sm.base == nil && (sm.deleted || !e.stage.has(doc.Name))
	sm.doc, sm.deleted = doc, false
	e.stage.add(doc.Name, sm)
	e.mu.Unlock()
	op := memory.OpUpdated
	text := fmt.Sprintf("Updated %s (staged: the run's changes apply when it ends).", doc.Name.File())
	if created {
		op = memory.OpCreated
		text = fmt.Sprintf("Created %s (staged: the run's changes apply when it ends); the index lists it.", doc.Name.File())
	}
	e.changed(ctx, op, doc.Name)
	return Result{Text: text}, nil
}

// stageDelete keeps a deletion for later.
func (e *Executor) stageDelete(ctx context.Context, n memory.Name, reason string) (Result, error) {
	sm, err := e.staged(ctx, n)
	if err != nil {
		return e.failed(err)
	}
	e.mu.Lock()
	if sm.deleted || (sm.base == nil && !e.stage.has(n)) {
		e.mu.Unlock()
		return e.failed(fmt.Errorf("%s is not a live memory of %s: %w", n.File(), e.b.Scope, memory.ErrNotFound))
	}
	sm.deleted = true
	if reason = strings.TrimSpace(reason); reason != "" {
		sm.reasons = append(sm.reasons, reason)
	}
	e.stage.add(n, sm)
	e.mu.Unlock()
	e.changed(ctx, memory.OpDeleted, n)
	return Result{Text: fmt.Sprintf("Deleted %s (staged: the run's changes apply when it ends); it leaves the index and stays restorable.", n.File())}, nil
}

// staged returns the stage's entry of a memory, or a new one based on the
// stored memory (base nil when it is not live), not yet added to the stage.
func (e *Executor) staged(ctx context.Context, n memory.Name) (*stagedMemory, error) {
	e.mu.Lock()
	sm, ok := e.stage.memories[n]
	e.mu.Unlock()
	if ok {
		return sm, nil
	}
	m, err := e.store.Get(ctx, e.b.Tenant, e.b.Scope, n)
	if errors.Is(err, memory.ErrNotFound) {
		return &stagedMemory{}, nil
	}
	if err != nil {
		return nil, err
	}
	return &stagedMemory{doc: m.Document, base: &m}, nil
}

func (s *stage) has(n memory.Name) bool {
	_, ok := s.memories[n]
	return ok
}

func (s *stage) add(n memory.Name, sm *stagedMemory) {
	if !s.has(n) {
		s.memories[n] = sm
		s.order = append(s.order, n)
	}
}

// live returns the live memories as the run sees them (name → description).
func (e *Executor) live(ctx context.Context) (map[memory.Name]memory.Header, error) {
	heads, err := e.store.Headers(ctx, e.b.Tenant, e.b.Scope, maxStaged)
	if err != nil {
		return nil, err
	}
	out := make(map[memory.Name]memory.Header, len(heads))
	for _, h := range heads {
		out[h.Name] = h
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for n, sm := range e.stage.memories {
		if sm.deleted {
			delete(out, n)
			continue
		}
		out[n] = memory.Header{Scope: e.b.Scope, Name: n, Description: sm.doc.Description, Type: sm.doc.Type}
	}
	return out, nil
}

// maxStaged bounds the memories of a scope a staging executor sees; a
// scope is far smaller.
const maxStaged = 100_000

// stagedList answers memory_list through the stage: the memories the run
// changed first, then the others, most recently updated first.
func (e *Executor) stagedList(ctx context.Context) (Result, error) {
	heads, err := e.store.Headers(ctx, e.b.Tenant, e.b.Scope, e.opts.ListLimit+1)
	if err != nil {
		return e.failed(err)
	}
	var lines []string
	e.mu.Lock()
	for _, n := range e.stage.order {
		if sm := e.stage.memories[n]; !sm.deleted {
			lines = append(lines, stagedListLine(sm.doc))
		}
	}
	for _, h := range heads {
		if !e.stage.has(h.Name) {
			lines = append(lines, listLine(h))
		}
	}
	e.mu.Unlock()
	if len(lines) == 0 {
		return Result{Text: fmt.Sprintf("%s has no memories.", e.b.Scope)}, nil
	}
	more := len(lines) > e.opts.ListLimit || len(heads) > e.opts.ListLimit
	lines = lines[:min(len(lines), e.opts.ListLimit)]
	var b strings.Builder
	fmt.Fprintf(&b, "%d memories of %s, those changed in this run first, then the most recently updated:\n", len(lines), e.b.Scope)
	for _, l := range lines {
		b.WriteString(l)
	}
	if more {
		fmt.Fprintf(&b, "(older memories are not listed; only the %d most recent)\n", len(lines))
	}
	return Result{Text: strings.TrimSuffix(b.String(), "\n")}, nil
}

// stagedIndex answers memory_index_read through the stage: the staged index,
// or the stored one as the run's changes leave it (lines of deleted memories
// dropped, new memories appended).
func (e *Executor) stagedIndex(ctx context.Context) (Result, error) {
	content, err := e.stagedIndexContent(ctx)
	if err != nil {
		return e.failed(err)
	}
	if content == "" {
		return Result{Text: fmt.Sprintf("The index (MEMORY.md) of %s is empty: no memories.", e.b.Scope)}, nil
	}
	return Result{Text: content}, nil
}

// stagedIndexContent is the index as the run's changes leave it.
func (e *Executor) stagedIndexContent(ctx context.Context) (string, error) {
	ix, err := e.store.Index(ctx, e.b.Tenant, e.b.Scope)
	if err != nil {
		return "", err
	}
	live, err := e.live(ctx)
	if err != nil {
		return "", err
	}
	l, err := e.store.Limits(ctx, e.b.Tenant)
	if err != nil {
		return "", fmt.Errorf("memtools: limits: %w", err)
	}
	e.mu.Lock()
	lines := ix.Lines()
	if e.stage.index != nil {
		lines, _ = memory.ParseIndex(*e.stage.index)
	}
	e.mu.Unlock()
	return memory.FormatIndex(project(lines, live, l.IndexLineMaxChars)), nil
}

// project keeps the lines of live memories, each once, and appends the
// default line of every live memory without one, by name.
func project(lines []memory.Line, live map[memory.Name]memory.Header, maxChars int) []memory.Line {
	seen := map[memory.Name]bool{}
	var out []memory.Line
	for _, l := range lines {
		if _, ok := live[l.Name]; ok && !seen[l.Name] {
			seen[l.Name] = true
			out = append(out, l)
		}
	}
	var missing []memory.Name
	for n := range live {
		if !seen[n] {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	for _, n := range missing {
		out = append(out, memory.DefaultLine(n, live[n].Description, maxChars))
	}
	return out
}

// stageIndex keeps an index edit for later, checked as PutIndex checks it
// against the memories as the run sees them.
func (e *Executor) stageIndex(ctx context.Context, content string) (Result, error) {
	live, err := e.live(ctx)
	if err != nil {
		return e.failed(err)
	}
	descriptions := make(map[memory.Name]string, len(live))
	for n, h := range live {
		descriptions[n] = h.Description
	}
	l, err := e.store.Limits(ctx, e.b.Tenant)
	if err != nil {
		return Result{}, fmt.Errorf("memtools: limits: %w", err)
	}
	lines, appended, err := memory.CheckIndex(content, descriptions, l.IndexLineMaxChars)
	if err != nil {
		return e.refused(ctx, err)
	}
	ix, err := e.store.Index(ctx, e.b.Tenant, e.b.Scope)
	if err != nil {
		return e.failed(err)
	}
	next := memory.FormatIndex(lines)
	e.mu.Lock()
	if e.stage.index == nil {
		e.stage.indexBase = ix.Revision
	}
	e.stage.index = &next
	e.indexChanged = true
	e.mu.Unlock()
	e.changed(ctx, memory.OpUpdated, "")
	text := fmt.Sprintf("Staged the index (%d lines; the run's changes apply when it ends).", len(lines))
	if len(appended) > 0 {
		files := make([]string, len(appended))
		for i, n := range appended {
			files[i] = n.File()
		}
		text += " The memories your edit left out were appended: " + strings.Join(files, ", ") + "."
	}
	return Result{Text: text}, nil
}

// TidyIndex stages the index as the run sees it when no index edit is
// staged and the stored index is untidy — a line that does not parse,
// points to no live memory or repeats one — so the run's changes leave no
// dead pointer behind. It reports whether it staged one.
func (e *Executor) TidyIndex(ctx context.Context) (bool, error) {
	if !e.opts.Stage {
		return false, errors.New("memtools: TidyIndex stages an index; the executor does not stage")
	}
	e.mu.Lock()
	staged := e.stage.index != nil
	e.mu.Unlock()
	if staged {
		return false, nil
	}
	ix, err := e.store.Index(ctx, e.b.Tenant, e.b.Scope)
	if err != nil {
		return false, err
	}
	heads, err := e.store.Headers(ctx, e.b.Tenant, e.b.Scope, maxStaged)
	if err != nil {
		return false, err
	}
	stored := map[memory.Name]bool{}
	for _, h := range heads {
		stored[h.Name] = true
	}
	lines := ix.Lines()
	tidy := memory.FormatIndex(lines) == ix.Content
	seen := map[memory.Name]bool{}
	for _, l := range lines {
		tidy = tidy && stored[l.Name] && !seen[l.Name]
		seen[l.Name] = true
	}
	if tidy {
		return false, nil
	}
	live, err := e.live(ctx)
	if err != nil {
		return false, err
	}
	l, err := e.store.Limits(ctx, e.b.Tenant)
	if err != nil {
		return false, fmt.Errorf("memtools: limits: %w", err)
	}
	next := memory.FormatIndex(project(lines, live, l.IndexLineMaxChars))
	e.mu.Lock()
	e.stage.index, e.stage.indexBase = &next, ix.Revision
	e.mu.Unlock()
	return true, nil
}
