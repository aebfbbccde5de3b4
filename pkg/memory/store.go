package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Memory is a memory as stored: its document, its scope, its latest
// revision and its times.
type Memory struct {
	Scope Scope
	Document
	Revision  int64
	CreatedAt time.Time
	// UpdatedAt is the time of the latest revision.
	UpdatedAt time.Time
	// DeletedAt is zero while the memory is live.
	DeletedAt time.Time
}

// Deleted reports whether the memory is deleted.
func (m Memory) Deleted() bool { return !m.DeletedAt.IsZero() }

// Header is what recall and the tools list: a memory without its body.
type Header struct {
	Scope       Scope
	Name        Name
	Description string
	Type        Type
	Revision    int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Header returns m's header.
func (m Memory) Header() Header {
	return Header{Scope: m.Scope, Name: m.Name, Description: m.Description, Type: m.Type, Revision: m.Revision,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}

// Change says who makes a change and why; every revision records it.
type Change struct {
	Actor Actor
	// Reason is free text: why the change is made.
	Reason string
	// SourceTurns are the event ids of the turns the change comes from.
	SourceTurns []string
	// SessionID is the session the change comes from. ActorAgent requires
	// it: the write marks that session (see Store.AgentWrite).
	SessionID string
}

func (c Change) check() error {
	switch {
	case !c.Actor.Valid():
		return Refuse(ReasonBadChange, "actor %q is not one of agent, extractor, dreamer, api, import", clip(string(c.Actor)))
	case c.Actor == ActorAgent && c.SessionID == "":
		return Refuse(ReasonBadChange, "a write of the agent names its session")
	}
	return nil
}

// Expect is a write's precondition (optimistic concurrency). The zero
// Expect holds always.
type Expect struct {
	// Revision, when above 0, is the revision the memory (or the index)
	// must be at: the write is refused with revision_mismatch otherwise.
	Revision int64
	// Absent requires that no live memory has the name (create only).
	Absent bool
}

func (e Expect) check(cur store.Memory, exists bool) error {
	if e.Revision > 0 && (!exists || cur.Revision != e.Revision) {
		return Refuse(ReasonRevisionMismatch, "expected revision %d, the memory is at revision %d", e.Revision, cur.Revision)
	}
	if e.Absent && exists && cur.DeletedAt.IsZero() {
		return Refuse(ReasonRevisionMismatch, "%s exists already (revision %d)", cur.Name, cur.Revision)
	}
	return nil
}

// Result is what a change did.
type Result struct {
	// Memory is the memory after the change (deleted after a deletion).
	Memory Memory
	// Op is what the change recorded; "" when the memory already was as
	// asked and no revision was made.
	Op Op
	// RestoredFrom is the revision a rollback went back to.
	RestoredFrom int64
}

// Changed reports whether a revision was made.
func (r Result) Changed() bool { return r.Op != "" }

// Revision is one change of a memory, with the memory as it was after it.
type Revision struct {
	Scope    Scope
	Revision int64
	Op       Op
	Change   Change
	// RestoredFrom is the revision a rollback went back to (0 otherwise).
	RestoredFrom int64
	// Document is the memory after the change; for a deletion, the content deleted.
	Document
	Deleted bool
	At      time.Time
}

// Index is a scope's stored index document (MEMORY.md).
type Index struct {
	Scope   Scope
	Content string
	// Revision counts the index's changes (0: never written).
	Revision  int64
	Actor     Actor
	Reason    string
	UpdatedAt time.Time
}

// Lines parses the index. A stored index always parses; lines that would
// not are left out.
func (ix Index) Lines() []Line {
	var out []Line
	for _, raw := range indexLines(ix.Content) {
		if l, err := ParseLine(raw); err == nil {
			out = append(out, l)
		}
	}
	return out
}

// IndexResult is what an index edit did.
type IndexResult struct {
	Index Index
	// Appended are the live memories the edit left out, appended with
	// their default lines.
	Appended []Name
	// Changed is false when the edit left the index as it was.
	Changed bool
}

// maxScopeMemories bounds the memories of one scope an index edit is
// checked against; a scope is far smaller.
const maxScopeMemories = 100_000

// LimitsFunc returns a tenant's limits.
type LimitsFunc func(ctx context.Context, tenant string) (Limits, error)

// Options configure a Store.
type Options struct {
	// Limits gives each tenant's limits (DefaultLimits when nil).
	Limits LimitsFunc
	// Now is the clock of created_at / updated_at (time.Now when nil).
	Now func() time.Time
}

// Store keeps memories and their indexes in Postgres. Every change takes
// the scope's index lock, applies the change, records a revision and brings
// the index in step in one transaction; changes are counted in
// mnemos.memories.changed{actor,op} once committed, refusals in
// mnemos.memories.refused{actor,reason}.
type Store struct {
	db      *store.Store
	limits  LimitsFunc
	now     func() time.Time
	changed metric.Int64Counter
	refused metric.Int64Counter
}

// NewStore returns a Store on db. meter may be nil.
func NewStore(db *store.Store, meter metric.Meter, opts Options) (*Store, error) {
	meter = defaults.Meter(meter)
	s := &Store{db: db, limits: opts.Limits, now: opts.Now}
	if s.limits == nil {
		s.limits = func(context.Context, string) (Limits, error) { return DefaultLimits(), nil }
	}
	if s.now == nil {
		s.now = time.Now
	}
	var err error
	if s.changed, err = meter.Int64Counter("mnemos.memories.changed",
		metric.WithDescription("Memory revisions made, by actor and operation (created, updated, deleted, restored).")); err != nil {
		return nil, fmt.Errorf("memory.NewStore: %w", err)
	}
	if s.refused, err = meter.Int64Counter("mnemos.memories.refused",
		metric.WithDescription("Memory writes and requests refused as bad input or a failed precondition, by reason.")); err != nil {
		return nil, fmt.Errorf("memory.NewStore: %w", err)
	}
	return s, nil
}

// Limits returns tenant's limits.
func (s *Store) Limits(ctx context.Context, tenant string) (Limits, error) {
	return s.limits(ctx, tenant)
}

// Refused counts err when it is a refusal (*Error) and returns it, for
// callers that refuse input before it reaches the Store (a scope that does
// not parse, a document that does not).
func (s *Store) Refused(ctx context.Context, actor Actor, err error) error {
	if e, ok := AsError(err); ok {
		s.refused.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", string(e.Reason)), attribute.String("actor", string(actor))))
	}
	return err
}

// clock is now at the database's precision, so what a change returns
// equals what a later read returns.
func (s *Store) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Get returns a live memory; ErrNotFound when it is absent or deleted.
func (s *Store) Get(ctx context.Context, tenant string, scope Scope, name Name) (Memory, error) {
	m, err := s.GetAny(ctx, tenant, scope, name)
	if err == nil && m.Deleted() {
		return Memory{}, fmt.Errorf("memory.Get %s %s: %w", scope, name, ErrDeleted)
	}
	return m, err
}

// GetAny returns a memory, live or deleted; ErrNotFound when the scope never had it.
func (s *Store) GetAny(ctx context.Context, tenant string, scope Scope, name Name) (Memory, error) {
	var m Memory
	err := s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		r, err := tx.Memory(ctx, scope.String(), string(name))
		if err != nil {
			return err
		}
		m = toMemory(scope, r)
		return nil
	})
	return m, err
}

