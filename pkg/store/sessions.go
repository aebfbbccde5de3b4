package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// toSession converts a session's row to the domain's Session.
func toSession(r dbsqlc.Session) (sessionstate.Session, error) {
	s := sessionstate.Session{
		TenantID:            r.TenantID,
		SessionID:           r.SessionID,
		AgentID:             r.AgentID,
		Model:               r.Model,
		ContextWindow:       r.ContextWindow,
		MaxOutputTokens:     r.MaxOutputTokens,
		AppliedSeq:          r.AppliedSeq,
		WaitingTurns:        r.WaitingTurns,
		MessageCount:        r.MessageCount,
		MessageBytes:        r.MessageBytes,
		ProxySeq:            r.ProxySeq,
		ProxyMessages:       r.ProxyMessages,
		BaselineTokens:      r.BaselineTokens,
		HasUsage:            r.HasUsage,
		PendingTokens:       r.PendingTokens,
		EstimateFactor:      r.EstimateFactor,
		DenseFactor:         r.DenseFactor,
		PendingDense:        r.PendingDense,
		PrefixTokens:        r.PrefixTokens,
		PrefixHash:          r.PrefixHash,
		TokenCount:          r.TokenCount,
		State:               r.State,
		CompactionInFlight:  r.CompactionInFlight,
		CompactRequests:     r.CompactRequests,
		AutoCompactSeqs:     r.AutoCompactSeqs,
		ThrashHeld:          r.ThrashHeld,
		Pins:                r.Pins,
		AutoCompactEnabled:  r.AutoCompactEnabled,
		ToolCallsTotal:      r.ToolCallsTotal,
		RejectedTurns:       r.RejectedTurns,
		LastResponseAt:      r.LastResponseAt.Time,
		CreatedAt:           r.CreatedAt.Time,
		UpdatedAt:           r.UpdatedAt.Time,
		KeepFrom:            r.KeepFrom,
		CompactFailures:     int(r.CompactFailures),
		CompactCircuitOpen:  r.CompactCircuitOpen,
		CompactCircuitUntil: r.CompactCircuitUntil.Time,
		StaleUsageAbove:     r.StaleUsageAbove,
		ContextEpoch:        r.ContextEpoch,
		SkippedSeqs:         r.SkippedSeqs,
		LastSkippedFrom:     r.LastSkippedFrom,
		LastSkippedTo:       r.LastSkippedTo,
	}
	if r.CompactionID != nil {
		s.CompactionID = *r.CompactionID
	}
	if len(r.MemoryScope) > 0 {
		if err := json.Unmarshal(r.MemoryScope, &s.MemoryScope); err != nil {
			return sessionstate.Session{}, fmt.Errorf("session %s: memory_scope: %w", r.SessionID, err)
		}
	}
	return s, nil
}

// LockSession returns the session row locked for this transaction, creating
// it first when the session is new. Every change to a session's accounting
// happens under this lock, so one session's events apply one at a time.
func (t *Tx) LockSession(ctx context.Context, sessionID, agentID string) (sessionstate.Session, error) {
	r, err := t.q.SessionLock(ctx, dbsqlc.SessionLockParams{TenantID: t.tenant, SessionID: sessionID, AgentID: agentID})
	if err != nil {
		return sessionstate.Session{}, fmt.Errorf("store.LockSession: %w", lockError(t.tenant, err))
	}
	return toSession(r)
}

// ErrSessionBusy is returned by LockSessionWithin and LockFreeSessions when
// another transaction held a lock for longer than the wait.
var ErrSessionBusy = errors.New("session busy")

// LockSessionWithin is LockSession, waiting at most wait for a lock another
// transaction holds; past that it returns ErrSessionBusy and the caller's
// transaction is over (roll it back and try later). A caller that would
// otherwise queue behind a long transaction keeps neither a connection nor
// the queue waiting.
func (t *Tx) LockSessionWithin(ctx context.Context, sessionID, agentID string, wait time.Duration) (sessionstate.Session, error) {
	r, err := t.q.SessionLockWithin(ctx, dbsqlc.SessionLockWithinParams{
		TenantID: t.tenant, SessionID: sessionID, AgentID: agentID, WaitMs: int32(max(wait.Milliseconds(), 1)),
	})
	if err != nil {
		return sessionstate.Session{}, fmt.Errorf("store.LockSessionWithin %s: %w", sessionID, lockError(t.tenant, err))
	}
	return toSession(r)
}

