package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// ExtractorCursor is how far long-term memory extraction has looked at a
// session, and what is owed to it.
type ExtractorCursor struct {
	SessionID string
	// Scope is the memory scope the session's extractions write to.
	Scope string
	// Position: the messages before it were considered (or skipped); Seq
	// is the last turn considered.
	Position int64
	Seq      int64
	// SeenSeq is the latest eligible turn looked at.
	SeenSeq int64
	// DueSeq, when above Seq, is the turn a run is owed through, requested
	// by the turn event DueEventID.
	DueSeq     int64
	DueEventID string
	// AgentWrites is how many of the main agent's memory writes are
	// accounted for (see AgentMemoryWrite.Writes).
	AgentWrites int64
	// Runs, SavedRuns, SkippedTurns and FailedRuns count what happened;
	// LastError says why the latest run failed.
	Runs, SavedRuns, SkippedTurns, FailedRuns int64
	LastError                                 string
	LastRunAt                                 time.Time
	UpdatedAt                                 time.Time
}

// Due reports whether a run is owed to the session.
func (c ExtractorCursor) Due() bool { return c.DueSeq > c.Seq }

func toExtractorCursor(r dbsqlc.ExtractorCursor) ExtractorCursor {
	return ExtractorCursor{
		SessionID: r.SessionID, Scope: r.Scope, Position: r.Position, Seq: r.Seq, SeenSeq: r.SeenSeq,
		DueSeq: r.DueSeq, DueEventID: r.DueEventID, AgentWrites: r.AgentWrites,
		Runs: r.Runs, SavedRuns: r.SavedRuns, SkippedTurns: r.SkippedTurns, FailedRuns: r.FailedRuns,
		LastError: r.LastError, LastRunAt: r.LastRunAt.Time, UpdatedAt: r.UpdatedAt.Time,
	}
}

// LockExtractorCursor returns the session's cursor locked for this
// transaction, making it first when the session has none. The session
// must exist.
func (t *Tx) LockExtractorCursor(ctx context.Context, sessionID string) (ExtractorCursor, error) {
	if err := t.q.ExtractorCursorEnsure(ctx, dbsqlc.ExtractorCursorEnsureParams{TenantID: t.tenant, SessionID: sessionID}); err != nil {
		return ExtractorCursor{}, fmt.Errorf("store.LockExtractorCursor: %w", err)
	}
	r, err := t.q.ExtractorCursorGetForUpdate(ctx, dbsqlc.ExtractorCursorGetForUpdateParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return ExtractorCursor{}, fmt.Errorf("store.LockExtractorCursor: %w", notFound(err))
	}
	return toExtractorCursor(r), nil
}

// ExtractorCursor reads the session's cursor; ErrNotFound before its first
// eligible turn.
func (t *Tx) ExtractorCursor(ctx context.Context, sessionID string) (ExtractorCursor, error) {
	r, err := t.q.ExtractorCursorGet(ctx, dbsqlc.ExtractorCursorGetParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return ExtractorCursor{}, fmt.Errorf("store.ExtractorCursor: %w", notFound(err))
	}
	return toExtractorCursor(r), nil
}

