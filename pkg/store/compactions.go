package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// Compaction statuses.
const (
	CompactionRequested = "requested"
	CompactionRunning   = "running"
	CompactionCompleted = "completed"
	CompactionFailed    = "failed"
	CompactionSkipped   = "skipped"
)

// ErrCompactionRunning means another compaction of the session is running.
var ErrCompactionRunning = errors.New("another compaction of this session is running")

// Compaction is one compaction, from request to outcome.
type Compaction struct {
	ID        string
	SessionID string
	// Request is the accountant's request number of an auto compaction (0 for manual).
	Request      int64
	Trigger      string
	Direction    string
	PivotUUID    string
	Instructions string
	Status       string
	LeaseUntil   time.Time
	Method       string
	PreTokens    int64
	PostTokens   int64
	// ThroughPosition is the last message position the compaction saw;
	// KeepFrom the first position it kept verbatim.
	ThroughPosition int64
	KeepFrom        int64
	// Head is the JSON array of the messages the compaction made.
	Head    []byte
	Summary string
	// LLM work: calls made, prompt-too-long retries, model and usage.
	LLMCalls         int
	LLMRetries       int
	LLMModel         string
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	Error            string
	// Retention is the share of what must survive the replaced messages
	// that the compaction kept (pkg/retention), nil when not measured;
	// RetentionDetail its per-category tallies as JSON.
	Retention       *float64
	RetentionDetail json.RawMessage
	CreatedAt       time.Time
	StartedAt       time.Time
	FinishedAt      time.Time
}

func toCompaction(r dbsqlc.Compaction) Compaction {
	c := Compaction{
		ID: r.ID, SessionID: r.SessionID, Trigger: r.Trigger, Direction: r.Direction, PivotUUID: r.PivotUuid,
		Instructions: r.Instructions, Status: r.Status, LeaseUntil: r.LeaseUntil.Time, Method: r.Method,
		PreTokens: r.PreTokens, PostTokens: r.PostTokens, ThroughPosition: r.ThroughPosition, KeepFrom: r.KeepFrom,
		Head: r.Head, Summary: r.Summary, LLMCalls: int(r.LlmCalls), LLMRetries: int(r.LlmRetries), LLMModel: r.LlmModel,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, CacheReadTokens: r.CacheReadTokens,
		CacheWriteTokens: r.CacheWriteTokens, Error: r.Error, CreatedAt: r.CreatedAt.Time,
		StartedAt: r.StartedAt.Time, FinishedAt: r.FinishedAt.Time,
		Retention: r.Retention, RetentionDetail: r.RetentionDetail,
	}
	if r.Request != nil {
		c.Request = *r.Request
	}
	return c
}

// RequestCompaction records a compaction request. An auto request (Request
// > 0) made before returns the row made then.
func (t *Tx) RequestCompaction(ctx context.Context, c Compaction) (Compaction, error) {
	var request *int64
	if c.Request > 0 {
		request = &c.Request
	}
	r, err := t.q.CompactionInsert(ctx, dbsqlc.CompactionInsertParams{
		TenantID: t.tenant, ID: c.ID, SessionID: c.SessionID, Request: request, Trigger: c.Trigger,
		Direction: c.Direction, PivotUuid: c.PivotUUID, Instructions: c.Instructions,
	})
	if err != nil {
		return Compaction{}, fmt.Errorf("store.RequestCompaction: %w", err)
	}
	return toCompaction(r), nil
}

// Compaction reads one compaction.
func (t *Tx) Compaction(ctx context.Context, id string) (Compaction, error) {
	r, err := t.q.CompactionGet(ctx, dbsqlc.CompactionGetParams{TenantID: t.tenant, ID: id})
	if err != nil {
		return Compaction{}, fmt.Errorf("store.Compaction: %w", notFound(err))
	}
	return toCompaction(r), nil
}

// SessionCompaction reads the compaction the session's context starts
// from (its CompactionID): ErrNotFound before its first.
func (t *Tx) SessionCompaction(ctx context.Context, sessionID string) (Compaction, error) {
	r, err := t.q.CompactionOfSession(ctx, dbsqlc.CompactionOfSessionParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return Compaction{}, fmt.Errorf("store.SessionCompaction: %w", notFound(err))
	}
	return toCompaction(r), nil
}

// Compactions lists a session's compactions, oldest first.
func (t *Tx) Compactions(ctx context.Context, sessionID string) ([]Compaction, error) {
	rows, err := t.q.CompactionListBySession(ctx, dbsqlc.CompactionListBySessionParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return nil, fmt.Errorf("store.Compactions: %w", err)
	}
	out := make([]Compaction, len(rows))
	for i, r := range rows {
		out[i] = toCompaction(r)
	}
	return out, nil
}