// ListOptions select what List returns.
type ListOptions struct {
	// IncludeDeleted lists deleted memories too.
	IncludeDeleted bool
	// Limit bounds how many are listed (1,000 when 0).
	Limit int
}

// List returns a scope's memories, most recently updated first.
func (s *Store) List(ctx context.Context, tenant string, scope Scope, opts ListOptions) ([]Memory, error) {
	if opts.Limit <= 0 {
		opts.Limit = 1_000
	}
	var out []Memory
	err := s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		rows, err := tx.Memories(ctx, scope.String(), opts.IncludeDeleted, opts.Limit)
		for _, r := range rows {
			out = append(out, toMemory(scope, r))
		}
		return err
	})
	return out, err
}

// Headers returns the headers of a scope's live memories, most recently
// updated first, at most limit (200 when 0): what recall scans.
func (s *Store) Headers(ctx context.Context, tenant string, scope Scope, limit int) ([]Header, error) {
	if limit <= 0 {
		limit = 200
	}
	var out []Header
	err := s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		rows, err := tx.MemoryHeaders(ctx, scope.String(), limit)
		for _, r := range rows {
			out = append(out, toMemory(scope, r).Header())
		}
		return err
	})
	return out, err
}

// HeadersNamed returns the headers of those of names that are live
// memories of scope, in no order.
func (s *Store) HeadersNamed(ctx context.Context, tenant string, scope Scope, names []Name) ([]Header, error) {
	raw := make([]string, len(names))
	for i, n := range names {
		raw[i] = string(n)
	}
	var out []Header
	err := s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		rows, err := tx.MemoryHeadersNamed(ctx, scope.String(), raw)
		for _, r := range rows {
			out = append(out, toMemory(scope, r).Header())
		}
		return err
	})
	return out, err
}