// LockFreeSessions is LockSession for a batch of sessions, in one
// statement: it creates those of ids that do not exist yet and creates
// says it may (agents and creates are parallel to ids: a new session's
// agent, and whether to create it) and locks, in key order, the others no
// other transaction holds, and returns them all by id. A session another
// transaction holds, or not there and not to be created, is left out, for
// its caller to apply on its own. Run it in InTxWaiting: creating a
// session another transaction is creating waits for that one.
func (t *Tx) LockFreeSessions(ctx context.Context, ids, agents []string, creates []bool) (map[string]sessionstate.Session, error) {
	rows, err := t.q.SessionsLockFree(ctx, dbsqlc.SessionsLockFreeParams{TenantID: t.tenant, SessionIds: ids, AgentIds: agents, Creates: creates})
	if err != nil {
		return nil, fmt.Errorf("store.LockFreeSessions: %w", lockError(t.tenant, err))
	}
	out := make(map[string]sessionstate.Session, len(rows))
	for _, r := range rows {
		s, err := toSession(dbsqlc.Session(r))
		if err != nil {
			return nil, fmt.Errorf("store.LockFreeSessions: %w", err)
		}
		out[s.SessionID] = s
	}
	return out, nil
}

// lockError names what a statement that locks a tenant's rows failed on:
// the tenant does not exist (ErrUnknownTenant), or the transaction's lock
// wait ran out (ErrSessionBusy).
func lockError(tenant string, err error) error {
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "23503": // foreign key: no such tenant
		return fmt.Errorf("tenant %q: %w", tenant, ErrUnknownTenant)
	case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_not_available: the wait ran out
		return fmt.Errorf("%w: %w", ErrSessionBusy, err)
	}
	return err
}

// SessionProgress reads one session's progress (one row by its key), or
// ErrNotFound for a session that does not exist yet.
func (s *Store) SessionProgress(ctx context.Context, tenant, sessionID string) (sessionstate.Progress, error) {
	var out sessionstate.Progress
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		r, err := tx.q.SessionProgress(ctx, dbsqlc.SessionProgressParams{TenantID: tenant, SessionID: sessionID})
		if err != nil {
			return fmt.Errorf("store.SessionProgress: %w", notFound(err))
		}
		out = sessionstate.Progress{AppliedSeq: r.AppliedSeq, MessageCount: r.MessageCount}
		return nil
	})
	return out, err
}

// SaveSessions writes the accounting fields of sessions locked by
// LockSession or LockFreeSessions, in one statement; each session appears
// once.
func (t *Tx) SaveSessions(ctx context.Context, ss ...sessionstate.Session) error {
	if len(ss) == 0 {
		return nil
	}
	p := dbsqlc.SessionUpdateAccountingParams{TenantID: t.tenant}
	for _, s := range ss {
		if err := appendSession(&p, s); err != nil {
			return fmt.Errorf("store.SaveSessions: %w", err)
		}
	}
	if err := t.q.SessionUpdateAccounting(ctx, p); err != nil {
		return fmt.Errorf("store.SaveSessions: %w", err)
	}
	return nil
}

// appendSession lays the accounting fields of the domain's Session out as
// one more element of each column's array of the statement SaveSessions
// sends.
func appendSession(p *dbsqlc.SessionUpdateAccountingParams, s sessionstate.Session) error {
	scope, err := scopeJSON(s.MemoryScope)
	if err != nil {
		return fmt.Errorf("session %s: memory_scope: %w", s.SessionID, err)
	}
	p.SessionIds = append(p.SessionIds, s.SessionID)
	p.AgentIds = append(p.AgentIds, s.AgentID)
	p.Models = append(p.Models, s.Model)
	p.ContextWindows = append(p.ContextWindows, s.ContextWindow)
	p.MaxOutputTokens = append(p.MaxOutputTokens, s.MaxOutputTokens)
	p.MemoryScopes = append(p.MemoryScopes, string(scope))
	p.AppliedSeqs = append(p.AppliedSeqs, s.AppliedSeq)
	p.WaitingTurns = append(p.WaitingTurns, s.WaitingTurns)
	p.MessageCounts = append(p.MessageCounts, s.MessageCount)
	p.MessageBytes = append(p.MessageBytes, s.MessageBytes)
	p.BaselineTokens = append(p.BaselineTokens, s.BaselineTokens)
	p.HasUsages = append(p.HasUsages, s.HasUsage)
	p.PendingTokens = append(p.PendingTokens, s.PendingTokens)
	p.EstimateFactors = append(p.EstimateFactors, s.EstimateFactor)
	p.DenseFactors = append(p.DenseFactors, s.DenseFactor)
	p.PendingDenses = append(p.PendingDenses, s.PendingDense)
	p.PrefixTokens = append(p.PrefixTokens, s.PrefixTokens)
	p.PrefixHashes = append(p.PrefixHashes, s.PrefixHash)
	p.TokenCounts = append(p.TokenCounts, s.TokenCount)
	p.States = append(p.States, s.State)
	p.CompactionsInFlight = append(p.CompactionsInFlight, s.CompactionInFlight)
	p.CompactRequests = append(p.CompactRequests, s.CompactRequests)
	p.AutoCompactSeqs = append(p.AutoCompactSeqs, int64ArrayLiteral(s.AutoCompactSeqs))
	p.ThrashHelds = append(p.ThrashHelds, s.ThrashHeld)
	p.ToolCallsTotals = append(p.ToolCallsTotals, s.ToolCallsTotal)
	p.RejectedTurns = append(p.RejectedTurns, s.RejectedTurns)
	p.SkippedSeqs = append(p.SkippedSeqs, s.SkippedSeqs)
	p.LastSkippedFroms = append(p.LastSkippedFroms, s.LastSkippedFrom)
	p.LastSkippedTos = append(p.LastSkippedTos, s.LastSkippedTo)
	p.StaleUsageAboves = append(p.StaleUsageAboves, s.StaleUsageAbove)
	p.LastResponseAts = append(p.LastResponseAts, timestamptz(s.LastResponseAt))
	return nil
}

