package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// DreamCandidate is a scope the dreamer's scan looks at: a scope of a
// tenant that holds live memories, with its dream state (zero times when
// never consolidated or scanned).
type DreamCandidate struct {
	TenantID           string
	Scope              string
	LastConsolidatedAt time.Time
	LastScanAt         time.Time
}

// DreamCandidates lists up to limit scopes holding live memories, of every
// tenant, in (tenant, scope) order after (afterTenant, afterScope): call it
// again from the last one returned to page on. It is the dreamer's one read
// across tenants.
func (s *Store) DreamCandidates(ctx context.Context, afterTenant, afterScope string, limit int) ([]DreamCandidate, error) {
	rows, err := dbsqlc.New(s.pool).DreamCandidateList(ctx, dbsqlc.DreamCandidateListParams{
		AfterTenant: afterTenant, AfterScope: afterScope, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("store.DreamCandidates: %w", err)
	}
	out := make([]DreamCandidate, len(rows))
	for i, r := range rows {
		out[i] = DreamCandidate{TenantID: r.TenantID, Scope: r.Scope, LastConsolidatedAt: r.LastConsolidatedAt.Time, LastScanAt: r.LastScanAt.Time}
	}
	return out, nil
}

// ClaimDreamScan takes a scope's scan slot at now, unless its sessions were
// counted after scannedAfter; it reports whether it took it.
func (t *Tx) ClaimDreamScan(ctx context.Context, scope string, now, scannedAfter time.Time) (bool, error) {
	n, err := t.q.DreamScopeClaimScan(ctx, dbsqlc.DreamScopeClaimScanParams{
		TenantID: t.tenant, Scope: scope, Now: timestamptz(now), ScannedAfter: timestamptz(scannedAfter),
	})
	if err != nil {
		return false, fmt.Errorf("store.ClaimDreamScan: %w", err)
	}
	return n == 1, nil
}

// CountSessionsTouching counts the sessions whose memory_scope holds every
// key and value of filter ({"user": "u-42"}) and that were updated after
// since (zero: ever), counting no further than atMost.
func (t *Tx) CountSessionsTouching(ctx context.Context, filter map[string]string, since time.Time, atMost int) (int, error) {
	raw, err := json.Marshal(filter)
	if err != nil {
		return 0, fmt.Errorf("store.CountSessionsTouching: %w", err)
	}
	n, err := t.q.SessionCountTouchingScope(ctx, dbsqlc.SessionCountTouchingScopeParams{
		TenantID: t.tenant, ScopeFilter: raw, Since: lowerBound(since), AtMost: int32(atMost),
	})
	if err != nil {
		return 0, fmt.Errorf("store.CountSessionsTouching: %w", err)
	}
	return int(n), nil
}

// lowerBound is a lower bound for "after since": the zero time means no bound.
func lowerBound(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	return timestamptz(t)
}

// DreamScope is a scope's dream state: when it was last consolidated and
// scanned, and who holds its lease until when (LeaseHolder "" when free).
type DreamScope struct {
	Scope              string
	LastConsolidatedAt time.Time
	LastScanAt         time.Time
	LeaseHolder        string
	LeaseDreamID       string
	LeaseTakenAt       time.Time
	LeaseExpiresAt     time.Time
}

func toDreamScope(r dbsqlc.DreamScope) DreamScope {
	return DreamScope{
		Scope: r.Scope, LastConsolidatedAt: r.LastConsolidatedAt.Time, LastScanAt: r.LastScanAt.Time,
		LeaseHolder: r.LeaseHolder, LeaseDreamID: r.LeaseDreamID, LeaseTakenAt: r.LeaseTakenAt.Time, LeaseExpiresAt: r.LeaseExpiresAt.Time,
	}
}

// LockDreamScope returns a scope's dream state locked until the transaction
// ends, creating it when the scope has none.
func (t *Tx) LockDreamScope(ctx context.Context, scope string) (DreamScope, error) {
	r, err := t.q.DreamScopeLock(ctx, dbsqlc.DreamScopeLockParams{TenantID: t.tenant, Scope: scope})
	if err != nil {
		return DreamScope{}, fmt.Errorf("store.LockDreamScope: %w", err)
	}
	return toDreamScope(r), nil
}

// DreamScope reads a scope's dream state; ErrNotFound when it has none.
func (t *Tx) DreamScope(ctx context.Context, scope string) (DreamScope, error) {
	r, err := t.q.DreamScopeGet(ctx, dbsqlc.DreamScopeGetParams{TenantID: t.tenant, Scope: scope})
	if err != nil {
		return DreamScope{}, fmt.Errorf("store.DreamScope: %w", notFound(err))
	}
	return toDreamScope(r), nil
}

// SetDreamLease gives a scope's lease, locked with LockDreamScope, to a
// dream of holder until expires.
func (t *Tx) SetDreamLease(ctx context.Context, scope, holder, dreamID string, takenAt, expires time.Time) error {
	err := t.q.DreamScopeSetLease(ctx, dbsqlc.DreamScopeSetLeaseParams{
		TenantID: t.tenant, Scope: scope, Holder: holder, DreamID: dreamID, TakenAt: timestamptz(takenAt), ExpiresAt: timestamptz(expires),
	})
	if err != nil {
		return fmt.Errorf("store.SetDreamLease: %w", err)
	}
	return nil
}

// RenewDreamLease extends the lease of a dream until expires; ErrNotFound
// when the dream no longer holds it.
func (t *Tx) RenewDreamLease(ctx context.Context, scope, dreamID string, expires time.Time) error {
	n, err := t.q.DreamScopeRenewLease(ctx, dbsqlc.DreamScopeRenewLeaseParams{TenantID: t.tenant, Scope: scope, DreamID: dreamID, ExpiresAt: timestamptz(expires)})
	if err != nil {
		return fmt.Errorf("store.RenewDreamLease: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store.RenewDreamLease %s: %w", dreamID, ErrNotFound)
	}
	return nil
}

// ReleaseDreamLease frees a scope's lease when dreamID holds it; it
// reports whether it did.
func (t *Tx) ReleaseDreamLease(ctx context.Context, scope, dreamID string) (bool, error) {
	n, err := t.q.DreamScopeReleaseLease(ctx, dbsqlc.DreamScopeReleaseLeaseParams{TenantID: t.tenant, Scope: scope, DreamID: dreamID})
	if err != nil {
		return false, fmt.Errorf("store.ReleaseDreamLease: %w", err)
	}
	return n == 1, nil
}

// SetDreamConsolidated records that a scope was consolidated at at.
func (t *Tx) SetDreamConsolidated(ctx context.Context, scope string, at time.Time) error {
	if err := t.q.DreamScopeSetConsolidated(ctx, dbsqlc.DreamScopeSetConsolidatedParams{TenantID: t.tenant, Scope: scope, At: timestamptz(at)}); err != nil {
		return fmt.Errorf("store.SetDreamConsolidated: %w", err)
	}
	return nil
}

// DreamWork is what a dream did: its model calls, the guard's numbers, the
// memories it changed (or proposes to), and why it ended as it did.
type DreamWork struct {
	LLMProvider  string
	LLMModel     string
	Turns        int
	ToolCalls    int
	ToolErrors   int
	InputTokens  int64
	OutputTokens int64
	// The guard: live memories when the run began, how many of them it may
	// delete or rewrite, and how many it did or would have.
	MemoriesLive       int
	ChangesAllowed     int
	ChangesDestructive int
	Written            []string
	Deleted            []string
	// ProposalJSON is the staged changes of a proposal.
	ProposalJSON []byte
	Summary      string
	Error        string
}

// Dream is one consolidation of a scope as stored.
type Dream struct {
	DreamID string
	Scope   string
	// Trigger is scheduled or manual; Status requested, running,
	// completed, failed, killed, proposed, approved or superseded.
	Trigger string
	Status  string
	Holder  string
	// KillRequestedAt is set once a kill was asked for.
	KillRequestedAt time.Time
	DreamWork
	CreatedAt  time.Time
	StartedAt  time.Time
	UpdatingAt time.Time
	FinishedAt time.Time
	ApprovedAt time.Time
}

func toDream(r dbsqlc.Dream) Dream {
	return Dream{
		DreamID: r.DreamID, Scope: r.Scope, Trigger: r.Trigger, Status: r.Status, Holder: r.Holder,
		KillRequestedAt: r.KillRequestedAt.Time,
		DreamWork: DreamWork{
			LLMProvider: r.LlmProvider, LLMModel: r.LlmModel, Turns: int(r.Turns), ToolCalls: int(r.ToolCalls), ToolErrors: int(r.ToolErrors),
			InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
			MemoriesLive: int(r.MemoriesLive), ChangesAllowed: int(r.ChangesAllowed), ChangesDestructive: int(r.ChangesDestructive),
			Written: r.Written, Deleted: r.Deleted, ProposalJSON: r.Proposal, Summary: r.Summary, Error: r.Error,
		},
		CreatedAt: r.CreatedAt.Time, StartedAt: r.StartedAt.Time, UpdatingAt: r.UpdatingAt.Time,
		FinishedAt: r.FinishedAt.Time, ApprovedAt: r.ApprovedAt.Time,
	}
}

// InsertDream records a new dream (DreamID, Scope, Trigger, Status, Holder,
// StartedAt and CreatedAt are taken from d).
func (t *Tx) InsertDream(ctx context.Context, d Dream) error {
	err := t.q.DreamInsert(ctx, dbsqlc.DreamInsertParams{
		TenantID: t.tenant, DreamID: d.DreamID, Scope: d.Scope, Trigger: d.Trigger, Status: d.Status,
		Holder: d.Holder, StartedAt: timestamptz(d.StartedAt), CreatedAt: timestamptz(d.CreatedAt),
	})
	if err != nil {
		return fmt.Errorf("store.InsertDream: %w", err)
	}
	return nil
}

// Dream reads a dream; ErrNotFound when the tenant has none of that id.
func (t *Tx) Dream(ctx context.Context, dreamID string) (Dream, error) {
	r, err := t.q.DreamGet(ctx, dbsqlc.DreamGetParams{TenantID: t.tenant, DreamID: dreamID})
	if err != nil {
		return Dream{}, fmt.Errorf("store.Dream: %w", notFound(err))
	}
	return toDream(r), nil
}

// LockDream reads a dream locked until the transaction ends.
func (t *Tx) LockDream(ctx context.Context, dreamID string) (Dream, error) {
	r, err := t.q.DreamGetForUpdate(ctx, dbsqlc.DreamGetForUpdateParams{TenantID: t.tenant, DreamID: dreamID})
	if err != nil {
		return Dream{}, fmt.Errorf("store.LockDream: %w", notFound(err))
	}
	return toDream(r), nil
}

// Dreams lists a scope's dreams, newest first, at most limit.
func (t *Tx) Dreams(ctx context.Context, scope string, limit int) ([]Dream, error) {
	rows, err := t.q.DreamListByScope(ctx, dbsqlc.DreamListByScopeParams{TenantID: t.tenant, Scope: scope, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store.Dreams: %w", err)
	}
	out := make([]Dream, len(rows))
	for i, r := range rows {
		out[i] = toDream(r)
	}
	return out, nil
}

// StartDream moves a requested dream to running under holder; it reports
// false when the dream was not waiting (started or ended already).
func (t *Tx) StartDream(ctx context.Context, dreamID, holder string, at time.Time) (bool, error) {
	n, err := t.q.DreamStart(ctx, dbsqlc.DreamStartParams{TenantID: t.tenant, DreamID: dreamID, Holder: holder, StartedAt: timestamptz(at)})
	if err != nil {
		return false, fmt.Errorf("store.StartDream: %w", err)
	}
	return n == 1, nil
}

// MarkDreamUpdating records a running dream's first write; it reports
// whether this was the first.
func (t *Tx) MarkDreamUpdating(ctx context.Context, dreamID string, at time.Time) (bool, error) {
	n, err := t.q.DreamMarkUpdating(ctx, dbsqlc.DreamMarkUpdatingParams{TenantID: t.tenant, DreamID: dreamID, At: timestamptz(at)})
	if err != nil {
		return false, fmt.Errorf("store.MarkDreamUpdating: %w", err)
	}
	return n == 1, nil
}

// DreamOutcome is how a dream ended.
type DreamOutcome struct {
	Status string
	DreamWork
	At time.Time
}

// FinishDream ends a requested or running dream with o; ErrNotFound when
// the dream is not (or no longer) requested or running.
func (t *Tx) FinishDream(ctx context.Context, dreamID string, o DreamOutcome) error {
	n, err := t.q.DreamFinish(ctx, dbsqlc.DreamFinishParams{
		TenantID: t.tenant, DreamID: dreamID, Status: o.Status, LlmProvider: o.LLMProvider, LlmModel: o.LLMModel,
		Turns: int32(o.Turns), ToolCalls: int32(o.ToolCalls), ToolErrors: int32(o.ToolErrors),
		InputTokens: o.InputTokens, OutputTokens: o.OutputTokens, MemoriesLive: int32(o.MemoriesLive),
		ChangesAllowed: int32(o.ChangesAllowed), ChangesDestructive: int32(o.ChangesDestructive),
		Written: nonNil(o.Written), Deleted: nonNil(o.Deleted), Proposal: o.ProposalJSON, Summary: o.Summary, Error: o.Error,
		FinishedAt: timestamptz(o.At),
	})
	if err != nil {
		return fmt.Errorf("store.FinishDream: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store.FinishDream %s: not running: %w", dreamID, ErrNotFound)
	}
	return nil
}

// nonNil is s, or an empty slice for nil: a NOT NULL array column takes
// no NULL.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// RequestDreamKill asks a running dream to stop; it reports false when
// the dream is not running.
func (t *Tx) RequestDreamKill(ctx context.Context, dreamID string, at time.Time) (bool, error) {
	n, err := t.q.DreamRequestKill(ctx, dbsqlc.DreamRequestKillParams{TenantID: t.tenant, DreamID: dreamID, At: timestamptz(at)})
	if err != nil {
		return false, fmt.Errorf("store.RequestDreamKill: %w", err)
	}
	return n == 1, nil
}

// SetDreamApproved marks a proposed dream approved; it reports false when
// it was not a proposal (any more).
func (t *Tx) SetDreamApproved(ctx context.Context, dreamID string, at time.Time) (bool, error) {
	n, err := t.q.DreamSetApproved(ctx, dbsqlc.DreamSetApprovedParams{TenantID: t.tenant, DreamID: dreamID, At: timestamptz(at)})
	if err != nil {
		return false, fmt.Errorf("store.SetDreamApproved: %w", err)
	}
	return n == 1, nil
}

// RejectDream ends a proposed dream killed, with reason as its error,
// applying nothing; it reports false when it was not a proposal (any more).
func (t *Tx) RejectDream(ctx context.Context, dreamID, reason string, at time.Time) (bool, error) {
	n, err := t.q.DreamReject(ctx, dbsqlc.DreamRejectParams{TenantID: t.tenant, DreamID: dreamID, Reason: reason, At: timestamptz(at)})
	if err != nil {
		return false, fmt.Errorf("store.RejectDream: %w", err)
	}
	return n == 1, nil
}

// SupersedeDreamProposals marks the scope's proposals other than dreamID's
// superseded and returns their ids.
func (t *Tx) SupersedeDreamProposals(ctx context.Context, scope, dreamID string, at time.Time) ([]string, error) {
	ids, err := t.q.DreamSupersedeProposals(ctx, dbsqlc.DreamSupersedeProposalsParams{TenantID: t.tenant, Scope: scope, DreamID: dreamID, At: timestamptz(at)})
	if err != nil {
		return nil, fmt.Errorf("store.SupersedeDreamProposals: %w", err)
	}
	return ids, nil
}

// MessageHit is one message a transcript search found.
type MessageHit struct {
	SessionID string
	Position  int64
	Role      string
	CreatedAt time.Time
	// Snippet is the text around the match, the matched words between
	// the headline options' StartSel and StopSel.
	Snippet string
}

// SearchMessages runs a full-text search (web-search syntax: words,
// "phrases", or, -word) over the messages of the sessions whose
// memory_scope holds filter, newest first, at most limit hits. options are
// ts_headline's (how long a snippet is, how a match is marked).
func (t *Tx) SearchMessages(ctx context.Context, filter map[string]string, query, options string, limit int) ([]MessageHit, error) {
	raw, err := json.Marshal(filter)
	if err != nil {
		return nil, fmt.Errorf("store.SearchMessages: %w", err)
	}
	rows, err := t.q.MessageSearch(ctx, dbsqlc.MessageSearchParams{
		TenantID: t.tenant, ScopeFilter: raw, Query: query, HeadlineOptions: options, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("store.SearchMessages: %w", err)
	}
	out := make([]MessageHit, len(rows))
	for i, r := range rows {
		out[i] = MessageHit{SessionID: r.SessionID, Position: r.Position, Role: r.Role, CreatedAt: r.CreatedAt.Time, Snippet: r.Snippet}
	}
	return out, nil
}

// SearchTerms returns the parsed form of a search query: "" (or "T") when
// it holds no term a search can use (only stop words or punctuation).
func (t *Tx) SearchTerms(ctx context.Context, query string) (string, error) {
	s, err := t.q.SearchQueryTerms(ctx, query)
	if err != nil {
		return "", fmt.Errorf("store.SearchTerms: %w", err)
	}
	return s, nil
}