// StartCompaction takes compaction id to run until leaseUntil. It returns
// ErrNotFound when the compaction is not waiting to run (already done, or
// running under a live lease), and ErrCompactionRunning when another
// compaction of the session holds a live lease.
func (t *Tx) StartCompaction(ctx context.Context, sessionID, id string, leaseUntil time.Time) (Compaction, error) {
	if err := t.q.CompactionExpireStale(ctx, dbsqlc.CompactionExpireStaleParams{TenantID: t.tenant, SessionID: sessionID, ID: id}); err != nil {
		return Compaction{}, fmt.Errorf("store.StartCompaction: %w", err)
	}
	r, err := t.q.CompactionStart(ctx, dbsqlc.CompactionStartParams{TenantID: t.tenant, ID: id, LeaseUntil: timestamptz(leaseUntil)})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return Compaction{}, fmt.Errorf("store.StartCompaction %s: %w", id, ErrCompactionRunning)
	}
	if err != nil {
		return Compaction{}, fmt.Errorf("store.StartCompaction %s: %w", id, notFound(err))
	}
	return toCompaction(r), nil
}

// RenewCompaction extends a running compaction's lease. It returns
// ErrNotFound when the compaction no longer runs under this worker.
func (s *Store) RenewCompaction(ctx context.Context, tenant, id string, leaseUntil time.Time) error {
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		n, err := tx.q.CompactionRenew(ctx, dbsqlc.CompactionRenewParams{TenantID: tenant, ID: id, LeaseUntil: timestamptz(leaseUntil)})
		if err != nil {
			return fmt.Errorf("store.RenewCompaction: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("store.RenewCompaction %s: %w", id, ErrNotFound)
		}
		return nil
	})
}

// CompleteCompaction records a running compaction's result. It returns
// ErrNotFound when the compaction is no longer running.
func (t *Tx) CompleteCompaction(ctx context.Context, c Compaction) error {
	n, err := t.q.CompactionComplete(ctx, dbsqlc.CompactionCompleteParams{
		TenantID: t.tenant, ID: c.ID, Method: c.Method, PreTokens: c.PreTokens, PostTokens: c.PostTokens,
		ThroughPosition: c.ThroughPosition, KeepFrom: c.KeepFrom, Head: c.Head, Summary: c.Summary,
		LlmCalls: int32(c.LLMCalls), LlmRetries: int32(c.LLMRetries), LlmModel: c.LLMModel,
		InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CacheReadTokens: c.CacheReadTokens,
		CacheWriteTokens: c.CacheWriteTokens, Error: c.Error,
		Retention: c.Retention, RetentionDetail: c.RetentionDetail,
	})
	if err != nil {
		return fmt.Errorf("store.CompleteCompaction: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store.CompleteCompaction %s: %w", c.ID, ErrNotFound)
	}
	return nil
}

// EndCompaction ends a compaction that did not complete, as failed or
// skipped, with the reason. Ending one already ended changes nothing.
func (t *Tx) EndCompaction(ctx context.Context, c Compaction) error {
	_, err := t.q.CompactionEnd(ctx, dbsqlc.CompactionEndParams{
		TenantID: t.tenant, ID: c.ID, Status: c.Status, Error: c.Error,
		LlmCalls: int32(c.LLMCalls), LlmRetries: int32(c.LLMRetries), PreTokens: c.PreTokens,
	})
	if err != nil {
		return fmt.Errorf("store.EndCompaction: %w", err)
	}
	return nil
}

// CompactedSession is what a completed compaction changes on its session.
type CompactedSession struct {
	SessionID          string
	CompactionID       string
	KeepFrom           int64
	BaselineTokens     int64
	PendingTokens      int64
	TokenCount         int64
	State              string
	CompactFailures    int
	CompactCircuitOpen bool
	// CompactCircuitUntil is when an open circuit may be tried again.
	CompactCircuitUntil time.Time
	StaleUsageAbove     int64
}

// ApplyCompaction makes a completed compaction the session's context and
// its token baseline, and clears the compaction in flight.
func (t *Tx) ApplyCompaction(ctx context.Context, c CompactedSession) error {
	err := t.q.SessionApplyCompaction(ctx, dbsqlc.SessionApplyCompactionParams{
		TenantID: t.tenant, SessionID: c.SessionID, CompactionID: &c.CompactionID, KeepFrom: c.KeepFrom,
		BaselineTokens: c.BaselineTokens, PendingTokens: c.PendingTokens, TokenCount: c.TokenCount,
		State: c.State, CompactFailures: int32(c.CompactFailures), CompactCircuitOpen: c.CompactCircuitOpen,
		StaleUsageAbove: c.StaleUsageAbove, CompactCircuitUntil: timestamptz(c.CompactCircuitUntil),
	})
	if err != nil {
		return fmt.Errorf("store.ApplyCompaction: %w", err)
	}
	return nil
}

// CompactionEnded clears the session's compaction in flight after a
// compaction that left the context as it was, and records the breaker's state.
func (t *Tx) CompactionEnded(ctx context.Context, sessionID string, failures int, circuitOpen bool) error {
	err := t.q.SessionCompactionEnded(ctx, dbsqlc.SessionCompactionEndedParams{
		TenantID: t.tenant, SessionID: sessionID, CompactFailures: int32(failures), CompactCircuitOpen: circuitOpen,
	})
	if err != nil {
		return fmt.Errorf("store.CompactionEnded: %w", err)
	}
	return nil
}

