package store

import (
	"context"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// RecallSurfaced is a memory recall surfaced in a session. pkg/memory/recall gives
// these rows their meaning.
type RecallSurfaced struct {
	SessionID string
	Scope     string
	Name      string
	Revision  int64
	// Source is "api" or "prefetch".
	Source string
	// MessageUUID is the user message a prefetch surfaced it beside.
	MessageUUID string
	// CompactionID is the session's latest compaction when it was surfaced.
	CompactionID string
	Bytes        int64
	SurfacedAt   time.Time
}

// RecallPrefetch is what the context shows beside one user message.
type RecallPrefetch struct {
	SessionID   string
	MessageUUID string
	Outcome     string
	// Blocks are the texts shown beside the message (none unless surfaced).
	Blocks    []string
	DecidedAt time.Time
}

// LockRecallSession locks the session's recall row until the transaction
// ends (creating it first) and counts one more recall of the session.
func (t *Tx) LockRecallSession(ctx context.Context, sessionID string) error {
	if err := t.q.RecallSessionLock(ctx, dbsqlc.RecallSessionLockParams{TenantID: t.tenant, SessionID: sessionID}); err != nil {
		return fmt.Errorf("store.LockRecallSession: %w", err)
	}
	return nil
}

// RecallSurfaced lists what recall surfaced in a session, oldest first.
func (t *Tx) RecallSurfaced(ctx context.Context, sessionID string) ([]RecallSurfaced, error) {
	rows, err := t.q.RecallSurfacedList(ctx, dbsqlc.RecallSurfacedListParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return nil, fmt.Errorf("store.RecallSurfaced: %w", err)
	}
	out := make([]RecallSurfaced, len(rows))
	for i, r := range rows {
		out[i] = RecallSurfaced{
			SessionID: r.SessionID, Scope: r.Scope, Name: r.Name, Revision: r.Revision, Source: r.Source,
			MessageUUID: r.MessageUuid, CompactionID: r.CompactionID, Bytes: r.Bytes, SurfacedAt: r.SurfacedAt.Time,
		}
	}
	return out, nil
}

// InsertRecallSurfaced records a surfaced memory. It reports false, and
// records nothing, when the session had that memory surfaced already. The
// session's recall row must exist (LockRecallSession).
func (t *Tx) InsertRecallSurfaced(ctx context.Context, s RecallSurfaced) (bool, error) {
	n, err := t.q.RecallSurfacedInsert(ctx, dbsqlc.RecallSurfacedInsertParams{
		TenantID: t.tenant, SessionID: s.SessionID, Scope: s.Scope, Name: s.Name, Revision: s.Revision,
		Source: s.Source, MessageUuid: s.MessageUUID, CompactionID: s.CompactionID, Bytes: s.Bytes,
	})
	if err != nil {
		return false, fmt.Errorf("store.InsertRecallSurfaced: %w", err)
	}
	return n == 1, nil
}

// InsertRecallPrefetch records what the context shows beside a user
// message. It reports false, and records nothing, when that is decided already.
func (t *Tx) InsertRecallPrefetch(ctx context.Context, p RecallPrefetch) (bool, error) {
	blocks := p.Blocks
	if blocks == nil {
		blocks = []string{}
	}
	n, err := t.q.RecallPrefetchInsert(ctx, dbsqlc.RecallPrefetchInsertParams{
		TenantID: t.tenant, SessionID: p.SessionID, MessageUuid: p.MessageUUID, Outcome: p.Outcome, Blocks: blocks,
	})
	if err != nil {
		return false, fmt.Errorf("store.InsertRecallPrefetch: %w", err)
	}
	return n == 1, nil
}

// CloseRecallPrefetches decides that nothing is shown beside those of the
// user messages uuids that are not decided yet.
func (t *Tx) CloseRecallPrefetches(ctx context.Context, sessionID string, uuids []string) error {
	if len(uuids) == 0 {
		return nil
	}
	if err := t.q.RecallPrefetchClose(ctx, dbsqlc.RecallPrefetchCloseParams{TenantID: t.tenant, SessionID: sessionID, Uuids: uuids}); err != nil {
		return fmt.Errorf("store.CloseRecallPrefetches: %w", err)
	}
	return nil
}

// RecallPrefetches returns the decisions about those of the user messages
// uuids that are decided, by uuid.
func (t *Tx) RecallPrefetches(ctx context.Context, sessionID string, uuids []string) (map[string]RecallPrefetch, error) {
	out := map[string]RecallPrefetch{}
	if len(uuids) == 0 {
		return out, nil
	}
	rows, err := t.q.RecallPrefetchList(ctx, dbsqlc.RecallPrefetchListParams{TenantID: t.tenant, SessionID: sessionID, Uuids: uuids})
	if err != nil {
		return nil, fmt.Errorf("store.RecallPrefetches: %w", err)
	}
	for _, r := range rows {
		out[r.MessageUuid] = RecallPrefetch{SessionID: r.SessionID, MessageUUID: r.MessageUuid, Outcome: r.Outcome,
			Blocks: r.Blocks, DecidedAt: r.DecidedAt.Time}
	}
	return out, nil
}

// MessagesFromRound lists a session's messages of round (turn seq) seq and
// later, in order.
func (t *Tx) MessagesFromRound(ctx context.Context, sessionID string, seq int64) ([]Message, error) {
	rows, err := t.q.RecallMessages(ctx, dbsqlc.RecallMessagesParams{TenantID: t.tenant, SessionID: sessionID, FromSeq: seq})
	if err != nil {
		return nil, fmt.Errorf("store.MessagesFromRound: %w", err)
	}
	out := make([]Message, len(rows))
	for i, r := range rows {
		out[i] = toMessage(r)
	}
	return out, nil
}