// scopeJSON is a session's memory scope as its column holds it: a JSON
// object, {} for none.
func scopeJSON(scope map[string]string) ([]byte, error) {
	if scope == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(scope)
}

// int64ArrayLiteral is seqs as a Postgres array literal: {3,9}.
func int64ArrayLiteral(seqs []int64) string {
	b := append(make([]byte, 0, 2+len(seqs)*4), '{')
	for i, v := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return string(append(b, '}'))
}

// Session reads one session.
func (t *Tx) Session(ctx context.Context, sessionID string) (sessionstate.Session, error) {
	r, err := t.q.SessionGet(ctx, dbsqlc.SessionGetParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return sessionstate.Session{}, fmt.Errorf("store.Session: %w", notFound(err))
	}
	return toSession(r)
}

// GetSession reads one session of tenant.
func (s *Store) GetSession(ctx context.Context, tenant, sessionID string) (sessionstate.Session, error) {
	var out sessionstate.Session
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		var err error
		out, err = tx.Session(ctx, sessionID)
		return err
	})
	return out, err
}

// Turn statuses.
const (
	TurnPending  = "pending"
	TurnApplied  = "applied"
	TurnRejected = "rejected"
	TurnSkipped  = "skipped"
)

// Turn is a received turn event's bookkeeping row.
type Turn struct {
	SessionID  string
	EventID    string
	Seq        int64
	Status     string
	Reason     string
	Payload    []byte
	TokenCount int64
	State      string
	ReceivedAt time.Time
}

func toTurn(r dbsqlc.Turn) Turn {
	t := Turn{
		SessionID:  r.SessionID,
		EventID:    r.EventID,
		Seq:        r.Seq,
		Status:     r.Status,
		Reason:     r.Reason,
		Payload:    r.Payload,
		ReceivedAt: r.ReceivedAt.Time,
	}
	if r.TokenCount != nil {
		t.TokenCount = *r.TokenCount
	}
	if r.State != nil {
		t.State = *r.State
	}
	return t
}

// InsertTurn records a received event. It reports false when the event id
// was recorded before; the row already there is returned in that case.
func (t *Tx) InsertTurn(ctx context.Context, in Turn) (bool, Turn, error) {
	_, err := t.q.TurnInsert(ctx, dbsqlc.TurnInsertParams{
		TenantID:  t.tenant,
		SessionID: in.SessionID,
		EventID:   in.EventID,
		Seq:       in.Seq,
		Status:    in.Status,
		Payload:   in.Payload,
	})
	if err == nil {
		return true, in, nil
	}
	if err = notFound(err); !errors.Is(err, ErrNotFound) {
		return false, Turn{}, fmt.Errorf("store.InsertTurn: %w", err)
	}
	// Nothing inserted: the event id, or the session's seq, is taken.
	prev, err := t.q.TurnGet(ctx, dbsqlc.TurnGetParams{TenantID: t.tenant, EventID: in.EventID})
	if err == nil {
		return false, toTurn(prev), nil
	}
	if err = notFound(err); !errors.Is(err, ErrNotFound) {
		return false, Turn{}, fmt.Errorf("store.InsertTurn: %w", err)
	}
	bySeq, err := t.q.TurnGetBySeq(ctx, dbsqlc.TurnGetBySeqParams{TenantID: t.tenant, SessionID: in.SessionID, Seq: in.Seq})
	if err != nil {
		return false, Turn{}, fmt.Errorf("store.InsertTurn: %w", notFound(err))
	}
	return false, toTurn(bySeq), nil
}

