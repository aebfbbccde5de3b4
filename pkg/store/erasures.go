package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// The kinds of erasure.
const (
	ErasureSession = "session"
	ErasureScope   = "scope"
)

// Erasure is the record of one erasure of a tenant's session or memory
// scope (migrations/00035_erasures.sql): written before any row goes, so
// that an erasure cut short is finished later.
type Erasure struct {
	ID     int64
	Kind   string // ErasureSession or ErasureScope
	Target string // the session id, or the scope ("project:repo-x")
	Actor  string
	// Sessions are the Mnemos sessions a session's erasure covers: the
	// session and the proxy's threads of it.
	Sessions []string
	// Deleted counts the rows removed so far, by step (ErasureSteps).
	Deleted     map[string]int64
	RequestedAt time.Time
	FinishedAt  time.Time // zero while unfinished
}

// Finished reports whether every row of the erasure is gone.
func (e Erasure) Finished() bool { return !e.FinishedAt.IsZero() }

// Rows is how many rows the erasure removed or cleared in all.
func (e Erasure) Rows() int64 {
	var n int64
	for _, v := range e.Deleted {
		n += v
	}
	return n
}

func toErasure(r dbsqlc.Erasure) (Erasure, error) {
	e := Erasure{
		ID: r.ID, Kind: r.Kind, Target: r.Target, Actor: r.Actor, Sessions: r.Sessions,
		Deleted: map[string]int64{}, RequestedAt: r.RequestedAt.Time, FinishedAt: r.FinishedAt.Time,
	}
	if err := json.Unmarshal(r.Deleted, &e.Deleted); err != nil {
		return Erasure{}, fmt.Errorf("erasure %d: its counts: %w", r.ID, err)
	}
	return e, nil
}

// StartErasure records the intent to erase target, or returns the
// unfinished erasure of the same target, which the caller then works on too.
func (t *Tx) StartErasure(ctx context.Context, kind, target, actor string) (Erasure, error) {
	r, err := t.q.ErasureStart(ctx, dbsqlc.ErasureStartParams{TenantID: t.tenant, Kind: kind, Target: target, Actor: actor})
	if err != nil {
		return Erasure{}, fmt.Errorf("store.StartErasure: %w", err)
	}
	return toErasure(r)
}

// Erasure reads erasure id; ErrNotFound when the tenant has none such.
func (t *Tx) Erasure(ctx context.Context, id int64) (Erasure, error) {
	r, err := t.q.ErasureGet(ctx, dbsqlc.ErasureGetParams{TenantID: t.tenant, ID: id})
	if err != nil {
		return Erasure{}, fmt.Errorf("store.Erasure: %w", notFound(err))
	}
	return toErasure(r)
}

// TakeErasure marks an unfinished erasure as worked on now, so the sweep
// leaves it alone for a while, and adds sessions to those it covers. It
// returns ErrNotFound when the erasure is finished.
func (t *Tx) TakeErasure(ctx context.Context, id int64, sessions []string) (Erasure, error) {
	r, err := t.q.ErasureTake(ctx, dbsqlc.ErasureTakeParams{TenantID: t.tenant, ID: id, Sessions: sessions})
	if err != nil {
		return Erasure{}, fmt.Errorf("store.TakeErasure: %w", notFound(err))
	}
	return toErasure(r)
}

// FinishErasure marks the erasure finished and writes its audit record in
// the same transaction: action, its target and the rows removed by step,
// never the content. ErrNotFound when another worker finished it first.
func (t *Tx) FinishErasure(ctx context.Context, id int64, action string) (Erasure, error) {
	r, err := t.q.ErasureFinish(ctx, dbsqlc.ErasureFinishParams{TenantID: t.tenant, ID: id})
	if err != nil {
		return Erasure{}, fmt.Errorf("store.FinishErasure: %w", notFound(err))
	}
	e, err := toErasure(r)
	if err != nil {
		return Erasure{}, err
	}
	detail := map[string]any{"erasure": e.ID, "kind": e.Kind, "requested_at": e.RequestedAt, "rows": e.Rows(), "tables": e.Deleted}
	if err := t.Audit(ctx, e.Actor, action, e.Target, detail); err != nil {
		return Erasure{}, fmt.Errorf("store.FinishErasure: the audit record: %w", err)
	}
	return e, nil
}