// ExtractorCreatedFor names the memories of scope the extractor created
// from session's turn eventID (among the revisions' source turns), each once.
func (t *Tx) ExtractorCreatedFor(ctx context.Context, scope, sessionID, eventID string) ([]string, error) {
	rows, err := t.q.ExtractorCreatedFor(ctx, dbsqlc.ExtractorCreatedForParams{TenantID: t.tenant, SessionID: sessionID, EventID: eventID})
	if err != nil {
		return nil, fmt.Errorf("store.ExtractorCreatedFor: %w", err)
	}
	var names []string
	for _, r := range rows {
		if r.Scope == scope && !slices.Contains(names, r.Name) {
			names = append(names, r.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// SeeExtractorTurn records that eligible turn seq was looked at. When due,
// a run writing to scope is owed through the turn (event eventID), unless
// one is owed through a later turn already.
func (t *Tx) SeeExtractorTurn(ctx context.Context, sessionID string, seq int64, eventID, scope string, due bool) error {
	err := t.q.ExtractorCursorSee(ctx, dbsqlc.ExtractorCursorSeeParams{
		TenantID: t.tenant, SessionID: sessionID, Seq: seq, Due: due, EventID: eventID, Scope: scope,
	})
	if err != nil {
		return fmt.Errorf("store.SeeExtractorTurn: %w", err)
	}
	return nil
}

// ClosingRounds counts the session's rounds after turn afterSeq, through
// throughSeq, whose response closes a user turn (stop reason end_turn, no
// tool call), among its messages from position from on.
func (t *Tx) ClosingRounds(ctx context.Context, sessionID string, from, afterSeq, throughSeq int64) (int64, error) {
	n, err := t.q.MessageClosingRounds(ctx, dbsqlc.MessageClosingRoundsParams{
		TenantID: t.tenant, SessionID: sessionID, FromPosition: from, AfterSeq: afterSeq, ThroughSeq: throughSeq,
	})
	if err != nil {
		return 0, fmt.Errorf("store.ClosingRounds: %w", err)
	}
	return n, nil
}

// ExtractorAdvance is how far a cursor moves, and why.
type ExtractorAdvance struct {
	SessionID string
	// Position and Seq: the messages before Position, of turns through Seq,
	// are considered. The cursor never moves back.
	Position, Seq int64
	// AgentWrites: the main agent's writes accounted for.
	AgentWrites int64
	// Skipped: the main agent wrote memory itself. Ran: a run looked at the
	// messages; Saved: it wrote memories.
	Skipped, Ran, Saved bool
}

// AdvanceExtractorCursor moves the session's cursor; a run owed through a
// later turn stays owed.
func (t *Tx) AdvanceExtractorCursor(ctx context.Context, a ExtractorAdvance) error {
	err := t.q.ExtractorCursorAdvance(ctx, dbsqlc.ExtractorCursorAdvanceParams{
		TenantID: t.tenant, SessionID: a.SessionID, Position: a.Position, Seq: a.Seq, AgentWrites: a.AgentWrites,
		Skipped: a.Skipped, Ran: a.Ran, Saved: a.Saved,
	})
	if err != nil {
		return fmt.Errorf("store.AdvanceExtractorCursor: %w", err)
	}
	return nil
}

// FailExtractorRun records a run through seq whose model call failed: the
// cursor stays where it was, so the next run reads the messages again.
func (t *Tx) FailExtractorRun(ctx context.Context, sessionID string, seq int64, reason string) error {
	if err := t.q.ExtractorCursorFail(ctx, dbsqlc.ExtractorCursorFailParams{TenantID: t.tenant, SessionID: sessionID, Seq: seq, LastError: reason}); err != nil {
		return fmt.Errorf("store.FailExtractorRun: %w", err)
	}
	return nil
}

// ExtractorDueSessions lists up to limit sessions writing to scope that
// are owed a run, longest waiting first.
func (t *Tx) ExtractorDueSessions(ctx context.Context, scope string, limit int) ([]string, error) {
	ids, err := t.q.ExtractorDueSessions(ctx, dbsqlc.ExtractorDueSessionsParams{TenantID: t.tenant, Scope: scope, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store.ExtractorDueSessions: %w", err)
	}
	return ids, nil
}

// EndOfTurn is the position after the session's last message of turn seq
// or an earlier one (0 when it has none).
func (t *Tx) EndOfTurn(ctx context.Context, sessionID string, seq int64) (int64, error) {
	n, err := t.q.MessageEndOfTurn(ctx, dbsqlc.MessageEndOfTurnParams{TenantID: t.tenant, SessionID: sessionID, Seq: seq})
	if err != nil {
		return 0, fmt.Errorf("store.EndOfTurn: %w", err)
	}
	return n, nil
}

// MessagesRange lists the session's messages from position on, of turns
// through seq, in order: the most recent limit of them when there are more.
func (t *Tx) MessagesRange(ctx context.Context, sessionID string, from, throughSeq int64, limit int) ([]Message, error) {
	rows, err := t.q.MessageListRange(ctx, dbsqlc.MessageListRangeParams{
		TenantID: t.tenant, SessionID: sessionID, FromPosition: from, ThroughSeq: throughSeq, MaxRows: int32(limit),
	})
	if err != nil {
		return nil, fmt.Errorf("store.MessagesRange: %w", err)
	}
	out := make([]Message, 0, len(rows))
	for _, r := range rows {
		out = append(out, toMessage(r))
	}
	slices.Reverse(out)
	return out, nil
}