// TurnBySeq returns the row holding a session's seq, or ErrNotFound.
func (t *Tx) TurnBySeq(ctx context.Context, sessionID string, seq int64) (Turn, error) {
	r, err := t.q.TurnGetBySeq(ctx, dbsqlc.TurnGetBySeqParams{TenantID: t.tenant, SessionID: sessionID, Seq: seq})
	if err != nil {
		return Turn{}, fmt.Errorf("store.TurnBySeq: %w", notFound(err))
	}
	return toTurn(r), nil
}

// NextPendingTurn returns the waiting event with the lowest seq, or ErrNotFound.
func (t *Tx) NextPendingTurn(ctx context.Context, sessionID string) (Turn, error) {
	r, err := t.q.TurnNextPending(ctx, dbsqlc.TurnNextPendingParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return Turn{}, notFound(err)
	}
	return toTurn(r), nil
}

// RecordAppliedTurn records an event that applied (or was rejected) on arrival.
func (t *Tx) RecordAppliedTurn(ctx context.Context, sessionID, eventID string, seq int64, status, reason string, count int64, state string) error {
	err := t.q.TurnRecordApplied(ctx, dbsqlc.TurnRecordAppliedParams{
		TenantID: t.tenant, SessionID: sessionID, EventID: eventID, Seq: seq, Status: status, Reason: reason,
		TokenCount: &count, State: &state,
	})
	if err != nil {
		return fmt.Errorf("store.RecordAppliedTurn: %w", err)
	}
	return nil
}

// AppliedTurn is an event applied on arrival, for RecordAppliedTurns.
type AppliedTurn struct {
	SessionID, EventID string
	Seq, TokenCount    int64
	State              string
}

// RecordAppliedTurns is RecordAppliedTurn with status applied for many
// events in one statement.
func (t *Tx) RecordAppliedTurns(ctx context.Context, turns []AppliedTurn) error {
	if len(turns) == 0 {
		return nil
	}
	p := dbsqlc.TurnRecordAppliedManyParams{TenantID: t.tenant, Status: TurnApplied}
	for _, tr := range turns {
		p.SessionIds = append(p.SessionIds, tr.SessionID)
		p.EventIds = append(p.EventIds, tr.EventID)
		p.Seqs = append(p.Seqs, tr.Seq)
		p.TokenCounts = append(p.TokenCounts, tr.TokenCount)
		p.States = append(p.States, tr.State)
	}
	if err := t.q.TurnRecordAppliedMany(ctx, p); err != nil {
		return fmt.Errorf("store.RecordAppliedTurns: %w", err)
	}
	return nil
}

// FinishTurn records the outcome of applying an event and drops its payload.
func (t *Tx) FinishTurn(ctx context.Context, eventID, status, reason string, count int64, state string) error {
	err := t.q.TurnFinish(ctx, dbsqlc.TurnFinishParams{
		TenantID: t.tenant, EventID: eventID, Status: status, Reason: reason,
		TokenCount: &count, State: &state,
	})
	if err != nil {
		return fmt.Errorf("store.FinishTurn: %w", err)
	}
	return nil
}

// StalledSession names a session whose oldest waiting event is older than a cut-off.
type StalledSession struct {
	TenantID  string
	SessionID string
}

// StalledSessions lists sessions that have waited for a missing seq since
// before, at most sweepBatch of them. It reads across tenants, through the
// owner's function, and is meant for the accountant's gap sweeper, which
// handles each session in a transaction of its tenant.
func (s *Store) StalledSessions(ctx context.Context, before time.Time) ([]StalledSession, error) {
	rows, err := dbsqlc.New(s.pool).TurnStalledSessions(ctx, dbsqlc.TurnStalledSessionsParams{Before: timestamptz(before), MaxRows: sweepBatch})
	if err != nil {
		return nil, fmt.Errorf("store.StalledSessions: %w", err)
	}
	out := make([]StalledSession, 0, len(rows))
	for _, r := range rows {
		out = append(out, StalledSession{TenantID: r.TenantID, SessionID: r.SessionID})
	}
	return out, nil
}