// Write creates or replaces a memory of scope with doc (whose Name names
// it). doc is made Canonical and validated against the tenant's limits. A
// write that changes nothing makes no revision (Result.Op is "").
func (s *Store) Write(ctx context.Context, tenant string, scope Scope, doc Document, ch Change, exp Expect) (Result, error) {
	doc = doc.Canonical()
	if err := s.validate(ctx, tenant, scope, ch, doc); err != nil {
		return Result{}, err
	}
	return s.change(ctx, tenant, scope, doc.Name, ch, exp, writeDocument(scope, doc))
}

// writeDocument is the change of a write of doc (canonical and valid).
func writeDocument(scope Scope, doc Document) changeFunc {
	return func(cur store.Memory, exists bool, now time.Time) (store.Memory, Op, int64, error) {
		live := exists && cur.DeletedAt.IsZero()
		if live && documentOf(cur) == doc {
			return cur, "", 0, nil
		}
		next := fromDocument(scope, doc)
		next.Revision, next.UpdatedAt, next.CreatedAt = cur.Revision+1, now, now
		if live {
			next.CreatedAt = cur.CreatedAt
			return next, OpUpdated, 0, nil
		}
		return next, OpCreated, 0, nil
	}
}

// Delete deletes a live memory (softly: its revisions stay and Rollback
// brings it back). ErrNotFound when there is no live memory of that name.
func (s *Store) Delete(ctx context.Context, tenant string, scope Scope, name Name, ch Change, exp Expect) (Result, error) {
	if err := s.validate(ctx, tenant, scope, ch, Document{}); err != nil {
		return Result{}, err
	}
	return s.change(ctx, tenant, scope, name, ch, exp, deleteMemory(scope, name))
}

// deleteMemory is the change of a deletion.
func deleteMemory(scope Scope, name Name) changeFunc {
	return func(cur store.Memory, exists bool, now time.Time) (store.Memory, Op, int64, error) {
		if !exists {
			return cur, "", 0, fmt.Errorf("memory.Delete %s %s: %w", scope, name, ErrNotFound)
		}
		if !cur.DeletedAt.IsZero() {
			return cur, "", 0, fmt.Errorf("memory.Delete %s %s: %w", scope, name, ErrDeleted)
		}
		next := cur
		next.Revision, next.DeletedAt, next.UpdatedAt = cur.Revision+1, now, now
		return next, OpDeleted, 0, nil
	}
}

// Rollback brings a memory back to what it was after revision to: its
// content then, live (op restored), or deleted when revision to was a
// deletion (op deleted). It is itself a new revision; a rollback to the
// state the memory is in makes none. It restores deleted memories too.
// ErrNotFound when the memory or the revision does not exist.
func (s *Store) Rollback(ctx context.Context, tenant string, scope Scope, name Name, to int64, ch Change, exp Expect) (Result, error) {
	if err := s.validate(ctx, tenant, scope, ch, Document{}); err != nil {
		return Result{}, err
	}
	return s.changeTx(ctx, tenant, scope, name, ch, exp, func(tx *store.Tx, cur store.Memory, exists bool, now time.Time) (store.Memory, Op, int64, error) {
		if !exists {
			return cur, "", 0, fmt.Errorf("memory.Rollback %s %s: %w", scope, name, ErrNotFound)
		}
		rev, err := tx.MemoryRevision(ctx, scope.String(), string(name), to)
		if err != nil {
			return cur, "", 0, fmt.Errorf("memory.Rollback %s %s to revision %d: %w", scope, name, to, err)
		}
		live := cur.DeletedAt.IsZero()
		next := cur
		next.Revision, next.UpdatedAt = cur.Revision+1, now
		if rev.Deleted {
			if !live {
				return cur, "", 0, nil
			}
			next.DeletedAt = now
			return next, OpDeleted, to, nil
		}
		target := store.Memory{Type: rev.Type, Description: rev.Description, Body: rev.Body, Name: cur.Name}
		if live && documentOf(cur) == documentOf(target) {
			return cur, "", 0, nil
		}
		next.Type, next.Description, next.Body, next.DeletedAt = rev.Type, rev.Description, rev.Body, time.Time{}
		return next, OpRestored, to, nil
	})
}

