package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// ReplacementsOfKind lists a session's decisions of one kind, in the order made.
func (t *Tx) ReplacementsOfKind(ctx context.Context, sessionID, kind string) ([]Replacement, error) {
	rows, err := t.q.ReplacementsOfKind(ctx, dbsqlc.ReplacementsOfKindParams{TenantID: t.tenant, SessionID: sessionID, Kind: kind})
	if err != nil {
		return nil, fmt.Errorf("store.ReplacementsOfKind: %w", err)
	}
	out := make([]Replacement, len(rows))
	for i, r := range rows {
		out[i] = toReplacement(r)
	}
	return out, nil
}

// ReplacementsOfKinds lists a session's decisions of any of the kinds, in the order made.
func (t *Tx) ReplacementsOfKinds(ctx context.Context, sessionID string, kinds ...string) ([]Replacement, error) {
	rows, err := t.q.ReplacementsOfKinds(ctx, dbsqlc.ReplacementsOfKindsParams{TenantID: t.tenant, SessionID: sessionID, Kinds: kinds})
	if err != nil {
		return nil, fmt.Errorf("store.ReplacementsOfKinds: %w", err)
	}
	out := make([]Replacement, len(rows))
	for i, r := range rows {
		out[i] = toReplacement(r)
	}
	return out, nil
}

// ContextBreak records that decisions changed a session's rendered context:
// the epoch moves on, the tokens they saved leave the count, and usage at or
// above the midpoint between the counts before and after is stale.
func (t *Tx) ContextBreak(ctx context.Context, sessionID string, saved, count int64, state string) error {
	err := t.q.SessionAddContextBreak(ctx, dbsqlc.SessionAddContextBreakParams{
		TenantID: t.tenant, SessionID: sessionID, Saved: saved, TokenCount: count, State: state,
	})
	if err != nil {
		return fmt.Errorf("store.ContextBreak: %w", err)
	}
	return nil
}

// ContextSnapshot fingerprints the last context assembled for a session: the
// length and hash of its cache-relevant prefix, and the epoch it was made in.
type ContextSnapshot struct {
	SessionID   string
	Epoch       int64
	PrefixLen   int64
	PrefixHash  []byte
	AssembledAt time.Time
}

// ContextSnapshot reads a session's last snapshot; ErrNotFound when none.
func (t *Tx) ContextSnapshot(ctx context.Context, sessionID string) (ContextSnapshot, error) {
	r, err := t.q.ContextSnapshotGet(ctx, dbsqlc.ContextSnapshotGetParams{TenantID: t.tenant, SessionID: sessionID})
	if err != nil {
		return ContextSnapshot{}, fmt.Errorf("store.ContextSnapshot: %w", notFound(err))
	}
	return ContextSnapshot{SessionID: r.SessionID, Epoch: r.Epoch, PrefixLen: r.PrefixLen, PrefixHash: r.PrefixHash, AssembledAt: r.AssembledAt.Time}, nil
}

// PutContextSnapshot replaces a session's snapshot.
func (t *Tx) PutContextSnapshot(ctx context.Context, s ContextSnapshot) error {
	err := t.q.ContextSnapshotPut(ctx, dbsqlc.ContextSnapshotPutParams{
		TenantID: t.tenant, SessionID: s.SessionID, Epoch: s.Epoch, PrefixLen: s.PrefixLen, PrefixHash: s.PrefixHash,
	})
	if err != nil {
		return fmt.Errorf("store.PutContextSnapshot: %w", err)
	}
	return nil
}

// ContextSize is what rendering a session's context reads: its messages
// from the kept point on, and their size in bytes (stored or estimated,
// whichever is larger).
type ContextSize struct {
	Messages int64
	Bytes    int64
}

// ContextSize sizes a session's context without reading it: the gateway
// admits a render by it. A session that does not exist is empty.
func (t *Tx) ContextSize(ctx context.Context, sessionID string) (ContextSize, error) {
	row, err := t.q.ContextSize(ctx, dbsqlc.ContextSizeParams{TenantID: t.tenant, SessionID: sessionID})
	if errors.Is(err, pgx.ErrNoRows) {
		return ContextSize{}, nil
	}
	if err != nil {
		return ContextSize{}, fmt.Errorf("store.ContextSize: %w", err)
	}
	return ContextSize{Messages: row.Messages, Bytes: row.Bytes}, nil
}