// SessionErasing reports whether an erasure of the session is unfinished.
func (t *Tx) SessionErasing(ctx context.Context, session string) (bool, error) {
	pending, err := t.q.ErasureSessionPending(ctx, dbsqlc.ErasureSessionPendingParams{TenantID: t.tenant, Target: session})
	if err != nil {
		return false, fmt.Errorf("store.SessionErasing: %w", err)
	}
	return pending, nil
}

// SessionErasing reports whether an erasure of the tenant's session is
// unfinished: one read by key, in one round trip (POST /v1/turns asks it
// for every turn).
func (s *Store) SessionErasing(ctx context.Context, tenant, session string) (bool, error) {
	reads := NewReads(tenant)
	pending := Queue(reads, func(tx *Tx) (bool, error) { return tx.SessionErasing(ctx, session) })
	if err := s.Read(ctx, reads); err != nil {
		return false, fmt.Errorf("store.SessionErasing: %w", err)
	}
	return pending.Get()
}

// SessionThreadIDs lists the Mnemos sessions the proxy keeps as threads of
// the client's session.
func (t *Tx) SessionThreadIDs(ctx context.Context, session string) ([]string, error) {
	ids, err := t.q.EraseThreadsOf(ctx, dbsqlc.EraseThreadsOfParams{TenantID: t.tenant, SessionID: session})
	if err != nil {
		return nil, fmt.Errorf("store.SessionThreadIDs: %w", err)
	}
	return ids, nil
}

// ErasureRef names an unfinished erasure of a tenant.
type ErasureRef struct {
	TenantID string
	ID       int64
}

// UnfinishedErasures lists up to limit unfinished erasures of every tenant
// that no worker took up since before, oldest first: the sweep's read
// across tenants, which then works on each in its tenant's transactions.
func (s *Store) UnfinishedErasures(ctx context.Context, before time.Time, limit int) ([]ErasureRef, error) {
	rows, err := dbsqlc.New(s.pool).ErasureUnfinished(ctx, dbsqlc.ErasureUnfinishedParams{Before: timestamptz(before), MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store.UnfinishedErasures: %w", err)
	}
	out := make([]ErasureRef, len(rows))
	for i, r := range rows {
		out[i] = ErasureRef{TenantID: r.TenantID, ID: r.ID}
	}
	return out, nil
}

// ErasureTarget is what an erasure's batches remove: a session erasure's
// Sessions, or a scope erasure's Scope with ScopeFilter, the scope as a
// session's memory_scope names it ({"project": "repo-x"}).
type ErasureTarget struct {
	Sessions    []string
	Scope       string
	ScopeFilter []byte
}

// erasureStep removes (or clears) at most max rows of one table.
type erasureStep struct {
	name string
	run  func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error)
}