// validate checks what every change needs: a known actor (and an agent's
// session), and for a write a valid document within the tenant's limits.
func (s *Store) validate(ctx context.Context, tenant string, scope Scope, ch Change, doc Document) error {
	if err := ch.check(); err != nil {
		return s.Refused(ctx, ch.Actor, err)
	}
	if scope.IsZero() {
		return s.Refused(ctx, ch.Actor, Refuse(ReasonBadScope, "no scope given"))
	}
	if doc == (Document{}) {
		return nil
	}
	l, err := s.limits(ctx, tenant)
	if err != nil {
		return fmt.Errorf("memory: limits of %s: %w", tenant, err)
	}
	return s.Refused(ctx, ch.Actor, doc.Validate(l))
}

type changeFunc func(cur store.Memory, exists bool, now time.Time) (next store.Memory, op Op, restoredFrom int64, err error)

func (s *Store) change(ctx context.Context, tenant string, scope Scope, name Name, ch Change, exp Expect, fn changeFunc) (Result, error) {
	return s.changeTx(ctx, tenant, scope, name, ch, exp, fn.inTx())
}

func (fn changeFunc) inTx() changeInFunc {
	return func(_ *store.Tx, cur store.Memory, exists bool, now time.Time) (store.Memory, Op, int64, error) {
		return fn(cur, exists, now)
	}
}

// changeTx runs one change of one memory in a transaction of its own: the
// scope's index lock, then changeIn, then the metrics once committed.
func (s *Store) changeTx(ctx context.Context, tenant string, scope Scope, name Name, ch Change, exp Expect, fn changeInFunc) (Result, error) {
	if _, err := ParseName(string(name)); err != nil {
		return Result{}, s.Refused(ctx, ch.Actor, err)
	}
	l, err := s.limits(ctx, tenant)
	if err != nil {
		return Result{}, fmt.Errorf("memory: limits of %s: %w", tenant, err)
	}
	var res Result
	err = s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		ix, err := tx.LockMemoryIndex(ctx, scope.String())
		if err != nil {
			return err
		}
		res, err = s.changeIn(ctx, tx, &ix, l, scope, name, ch, exp, fn)
		return err
	})
	if err != nil {
		return Result{}, s.Refused(ctx, ch.Actor, err)
	}
	s.count(ctx, ch.Actor, res)
	return res, nil
}

type changeInFunc func(tx *store.Tx, cur store.Memory, exists bool, now time.Time) (store.Memory, Op, int64, error)

// changeIn makes one change of one memory inside tx, whose scope index ix
// is locked: the precondition, fn, the revision, the index (ix follows),
// the agent's mark.
func (s *Store) changeIn(ctx context.Context, tx *store.Tx, ix *store.MemoryIndex, l Limits, scope Scope, name Name, ch Change, exp Expect, fn changeInFunc) (Result, error) {
	cur, err := tx.Memory(ctx, scope.String(), string(name))
	exists := err == nil
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return Result{}, err
	}
	if err := exp.check(cur, exists); err != nil {
		return Result{}, err
	}
	now := s.clock()
	next, op, from, err := fn(tx, cur, exists, now)
	if err != nil {
		return Result{}, err
	}
	res := Result{Memory: toMemory(scope, next), Op: op, RestoredFrom: from}
	if op == "" {
		return res, nil
	}
	next.Scope, next.Name = scope.String(), string(name)
	if err := tx.PutMemory(ctx, next); err != nil {
		return Result{}, err
	}
	if err := tx.InsertMemoryRevision(ctx, store.MemoryRevision{
		Scope: scope.String(), Name: string(name), Revision: next.Revision, Op: string(op),
		Actor: string(ch.Actor), Reason: ch.Reason, SourceTurns: ch.SourceTurns, SessionID: ch.SessionID,
		RestoredFrom: from, Type: next.Type, Description: next.Description, Body: next.Body,
		Deleted: !next.DeletedAt.IsZero(), CreatedAt: now,
	}); err != nil {
		return Result{}, err
	}
	lines := followChange(*ix, name, cur, exists, next, l.IndexLineMaxChars)
	if content := FormatIndex(lines); content != ix.Content {
		ix.Content, ix.Revision, ix.Actor, ix.Reason, ix.UpdatedAt = content, ix.Revision+1, string(ch.Actor), ch.Reason, now
		if err := tx.SaveMemoryIndex(ctx, *ix); err != nil {
			return Result{}, err
		}
	}
	return res, s.markAgent(ctx, tx, ch, now)
}

