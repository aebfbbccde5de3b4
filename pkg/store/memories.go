package store

import (
	"context"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// Memory is one long-term memory of a scope as stored: its current state.
// pkg/memory gives these rows their meaning; here they are plain values.
type Memory struct {
	Scope       string
	Name        string
	Revision    int64
	Type        string
	Description string
	Body        string
	// DeletedAt is zero while the memory is live.
	DeletedAt time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

func toMemory(r dbsqlc.Memory) Memory {
	return Memory{
		Scope: r.Scope, Name: r.Name, Revision: r.Revision, Type: r.Type, Description: r.Description, Body: r.Body,
		DeletedAt: r.DeletedAt.Time, CreatedAt: r.CreatedAt.Time, UpdatedAt: r.UpdatedAt.Time,
	}
}

// Memory reads one memory, live or deleted; ErrNotFound when the scope never had it.
func (t *Tx) Memory(ctx context.Context, scope, name string) (Memory, error) {
	r, err := t.q.MemoryGet(ctx, dbsqlc.MemoryGetParams{TenantID: t.tenant, Scope: scope, Name: name})
	if err != nil {
		return Memory{}, fmt.Errorf("store.Memory: %w", notFound(err))
	}
	return toMemory(r), nil
}

// Memories lists a scope's memories, most recently updated first, at most
// limit of them; deleted ones too when includeDeleted.
func (t *Tx) Memories(ctx context.Context, scope string, includeDeleted bool, limit int) ([]Memory, error) {
	rows, err := t.q.MemoryList(ctx, dbsqlc.MemoryListParams{TenantID: t.tenant, Scope: scope, IncludeDeleted: includeDeleted, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store.Memories: %w", err)
	}
	out := make([]Memory, len(rows))
	for i, r := range rows {
		out[i] = toMemory(r)
	}
	return out, nil
}

// MemoryHeaders lists a scope's live memories without their bodies (Body is
// ""), most recently updated first, at most limit of them.
func (t *Tx) MemoryHeaders(ctx context.Context, scope string, limit int) ([]Memory, error) {
	rows, err := t.q.MemoryHeaderList(ctx, dbsqlc.MemoryHeaderListParams{TenantID: t.tenant, Scope: scope, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store.MemoryHeaders: %w", err)
	}
	out := make([]Memory, len(rows))
	for i, r := range rows {
		out[i] = Memory{Scope: scope, Name: r.Name, Revision: r.Revision, Type: r.Type, Description: r.Description,
			CreatedAt: r.CreatedAt.Time, UpdatedAt: r.UpdatedAt.Time}
	}
	return out, nil
}

// MemoryHeadersNamed returns, without their bodies, those of names that
// are live memories of scope, in no order.
func (t *Tx) MemoryHeadersNamed(ctx context.Context, scope string, names []string) ([]Memory, error) {
	rows, err := t.q.MemoryHeadersNamed(ctx, dbsqlc.MemoryHeadersNamedParams{TenantID: t.tenant, Scope: scope, Names: names})
	if err != nil {
		return nil, fmt.Errorf("store.MemoryHeadersNamed: %w", err)
	}
	out := make([]Memory, len(rows))
	for i, r := range rows {
		out[i] = Memory{Scope: scope, Name: r.Name, Revision: r.Revision, Type: r.Type, Description: r.Description,
			CreatedAt: r.CreatedAt.Time, UpdatedAt: r.UpdatedAt.Time}
	}
	return out, nil
}

// MemoryNames lists the names of a scope's live memories, sorted.
func (t *Tx) MemoryNames(ctx context.Context, scope string) ([]string, error) {
	names, err := t.q.MemoryNames(ctx, dbsqlc.MemoryNamesParams{TenantID: t.tenant, Scope: scope})
	if err != nil {
		return nil, fmt.Errorf("store.MemoryNames: %w", err)
	}
	return names, nil
}

// PutMemory writes a memory's current state, creating its row when new.
func (t *Tx) PutMemory(ctx context.Context, m Memory) error {
	err := t.q.MemoryPut(ctx, dbsqlc.MemoryPutParams{
		TenantID: t.tenant, Scope: m.Scope, Name: m.Name, Revision: m.Revision, Type: m.Type,
		Description: m.Description, Body: m.Body, DeletedAt: timestamptz(m.DeletedAt),
		CreatedAt: timestamptz(m.CreatedAt), UpdatedAt: timestamptz(m.UpdatedAt),
	})
	if err != nil {
		return fmt.Errorf("store.PutMemory: %w", err)
	}
	return nil
}

// MemoryRevision is one change of a memory, with the memory as it was after it.
type MemoryRevision struct {
	Scope       string
	Name        string
	Revision    int64
	Op          string
	Actor       string
	Reason      string
	SourceTurns []string
	SessionID   string
	// RestoredFrom is the revision a rollback went back to (0 otherwise).
	RestoredFrom int64
	Type         string
	Description  string
	Body         string
	Deleted      bool
	CreatedAt    time.Time
}

func toMemoryRevision(r dbsqlc.MemoryRevision) MemoryRevision {
	out := MemoryRevision{
		Scope: r.Scope, Name: r.Name, Revision: r.Revision, Op: r.Op, Actor: r.Actor, Reason: r.Reason,
		SourceTurns: r.SourceTurns, SessionID: r.SessionID, Type: r.Type, Description: r.Description,
		Body: r.Body, Deleted: r.Deleted, CreatedAt: r.CreatedAt.Time,
	}
	if r.RestoredFrom != nil {
		out.RestoredFrom = *r.RestoredFrom
	}
	return out
}

// InsertMemoryRevision records a change. The memory's row must exist.
func (t *Tx) InsertMemoryRevision(ctx context.Context, r MemoryRevision) error {
	var from *int64
	if r.RestoredFrom > 0 {
		from = &r.RestoredFrom
	}
	turns := r.SourceTurns
	if turns == nil {
		turns = []string{}
	}
	err := t.q.MemoryRevisionInsert(ctx, dbsqlc.MemoryRevisionInsertParams{
		TenantID: t.tenant, Scope: r.Scope, Name: r.Name, Revision: r.Revision, Op: r.Op, Actor: r.Actor,
		Reason: r.Reason, SourceTurns: turns, SessionID: r.SessionID, RestoredFrom: from, Type: r.Type,
		Description: r.Description, Body: r.Body, Deleted: r.Deleted, CreatedAt: timestamptz(r.CreatedAt),
	})
	if err != nil {
		return fmt.Errorf("store.InsertMemoryRevision: %w", err)
	}
	return nil
}

// MemoryRevisions lists a memory's revisions, oldest first.
func (t *Tx) MemoryRevisions(ctx context.Context, scope, name string) ([]MemoryRevision, error) {
	rows, err := t.q.MemoryRevisionList(ctx, dbsqlc.MemoryRevisionListParams{TenantID: t.tenant, Scope: scope, Name: name})
	if err != nil {
		return nil, fmt.Errorf("store.MemoryRevisions: %w", err)
	}
	out := make([]MemoryRevision, len(rows))
	for i, r := range rows {
		out[i] = toMemoryRevision(r)
	}
	return out, nil
}

// MemoryRevision reads one revision; ErrNotFound when there is no such revision.
func (t *Tx) MemoryRevision(ctx context.Context, scope, name string, revision int64) (MemoryRevision, error) {
	r, err := t.q.MemoryRevisionGet(ctx, dbsqlc.MemoryRevisionGetParams{TenantID: t.tenant, Scope: scope, Name: name, Revision: revision})
	if err != nil {
		return MemoryRevision{}, fmt.Errorf("store.MemoryRevision: %w", notFound(err))
	}
	return toMemoryRevision(r), nil
}

// MemoryIndex is a scope's stored index document (MEMORY.md).
type MemoryIndex struct {
	Scope   string
	Content string
	// Revision counts the index's changes (0: never written).
	Revision  int64
	Actor     string
	Reason    string
	UpdatedAt time.Time
}

func toMemoryIndex(r dbsqlc.MemoryIndex) MemoryIndex {
	return MemoryIndex{Scope: r.Scope, Content: r.Content, Revision: r.Revision, Actor: r.Actor, Reason: r.Reason, UpdatedAt: r.UpdatedAt.Time}
}

// LockMemoryIndex returns a scope's index locked until the transaction ends,
// creating an empty one when the scope has none. Every change of a scope's
// memories or index takes this lock first, so a scope's changes apply one at
// a time and the index never misses one.
func (t *Tx) LockMemoryIndex(ctx context.Context, scope string) (MemoryIndex, error) {
	r, err := t.q.MemoryIndexLock(ctx, dbsqlc.MemoryIndexLockParams{TenantID: t.tenant, Scope: scope})
	if err != nil {
		return MemoryIndex{}, fmt.Errorf("store.LockMemoryIndex: %w", err)
	}
	return toMemoryIndex(r), nil
}

// MemoryIndex reads a scope's index; ErrNotFound when it was never written.
func (t *Tx) MemoryIndex(ctx context.Context, scope string) (MemoryIndex, error) {
	r, err := t.q.MemoryIndexGet(ctx, dbsqlc.MemoryIndexGetParams{TenantID: t.tenant, Scope: scope})
	if err != nil {
		return MemoryIndex{}, fmt.Errorf("store.MemoryIndex: %w", notFound(err))
	}
	return toMemoryIndex(r), nil
}

// SaveMemoryIndex replaces a scope's index, locked with LockMemoryIndex.
func (t *Tx) SaveMemoryIndex(ctx context.Context, ix MemoryIndex) error {
	err := t.q.MemoryIndexSave(ctx, dbsqlc.MemoryIndexSaveParams{
		TenantID: t.tenant, Scope: ix.Scope, Content: ix.Content, Revision: ix.Revision,
		Actor: ix.Actor, Reason: ix.Reason, UpdatedAt: timestamptz(ix.UpdatedAt),
	})
	if err != nil {
		return fmt.Errorf("store.SaveMemoryIndex: %w", err)
	}
	return nil
}

// MemorySection is the memory section of a session's context, as rendered
// for the session's compaction CompactionID ("" before the first).
type MemorySection struct {
	SessionID    string
	CompactionID string
	Blocks       []string
	CreatedAt    time.Time
}

// MemorySection reads a session's stored section; ErrNotFound when none.
func (t *Tx) MemorySection(ctx context.Context, sessionID string) (MemorySection, error) {
	r, err := t.q.MemorySectionGet(ctx, dbsqlc.MemorySectionGetParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return MemorySection{}, fmt.Errorf("store.MemorySection: %w", notFound(err))
	}
	return MemorySection{SessionID: r.SessionID, CompactionID: r.CompactionID, Blocks: r.Blocks, CreatedAt: r.CreatedAt.Time}, nil
}

// PutMemorySection stores a session's section unless one for the same
// compaction is stored already; it reports whether s was stored.
func (t *Tx) PutMemorySection(ctx context.Context, s MemorySection) (bool, error) {
	blocks := s.Blocks
	if blocks == nil {
		blocks = []string{}
	}
	n, err := t.q.MemorySectionPut(ctx, dbsqlc.MemorySectionPutParams{
		TenantID: t.tenant, SessionID: s.SessionID, CompactionID: s.CompactionID, Blocks: blocks,
	})
	if err != nil {
		return false, fmt.Errorf("store.PutMemorySection: %w", err)
	}
	return n > 0, nil
}

// AgentMemoryWrite is the latest memory write a session's main agent made
// itself: when, the session's applied seq and message count (the position
// of the next message) at that moment, and how many such writes there were.
type AgentMemoryWrite struct {
	SessionID string
	At        time.Time
	Seq       int64
	Position  int64
	Writes    int64
}

func toAgentMemoryWrite(r dbsqlc.AgentMemoryWrite) AgentMemoryWrite {
	return AgentMemoryWrite{SessionID: r.SessionID, At: r.WrittenAt.Time, Seq: r.Seq, Position: r.Position, Writes: r.Writes}
}

// RecordAgentMemoryWrite marks that the session's main agent wrote memory at at.
func (t *Tx) RecordAgentMemoryWrite(ctx context.Context, sessionID string, at time.Time) (AgentMemoryWrite, error) {
	r, err := t.q.AgentMemoryWriteRecord(ctx, dbsqlc.AgentMemoryWriteRecordParams{TenantID: t.tenant, SessionID: sessionID, WrittenAt: timestamptz(at)})
	if err != nil {
		return AgentMemoryWrite{}, fmt.Errorf("store.RecordAgentMemoryWrite: %w", err)
	}
	return toAgentMemoryWrite(r), nil
}

// AgentMemoryWrite reads a session's latest agent memory write; ErrNotFound
// when its agent never wrote memory.
func (t *Tx) AgentMemoryWrite(ctx context.Context, sessionID string) (AgentMemoryWrite, error) {
	r, err := t.q.AgentMemoryWriteGet(ctx, dbsqlc.AgentMemoryWriteGetParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return AgentMemoryWrite{}, fmt.Errorf("store.AgentMemoryWrite: %w", notFound(err))
	}
	return toAgentMemoryWrite(r), nil
}