// sessionSteps are a session's erasure, table by table, children before
// the rows they refer to, so that no cascade removes rows uncounted. A
// name with a suffix after ':' clears the session from rows that belong to
// something else rather than removing them: a memory's revisions keep the
// memory (its scope's) and forget the session and its turns.
var sessionSteps = []erasureStep{
	{"recall_prefetches", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionRecallPrefetches(ctx, dbsqlc.EraseSessionRecallPrefetchesParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"recall_surfaced", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionRecallSurfaced(ctx, dbsqlc.EraseSessionRecallSurfacedParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"recall_sessions", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionRecallSessions(ctx, dbsqlc.EraseSessionRecallSessionsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"content_replacements", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionContentReplacements(ctx, dbsqlc.EraseSessionContentReplacementsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"tool_results", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionToolResults(ctx, dbsqlc.EraseSessionToolResultsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"messages", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionMessages(ctx, dbsqlc.EraseSessionMessagesParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"turns", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionTurns(ctx, dbsqlc.EraseSessionTurnsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"compactions", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionCompactions(ctx, dbsqlc.EraseSessionCompactionsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"session_notes", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionSessionNotes(ctx, dbsqlc.EraseSessionSessionNotesParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"context_snapshots", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionContextSnapshots(ctx, dbsqlc.EraseSessionContextSnapshotsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"memory_sections", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionMemorySections(ctx, dbsqlc.EraseSessionMemorySectionsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"agent_memory_writes", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionAgentMemoryWrites(ctx, dbsqlc.EraseSessionAgentMemoryWritesParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"extractor_cursors", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionExtractorCursors(ctx, dbsqlc.EraseSessionExtractorCursorsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"active_sessions", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionActiveSessions(ctx, dbsqlc.EraseSessionActiveSessionsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"agent_request_pieces", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionAgentRequestPieces(ctx, dbsqlc.EraseSessionAgentRequestPiecesParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"agent_requests", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionAgentRequests(ctx, dbsqlc.EraseSessionAgentRequestsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"outbox", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionOutbox(ctx, dbsqlc.EraseSessionOutboxParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"memory_revisions:detached", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionMemoryRevisions(ctx, dbsqlc.EraseSessionMemoryRevisionsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"proxy_paths", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionProxyPaths(ctx, dbsqlc.EraseSessionProxyPathsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"proxy_threads", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionProxyThreads(ctx, dbsqlc.EraseSessionProxyThreadsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
	{"sessions", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseSessionSessions(ctx, dbsqlc.EraseSessionSessionsParams{TenantID: tenant, Sessions: tg.Sessions, MaxRows: max})
	}},
}

// scopeSteps are a scope's erasure, table by table. A prefetch's reminders
// beside a user message are cleared when a memory of the scope was among
// them (before the record of what was surfaced, which ties them to the
// scope, goes); a session's rendered memory section is removed and
// rendered again without the scope's memories.
var scopeSteps = []erasureStep{
	{"recall_prefetches:cleared", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseScopeRecallPrefetches(ctx, dbsqlc.EraseScopeRecallPrefetchesParams{TenantID: tenant, Scope: tg.Scope, MaxRows: max})
	}},
	{"recall_surfaced", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseScopeRecallSurfaced(ctx, dbsqlc.EraseScopeRecallSurfacedParams{TenantID: tenant, Scope: tg.Scope, MaxRows: max})
	}},
	{"memory_sections", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseScopeMemorySections(ctx, dbsqlc.EraseScopeMemorySectionsParams{TenantID: tenant, ScopeFilter: tg.ScopeFilter, MaxRows: max})
	}},
	{"memory_revisions", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseScopeMemoryRevisions(ctx, dbsqlc.EraseScopeMemoryRevisionsParams{TenantID: tenant, Scope: tg.Scope, MaxRows: max})
	}},
	{"memories", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseScopeMemories(ctx, dbsqlc.EraseScopeMemoriesParams{TenantID: tenant, Scope: tg.Scope, MaxRows: max})
	}},
	{"memory_indexes", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseScopeMemoryIndexes(ctx, dbsqlc.EraseScopeMemoryIndexesParams{TenantID: tenant, Scope: tg.Scope, MaxRows: max})
	}},
	{"dreams", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseScopeDreams(ctx, dbsqlc.EraseScopeDreamsParams{TenantID: tenant, Scope: tg.Scope, MaxRows: max})
	}},
	{"dream_scopes", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseScopeDreamScopes(ctx, dbsqlc.EraseScopeDreamScopesParams{TenantID: tenant, Scope: tg.Scope, MaxRows: max})
	}},
	{"run_leases", func(ctx context.Context, q *dbsqlc.Queries, tenant string, tg ErasureTarget, max int32) (int64, error) {
		return q.EraseScopeRunLeases(ctx, dbsqlc.EraseScopeRunLeasesParams{TenantID: tenant, Scope: tg.Scope, MaxRows: max})
	}},
}

// stepsOf are the steps of an erasure of kind.
func stepsOf(kind string) []erasureStep {
	if kind == ErasureScope {
		return scopeSteps
	}
	return sessionSteps
}

// ErasureSteps names the steps of an erasure of kind, in order; the
// erasure's counts are by these names.
func ErasureSteps(kind string) []string {
	steps := stepsOf(kind)
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.name
	}
	return out
}

// EraseBatch runs one batch of step of the erasure id of kind: it removes
// at most max rows of target and adds how many to the erasure's counts, in
// the same transaction.
func (t *Tx) EraseBatch(ctx context.Context, id int64, kind, step string, target ErasureTarget, max int) (int64, error) {
	for _, s := range stepsOf(kind) {
		if s.name != step {
			continue
		}
		n, err := s.run(ctx, t.q, t.tenant, target, int32(max))
		if err != nil {
			return 0, fmt.Errorf("store.EraseBatch: %s: %w", step, err)
		}
		return n, t.countErased(ctx, id, step, n)
	}
	return 0, fmt.Errorf("store.EraseBatch: no step %q of a %s erasure", step, kind)
}

func (t *Tx) countErased(ctx context.Context, id int64, step string, n int64) error {
	if n == 0 {
		return nil
	}
	if err := t.q.ErasureCount(ctx, dbsqlc.ErasureCountParams{TenantID: t.tenant, ID: id, Tbl: step, Rows: n}); err != nil {
		return fmt.Errorf("store: counting erased rows: %w", err)
	}
	return nil
}