// count records a committed change in the metrics.
func (s *Store) count(ctx context.Context, actor Actor, res Result) {
	if res.Changed() {
		s.changed.Add(ctx, 1, metric.WithAttributes(attribute.String("actor", string(actor)), attribute.String("op", string(res.Op))))
	}
}

// followChange returns the index lines after a memory changed from cur to
// next: a memory that became live gets its default line at the end, a
// deleted one loses its line, and an updated one whose hook was still the
// default for its old description gets the default for the new one.
func followChange(ix store.MemoryIndex, name Name, cur store.Memory, existed bool, next store.Memory, maxChars int) []Line {
	lines := Index{Content: ix.Content}.Lines()
	at := slices.IndexFunc(lines, func(l Line) bool { return l.Name == name })
	live := next.DeletedAt.IsZero()
	switch {
	case !live && at >= 0:
		return slices.Delete(lines, at, at+1)
	case !live:
		return lines
	case at < 0:
		return append(lines, DefaultLine(name, next.Description, maxChars))
	case existed && lines[at].Hook == DefaultLine(name, cur.Description, maxChars).Hook:
		lines[at].Hook = DefaultLine(name, next.Description, maxChars).Hook
	}
	return lines
}

// markAgent records an agent's change on its session.
func (s *Store) markAgent(ctx context.Context, tx *store.Tx, ch Change, now time.Time) error {
	if ch.Actor != ActorAgent {
		return nil
	}
	_, err := tx.RecordAgentMemoryWrite(ctx, ch.SessionID, now)
	return err
}

// Revisions lists a memory's revisions, oldest first; ErrNotFound when the
// scope never had the memory.
func (s *Store) Revisions(ctx context.Context, tenant string, scope Scope, name Name) ([]Revision, error) {
	var out []Revision
	err := s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		rows, err := tx.MemoryRevisions(ctx, scope.String(), string(name))
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return fmt.Errorf("memory.Revisions %s %s: %w", scope, name, ErrNotFound)
		}
		for _, r := range rows {
			out = append(out, toRevision(scope, r))
		}
		return nil
	})
	return out, err
}

// Revision returns one revision; ErrNotFound when there is no such revision.
func (s *Store) Revision(ctx context.Context, tenant string, scope Scope, name Name, revision int64) (Revision, error) {
	var out Revision
	err := s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		r, err := tx.MemoryRevision(ctx, scope.String(), string(name), revision)
		if err != nil {
			return err
		}
		out = toRevision(scope, r)
		return nil
	})
	return out, err
}

// Diff returns the unified diff of a memory's markdown from revision from
// to revision to (see DiffRevisions).
func (s *Store) Diff(ctx context.Context, tenant string, scope Scope, name Name, from, to int64) (string, error) {
	a, err := s.Revision(ctx, tenant, scope, name, from)
	if err != nil {
		return "", err
	}
	b, err := s.Revision(ctx, tenant, scope, name, to)
	if err != nil {
		return "", err
	}
	return DiffRevisions(a, b), nil
}

// Index returns a scope's index; a scope never written has an empty one
// (revision 0).
func (s *Store) Index(ctx context.Context, tenant string, scope Scope) (Index, error) {
	out := Index{Scope: scope}
	err := s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		r, err := tx.MemoryIndex(ctx, scope.String())
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		out = toIndex(scope, r)
		return nil
	})
	return out, err
}

// PutIndex replaces a scope's index with an edited one, after CheckIndex:
// lines that do not parse, are too long, point to no live memory or repeat
// one refuse the edit (bad_index); live memories it leaves out are appended.
// The stored index is the edit's lines as FormatIndex writes them.
// expectRevision, when above 0, is the index revision the edit was made on.
func (s *Store) PutIndex(ctx context.Context, tenant string, scope Scope, content string, ch Change, expectRevision int64) (IndexResult, error) {
	if err := s.validate(ctx, tenant, scope, ch, Document{}); err != nil {
		return IndexResult{}, err
	}
	l, err := s.limits(ctx, tenant)
	if err != nil {
		return IndexResult{}, fmt.Errorf("memory: limits of %s: %w", tenant, err)
	}
	var res IndexResult
	err = s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		ix, err := tx.LockMemoryIndex(ctx, scope.String())
		if err != nil {
			return err
		}
		if expectRevision > 0 && ix.Revision != expectRevision {
			return Refuse(ReasonRevisionMismatch, "expected index revision %d, the index is at revision %d", expectRevision, ix.Revision)
		}
		res, err = s.putIndexIn(ctx, tx, &ix, l, scope, content, ch)
		return err
	})
	if err != nil {
		return IndexResult{}, s.Refused(ctx, ch.Actor, err)
	}
	return res, nil
}