func timestamptz(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

// SessionsByState counts sessions per threshold state, across tenants. It
// reads the whole table; the accountant calls it once a period for the
// sessions gauge.
func (s *Store) SessionsByState(ctx context.Context) (map[string]int64, error) {
	rows, err := dbsqlc.New(s.pool).SessionCountByState(ctx)
	if err != nil {
		return nil, fmt.Errorf("store.SessionsByState: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.State] = r.Sessions
	}
	return out, nil
}

// SetAutoCompact turns the session's automatic compaction on or off; it
// returns ErrNotFound for a session that does not exist.
func (t *Tx) SetAutoCompact(ctx context.Context, sessionID string, enabled bool) error {
	n, err := t.q.SessionSetAutoCompact(ctx, dbsqlc.SessionSetAutoCompactParams{TenantID: t.tenant, SessionID: sessionID, Enabled: enabled})
	if err != nil {
		return fmt.Errorf("store.SetAutoCompact: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store.SetAutoCompact %s: %w", sessionID, ErrNotFound)
	}
	return nil
}

// SetPins replaces the texts pinned to the session; it returns ErrNotFound
// for a session that does not exist.
func (t *Tx) SetPins(ctx context.Context, sessionID string, pins []string) error {
	n, err := t.q.SessionSetPins(ctx, dbsqlc.SessionSetPinsParams{TenantID: t.tenant, SessionID: sessionID, Pins: nonNil(pins)})
	if err != nil {
		return fmt.Errorf("store.SetPins: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store.SetPins %s: %w", sessionID, ErrNotFound)
	}
	return nil
}

// RecordProxyRound records a round the Messages API proxy published in the
// session: its seq, and the conversation's messages published through it.
func (t *Tx) RecordProxyRound(ctx context.Context, sessionID string, seq, messages int64) error {
	err := t.q.SessionProxyRound(ctx, dbsqlc.SessionProxyRoundParams{
		TenantID: t.tenant, SessionID: sessionID, ProxySeq: seq, ProxyMessages: messages,
	})
	if err != nil {
		return fmt.Errorf("store.RecordProxyRound: %w", err)
	}
	return nil
}

// EstimatePrior is the tenant's prior for a new session's calibration
// factors (prose, dense): the mean of those learnt among its 200 latest
// sessions, 0 for a kind none of them learnt. It reads at most 200 rows,
// however many sessions the tenant holds.
func (t *Tx) EstimatePrior(ctx context.Context) (prose, dense float64, err error) {
	r, err := t.q.SessionEstimatePrior(ctx, t.tenant)
	if err != nil {
		return 0, 0, fmt.Errorf("store.EstimatePrior: %w", err)
	}
	return r.Prose, r.Dense, nil
}

// EstimatePrior is Tx.EstimatePrior in a transaction of its own.
func (s *Store) EstimatePrior(ctx context.Context, tenant string) (prose, dense float64, err error) {
	err = s.InTx(ctx, tenant, func(tx *Tx) error {
		prose, dense, err = tx.EstimatePrior(ctx)
		return err
	})
	return prose, dense, err
}

// TurnPoint is an applied turn and the count it left the session at.
type TurnPoint struct {
	Seq        int64
	EventID    string
	TokenCount int64
	State      string
	AppliedAt  time.Time
}

// TurnTimeline returns a session's applied turns in seq order, at most
// limit of them: one point per turn of the console's token chart.
func (t *Tx) TurnTimeline(ctx context.Context, sessionID string, limit int) ([]TurnPoint, error) {
	return t.AppliedTurnsAfter(ctx, sessionID, 0, limit)
}

// AppliedTurnsAfter returns at most limit of a session's applied turns
// after seq afterSeq, in seq order: its history a page at a time.
func (t *Tx) AppliedTurnsAfter(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]TurnPoint, error) {
	rows, err := t.q.TurnAppliedAfter(ctx, dbsqlc.TurnAppliedAfterParams{TenantID: t.tenant, SessionID: sessionID, AfterSeq: afterSeq, MaxRows: int32(max(limit, 0))})
	if err != nil {
		return nil, fmt.Errorf("store.AppliedTurnsAfter: %w", err)
	}
	out := make([]TurnPoint, len(rows))
	for i, r := range rows {
		out[i] = toTurnPoint(r)
	}
	return out, nil
}

func toTurnPoint(r dbsqlc.TurnAppliedAfterRow) TurnPoint {
	p := TurnPoint{Seq: r.Seq, EventID: r.EventID, AppliedAt: r.AppliedAt.Time}
	if r.TokenCount != nil {
		p.TokenCount = *r.TokenCount
	}
	if r.State != nil {
		p.State = *r.State
	}
	return p
}