// MarkCompactionRequested sets the session's compaction in flight.
func (t *Tx) MarkCompactionRequested(ctx context.Context, sessionID string) error {
	if err := t.q.SessionMarkCompactionRequested(ctx, dbsqlc.SessionMarkCompactionRequestedParams{TenantID: t.tenant, SessionID: sessionID}); err != nil {
		return fmt.Errorf("store.MarkCompactionRequested: %w", err)
	}
	return nil
}

// MessagesFrom lists the session's messages from position on, in order.
func (t *Tx) MessagesFrom(ctx context.Context, sessionID string, position int64) ([]Message, error) {
	rows, err := t.q.MessageListFrom(ctx, dbsqlc.MessageListFromParams{TenantID: t.tenant, SessionID: sessionID, FromPosition: position})
	if err != nil {
		return nil, fmt.Errorf("store.MessagesFrom: %w", err)
	}
	out := make([]Message, 0, len(rows))
	for _, r := range rows {
		out = append(out, toMessage(r))
	}
	return out, nil
}

// MessagesPage lists at most limit of a session's messages from position
// on, in order.
func (t *Tx) MessagesPage(ctx context.Context, sessionID string, position int64, limit int32) ([]Message, error) {
	rows, err := t.q.MessagePage(ctx, dbsqlc.MessagePageParams{TenantID: t.tenant, SessionID: sessionID, FromPosition: position, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("store.MessagesPage: %w", err)
	}
	out := make([]Message, len(rows))
	for i, r := range rows {
		out[i] = toMessage(r)
	}
	return out, nil
}

// MessageTokensAfter is the estimate of the session's messages after position.
func (t *Tx) MessageTokensAfter(ctx context.Context, sessionID string, position int64) (int64, error) {
	n, err := t.q.MessageTokensAfter(ctx, dbsqlc.MessageTokensAfterParams{TenantID: t.tenant, SessionID: sessionID, AfterPosition: position})
	if err != nil {
		return 0, fmt.Errorf("store.MessageTokensAfter: %w", err)
	}
	return n, nil
}

// ReleaseCompaction gives a running compaction back after its worker failed,
// so the request's next delivery takes it at once instead of after the lease.
func (s *Store) ReleaseCompaction(ctx context.Context, tenant, id string) error {
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		if err := tx.q.CompactionRelease(ctx, dbsqlc.CompactionReleaseParams{TenantID: tenant, ID: id}); err != nil {
			return fmt.Errorf("store.ReleaseCompaction: %w", err)
		}
		return nil
	})
}

// RequestAutoCompaction marks the session's next automatic compaction in
// flight and returns its request number, with seqs as the turns that asked
// for the latest ones; ok is false when a compaction is in flight already.
func (t *Tx) RequestAutoCompaction(ctx context.Context, sessionID string, seqs []int64) (request int64, ok bool, err error) {
	n, err := t.q.SessionRequestAutoCompaction(ctx, dbsqlc.SessionRequestAutoCompactionParams{
		TenantID: t.tenant, SessionID: sessionID, AutoCompactSeqs: nonNil(seqs),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store.RequestAutoCompaction: %w", err)
	}
	return n, true, nil
}

// UnfinishedCompaction is the session's latest compaction not ended yet;
// ErrNotFound when there is none.
func (t *Tx) UnfinishedCompaction(ctx context.Context, sessionID string) (Compaction, error) {
	r, err := t.q.CompactionUnfinished(ctx, dbsqlc.CompactionUnfinishedParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return Compaction{}, fmt.Errorf("store.UnfinishedCompaction: %w", notFound(err))
	}
	return toCompaction(r), nil
}

// LatestCompaction is the session's latest compaction, whatever its
// status; ErrNotFound when it has none.
func (t *Tx) LatestCompaction(ctx context.Context, sessionID string) (Compaction, error) {
	r, err := t.q.CompactionLatest(ctx, dbsqlc.CompactionLatestParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return Compaction{}, fmt.Errorf("store.LatestCompaction: %w", notFound(err))
	}
	return toCompaction(r), nil
}

// ContextEstimate is the estimate of a session's context as assembled: the
// latest compaction's head (its post tokens) and the messages from its keep
// point on. It counts a context no usage measured (the model changed).
func (t *Tx) ContextEstimate(ctx context.Context, s sessionstate.Session) (int64, error) {
	var head int64
	if s.CompactionID != "" {
		c, err := t.Compaction(ctx, s.CompactionID)
		if err != nil {
			return 0, fmt.Errorf("store.ContextEstimate: %w", err)
		}
		head = c.PostTokens
	}
	n, err := t.MessageTokensAfter(ctx, s.SessionID, s.KeepFrom-1)
	if err != nil {
		return 0, fmt.Errorf("store.ContextEstimate: %w", err)
	}
	return head + n, nil
}

// ContextEstimate is Tx.ContextEstimate in a transaction of its own.
func (s *Store) ContextEstimate(ctx context.Context, tenant string, sess sessionstate.Session) (int64, error) {
	var n int64
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		var err error
		n, err = tx.ContextEstimate(ctx, sess)
		return err
	})
	return n, err
}