// putIndexIn replaces the index ix, locked in tx, with content (see PutIndex).
func (s *Store) putIndexIn(ctx context.Context, tx *store.Tx, ix *store.MemoryIndex, l Limits, scope Scope, content string, ch Change) (IndexResult, error) {
	heads, err := tx.MemoryHeaders(ctx, scope.String(), maxScopeMemories)
	if err != nil {
		return IndexResult{}, err
	}
	live := make(map[Name]string, len(heads))
	for _, h := range heads {
		live[Name(h.Name)] = h.Description
	}
	lines, appended, err := CheckIndex(content, live, l.IndexLineMaxChars)
	if err != nil {
		return IndexResult{}, err
	}
	res := IndexResult{Index: toIndex(scope, *ix), Appended: appended}
	next := FormatIndex(lines)
	if next == ix.Content {
		return res, nil
	}
	now := s.clock()
	ix.Content, ix.Revision, ix.Actor, ix.Reason, ix.UpdatedAt = next, ix.Revision+1, string(ch.Actor), ch.Reason, now
	if err := tx.SaveMemoryIndex(ctx, *ix); err != nil {
		return IndexResult{}, err
	}
	res.Index, res.Changed = toIndex(scope, *ix), true
	return res, s.markAgent(ctx, tx, ch, now)
}

// AgentWrite is the latest memory change a session's main agent made
// itself (a write, deletion, rollback or index edit with ActorAgent).
type AgentWrite struct {
	SessionID string
	At        time.Time
	// Seq and Position are the session's applied seq and message count at
	// that moment: the change belongs to a round after seq, and messages
	// from Position on came after it.
	Seq      int64
	Position int64
	// Writes counts the agent's memory changes in the session.
	Writes int64
}

// AgentWrite returns a session's latest agent memory change; ErrNotFound
// when its agent never changed memory. The extractor skips the turns it covers.
func (s *Store) AgentWrite(ctx context.Context, tenant, sessionID string) (AgentWrite, error) {
	var out AgentWrite
	err := s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		w, err := tx.AgentMemoryWrite(ctx, sessionID)
		if err != nil {
			return err
		}
		out = AgentWrite{SessionID: w.SessionID, At: utc(w.At), Seq: w.Seq, Position: w.Position, Writes: w.Writes}
		return nil
	})
	return out, err
}

func toMemory(scope Scope, r store.Memory) Memory {
	return Memory{
		Scope: scope, Document: documentOf(r), Revision: r.Revision,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), DeletedAt: utc(r.DeletedAt),
	}
}

func documentOf(r store.Memory) Document {
	return Document{Name: Name(r.Name), Description: r.Description, Type: Type(r.Type), Body: r.Body}
}

func fromDocument(scope Scope, d Document) store.Memory {
	return store.Memory{Scope: scope.String(), Name: string(d.Name), Type: string(d.Type), Description: d.Description, Body: d.Body}
}

func toRevision(scope Scope, r store.MemoryRevision) Revision {
	return Revision{
		Scope: scope, Revision: r.Revision, Op: Op(r.Op),
		Change:       Change{Actor: Actor(r.Actor), Reason: r.Reason, SourceTurns: r.SourceTurns, SessionID: r.SessionID},
		RestoredFrom: r.RestoredFrom,
		Document:     Document{Name: Name(r.Name), Description: r.Description, Type: Type(r.Type), Body: r.Body},
		Deleted:      r.Deleted, At: r.CreatedAt.UTC(),
	}
}

func toIndex(scope Scope, r store.MemoryIndex) Index {
	return Index{Scope: scope, Content: r.Content, Revision: r.Revision, Actor: Actor(r.Actor), Reason: r.Reason, UpdatedAt: utc(r.UpdatedAt)}
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
