package store

import (
	"context"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// Notes are a session's rolling notes (session memory), with the state of
// their updates.
type Notes struct {
	SessionID string
	// Content is the notes document; "" until the first update.
	Content string
	// LastSummarizedUUID and LastSummarizedPosition name the last message
	// the notes cover (-1 before the first update).
	LastSummarizedUUID     string
	LastSummarizedPosition int64
	// TokensAtUpdate and ToolCallsAtUpdate are the session's count and
	// tool calls when the notes were last written.
	TokensAtUpdate    int64
	ToolCallsAtUpdate int64
	// Version counts the updates written.
	Version int64
	// SeenSeq is the highest turn seq the service looked at.
	SeenSeq int64
	// Mark is where the update gate measures from.
	Mark NotesMark
	// UpdateOwner holds the running update's claim until UpdateLeaseUntil
	// (zero when none runs).
	UpdateOwner      string
	UpdateLeaseUntil time.Time
	// Pending is set when requests were coalesced into a trailing run;
	// PendingTurn is the newest of them.
	Pending     bool
	PendingTurn NotesTurn
	// RejectedUpdates and FailedUpdates count updates that changed nothing;
	// LastError says why the latest one did.
	RejectedUpdates int64
	FailedUpdates   int64
	LastError       string
	// LLMModel is the model that wrote the current notes.
	LLMModel  string
	UpdatedAt time.Time
	CreatedAt time.Time
}

// NotesMark is the session's state an update or attempt read: where the
// update gate measures growth from.
type NotesMark struct {
	// Attempted is false until the first update is attempted.
	Attempted bool
	Seq       int64
	Tokens    int64
	ToolCalls int64
}

// NotesTurn is what a turn.accounted event tells the update gate.
type NotesTurn struct {
	Seq            int64
	Tokens         int64
	ToolCallsTotal int64
	// ToolCalls is the number of tool calls in the turn's response.
	ToolCalls int
}

func toNotes(r dbsqlc.SessionNote) Notes {
	return Notes{
		SessionID: r.SessionID, Content: r.Content,
		LastSummarizedUUID: r.LastSummarizedUuid, LastSummarizedPosition: r.LastSummarizedPosition,
		TokensAtUpdate: r.TokensAtUpdate, ToolCallsAtUpdate: r.ToolCallsAtUpdate, Version: r.Version,
		SeenSeq:     r.SeenSeq,
		Mark:        NotesMark{Attempted: r.MarkAttempted, Seq: r.MarkSeq, Tokens: r.MarkTokens, ToolCalls: r.MarkToolCalls},
		UpdateOwner: r.UpdateOwner, UpdateLeaseUntil: r.UpdateLeaseUntil.Time,
		Pending: r.Pending,
		PendingTurn: NotesTurn{Seq: r.PendingSeq, Tokens: r.PendingTokens, ToolCallsTotal: r.PendingToolCallsTotal,
			ToolCalls: int(r.PendingToolCalls)},
		RejectedUpdates: r.RejectedUpdates, FailedUpdates: r.FailedUpdates, LastError: r.LastError,
		LLMModel: r.LlmModel, UpdatedAt: r.UpdatedAt.Time, CreatedAt: r.CreatedAt.Time,
	}
}

// Notes reads a session's notes; ErrNotFound when it has no notes row.
// Content is "" until the first update is written.
func (t *Tx) Notes(ctx context.Context, sessionID string) (Notes, error) {
	r, err := t.q.NotesGet(ctx, dbsqlc.NotesGetParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return Notes{}, fmt.Errorf("store.Notes: %w", notFound(err))
	}
	return toNotes(r), nil
}

// LockNotes returns the session's notes row locked for this transaction,
// making it first when the session has none. The session must exist.
func (t *Tx) LockNotes(ctx context.Context, sessionID string) (Notes, error) {
	if err := t.q.NotesEnsure(ctx, dbsqlc.NotesEnsureParams{TenantID: t.tenant, SessionID: sessionID}); err != nil {
		return Notes{}, fmt.Errorf("store.LockNotes: %w", err)
	}
	r, err := t.q.NotesGetForUpdate(ctx, dbsqlc.NotesGetForUpdateParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return Notes{}, fmt.Errorf("store.LockNotes: %w", notFound(err))
	}
	return toNotes(r), nil
}

// ObserveNotesTurn records that the service looked at turn seq, and when
// rebase is set moves the gate's mark down to tokens (a compaction lowered
// the count).
func (t *Tx) ObserveNotesTurn(ctx context.Context, sessionID string, seq int64, rebase bool, tokens int64) error {
	err := t.q.NotesObserve(ctx, dbsqlc.NotesObserveParams{TenantID: t.tenant, SessionID: sessionID, Seq: seq, Rebase: rebase, Tokens: tokens})
	if err != nil {
		return fmt.Errorf("store.ObserveNotesTurn: %w", err)
	}
	return nil
}

// ClaimNotesUpdate takes the session's notes update for owner until
// leaseUntil. It reports false when a live claim holds it.
func (t *Tx) ClaimNotesUpdate(ctx context.Context, sessionID, owner string, leaseUntil time.Time) (bool, error) {
	n, err := t.q.NotesClaim(ctx, dbsqlc.NotesClaimParams{TenantID: t.tenant, SessionID: sessionID, Owner: owner, LeaseUntil: timestamptz(leaseUntil)})
	if err != nil {
		return false, fmt.Errorf("store.ClaimNotesUpdate: %w", err)
	}
	return n == 1, nil
}

// MarkNotesPending coalesces a request into the session's trailing run,
// keeping the newest turn.
func (t *Tx) MarkNotesPending(ctx context.Context, sessionID string, turn NotesTurn) error {
	err := t.q.NotesMarkPending(ctx, dbsqlc.NotesMarkPendingParams{
		TenantID: t.tenant, SessionID: sessionID, Seq: turn.Seq, Tokens: turn.Tokens,
		ToolCallsTotal: turn.ToolCallsTotal, ToolCalls: int32(turn.ToolCalls),
	})
	if err != nil {
		return fmt.Errorf("store.MarkNotesPending: %w", err)
	}
	return nil
}

// ClearNotesPending takes the trailing run off the session.
func (t *Tx) ClearNotesPending(ctx context.Context, sessionID string) error {
	if err := t.q.NotesClearPending(ctx, dbsqlc.NotesClearPendingParams{TenantID: t.tenant, SessionID: sessionID}); err != nil {
		return fmt.Errorf("store.ClearNotesPending: %w", err)
	}
	return nil
}

// RenewNotesUpdate extends owner's claim. It returns ErrNotFound when
// owner no longer holds it.
func (t *Tx) RenewNotesUpdate(ctx context.Context, sessionID, owner string, leaseUntil time.Time) error {
	n, err := t.q.NotesRenew(ctx, dbsqlc.NotesRenewParams{TenantID: t.tenant, SessionID: sessionID, Owner: owner, LeaseUntil: timestamptz(leaseUntil)})
	if err != nil {
		return fmt.Errorf("store.RenewNotesUpdate: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store.RenewNotesUpdate %s: %w", sessionID, ErrNotFound)
	}
	return nil
}

// ReleaseNotesUpdate ends owner's claim; releasing a claim owner no longer
// holds changes nothing.
func (t *Tx) ReleaseNotesUpdate(ctx context.Context, sessionID, owner string) error {
	if _, err := t.q.NotesRelease(ctx, dbsqlc.NotesReleaseParams{TenantID: t.tenant, SessionID: sessionID, Owner: owner}); err != nil {
		return fmt.Errorf("store.ReleaseNotesUpdate: %w", err)
	}
	return nil
}

// NotesUpdate is what one update writes.
type NotesUpdate struct {
	SessionID              string
	Owner                  string
	Content                string
	LastSummarizedUUID     string
	LastSummarizedPosition int64
	Mark                   NotesMark
	LLMModel               string
}

// SaveNotes stores an update's notes and returns their new version. It
// returns ErrNotFound when u.Owner no longer holds the claim.
func (t *Tx) SaveNotes(ctx context.Context, u NotesUpdate) (int64, error) {
	v, err := t.q.NotesSave(ctx, dbsqlc.NotesSaveParams{
		TenantID: t.tenant, SessionID: u.SessionID, Owner: u.Owner, Content: u.Content,
		LastSummarizedUuid: u.LastSummarizedUUID, LastSummarizedPosition: u.LastSummarizedPosition,
		MarkSeq: u.Mark.Seq, MarkTokens: u.Mark.Tokens, MarkToolCalls: u.Mark.ToolCalls, LlmModel: u.LLMModel,
	})
	if err != nil {
		return 0, fmt.Errorf("store.SaveNotes: %w", notFound(err))
	}
	return v, nil
}

// RecordNotesAttempt records an update that changed nothing — rejected
// (its answer broke the notes' structure) or failed — with why, and moves
// the gate's mark to it. It returns ErrNotFound when owner no longer holds
// the claim.
func (t *Tx) RecordNotesAttempt(ctx context.Context, sessionID, owner string, mark NotesMark, rejected bool, reason string) error {
	var rej, failed int64 = 0, 1
	if rejected {
		rej, failed = 1, 0
	}
	n, err := t.q.NotesRecordAttempt(ctx, dbsqlc.NotesRecordAttemptParams{
		TenantID: t.tenant, SessionID: sessionID, Owner: owner, MarkSeq: mark.Seq, MarkTokens: mark.Tokens,
		MarkToolCalls: mark.ToolCalls, Rejected: rej, Failed: failed, LastError: reason,
	})
	if err != nil {
		return fmt.Errorf("store.RecordNotesAttempt: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store.RecordNotesAttempt %s: %w", sessionID, ErrNotFound)
	}
	return nil
}

// NotesProgress is how far a session's notes have followed it.
type NotesProgress struct {
	// SeenSeq is the highest turn seq the service looked at; AppliedSeq the
	// session's.
	SeenSeq, AppliedSeq int64
	// Running is whether an update holds a live claim.
	Running bool
}

// NotesProgress reads how far the session's notes have followed it;
// ErrNotFound when the session-memory service never looked at it.
func (s *Store) NotesProgress(ctx context.Context, tenant, sessionID string) (NotesProgress, error) {
	var p NotesProgress
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		r, err := tx.q.NotesProgress(ctx, dbsqlc.NotesProgressParams{TenantID: tenant, SessionID: sessionID})
		if err != nil {
			return fmt.Errorf("store.NotesProgress: %w", notFound(err))
		}
		p = NotesProgress{SeenSeq: r.SeenSeq, AppliedSeq: r.AppliedSeq, Running: r.Running}
		return nil
	})
	return p, err
}

// SessionRef names a session of a tenant.
type SessionRef struct {
	TenantID, SessionID string
}

// StaleNotesClaims lists sessions whose trailing notes run waits behind a
// claim that ran out (its worker stopped), at most sweepBatch of them. It
// reads across tenants, through the owner's function, and is meant for the
// session-memory service's sweep, which handles each session in a
// transaction of its tenant.
func (s *Store) StaleNotesClaims(ctx context.Context) ([]SessionRef, error) {
	rows, err := dbsqlc.New(s.pool).NotesStaleClaims(ctx, sweepBatch)
	if err != nil {
		return nil, fmt.Errorf("store.StaleNotesClaims: %w", err)
	}
	out := make([]SessionRef, len(rows))
	for i, r := range rows {
		out[i] = SessionRef{TenantID: r.TenantID, SessionID: r.SessionID}
	}
	return out, nil
}
