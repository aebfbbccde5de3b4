package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// SessionKey is a session's place in the listing of a tenant's sessions:
// newest first, by creation time, then by id (descending). Neither changes
// once the session exists, so a page boundary stays put. The other orders
// (SessionOrder) read their own value: TokenCount or UpdatedAt.
type SessionKey struct {
	CreatedAt  time.Time
	UpdatedAt  time.Time
	TokenCount int64
	SessionID  string
}

// SessionOrder is the order of a listing of sessions.
type SessionOrder string

// The orders of ListSessions.
const (
	// OrderCreated is newest first; the API's order.
	OrderCreated SessionOrder = ""
	// OrderActivity is the latest updated first.
	OrderActivity SessionOrder = "activity"
	// OrderSize is the largest token count first.
	OrderSize SessionOrder = "size"
)

// KeyOf is s's key in a listing.
func KeyOf(s sessionstate.Session) SessionKey {
	return SessionKey{CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, TokenCount: s.TokenCount, SessionID: s.SessionID}
}

// SessionFilter selects the sessions ListSessions returns.
type SessionFilter struct {
	// Before is the key of the previous page's last session; the zero key
	// starts at the newest session.
	Before SessionKey
	// States keeps sessions in one of these threshold states (all when empty).
	States []string
	// UpdatedAfter keeps sessions updated after it (zero: any).
	UpdatedAfter time.Time
	// AgentID keeps sessions of this agent ("": any).
	AgentID string
	// MemoryScope keeps sessions whose memory_scope holds every one of
	// these keys with its value (nil: any).
	MemoryScope map[string]string
	// Limit bounds the sessions returned.
	Limit int
	// Order is the listing's order (newest first by default).
	Order SessionOrder
}

// ListSessions returns a page of the tenant's sessions, newest first (see
// SessionKey) or in f.Order, that match f.
func (t *Tx) ListSessions(ctx context.Context, f SessionFilter) ([]sessionstate.Session, error) {
	before := pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	if !f.Before.CreatedAt.IsZero() {
		before = timestamptz(f.Before.CreatedAt)
	}
	scope := []byte("{}")
	if len(f.MemoryScope) > 0 {
		var err error
		if scope, err = json.Marshal(f.MemoryScope); err != nil {
			return nil, fmt.Errorf("store.ListSessions: memory scope: %w", err)
		}
	}
	states := f.States
	if states == nil {
		states = []string{}
	}
	var rows []dbsqlc.Session
	var err error
	switch f.Order {
	case OrderCreated:
		rows, err = t.q.SessionList(ctx, dbsqlc.SessionListParams{
			TenantID: t.tenant, BeforeCreatedAt: before, BeforeSessionID: f.Before.SessionID,
			States: states, UpdatedAfter: lowerBound(f.UpdatedAfter), AgentID: f.AgentID,
			ScopeFilter: scope, MaxRows: int32(max(f.Limit, 0)),
		})
	case OrderActivity, OrderSize:
		p := dbsqlc.SessionListSortedParams{
			TenantID: t.tenant, SortBy: string(f.Order), BeforeSessionID: f.Before.SessionID,
			BeforeTokens: math.MaxInt64, BeforeUpdatedAt: pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true},
			States: states, UpdatedAfter: lowerBound(f.UpdatedAfter), AgentID: f.AgentID,
			ScopeFilter: scope, MaxRows: int32(max(f.Limit, 0)),
		}
		if f.Before.SessionID != "" {
			p.BeforeTokens, p.BeforeUpdatedAt = f.Before.TokenCount, timestamptz(f.Before.UpdatedAt)
		}
		rows, err = t.q.SessionListSorted(ctx, p)
	default:
		return nil, fmt.Errorf("store.ListSessions: unknown order %q", f.Order)
	}
	if err != nil {
		return nil, fmt.Errorf("store.ListSessions: %w", err)
	}
	out := make([]sessionstate.Session, len(rows))
	for i, r := range rows {
		if out[i], err = toSession(r); err != nil {
			return nil, fmt.Errorf("store.ListSessions: %w", err)
		}
	}
	return out, nil
}

// ScopeSummary is one scope of a tenant that holds memories.
type ScopeSummary struct {
	Scope string
	// Live and Deleted count its memories.
	Live    int64
	Deleted int64
	// UpdatedAt is when one of its memories last changed.
	UpdatedAt time.Time
	// LastConsolidatedAt is when a dream last consolidated it (zero: never).
	LastConsolidatedAt time.Time
}

// ScopeFilter selects the scopes ListScopes returns.
type ScopeFilter struct {
	// After is the previous page's last scope ("": from the first).
	After string
	// Prefixes keeps scopes whose names start with every one of them.
	Prefixes []string
	// Limit bounds the scopes returned.
	Limit int
}

// ListScopes returns a page of the tenant's scopes that hold memories (live
// or deleted), in scope order, that match f.
func (t *Tx) ListScopes(ctx context.Context, f ScopeFilter) ([]ScopeSummary, error) {
	if len(f.Prefixes) > 2 {
		return nil, fmt.Errorf("store.ListScopes: at most 2 prefixes, got %d", len(f.Prefixes))
	}
	var prefixes [2]string
	copy(prefixes[:], f.Prefixes)
	rows, err := t.q.ScopeList(ctx, dbsqlc.ScopeListParams{
		TenantID: t.tenant, AfterScope: f.After, KindPrefix: prefixes[0], Prefix: prefixes[1], MaxRows: int32(max(f.Limit, 0)),
	})
	if err != nil {
		return nil, fmt.Errorf("store.ListScopes: %w", err)
	}
	out := make([]ScopeSummary, len(rows))
	for i, r := range rows {
		out[i] = ScopeSummary{
			Scope: r.Scope, Live: r.Live, Deleted: r.Deleted,
			UpdatedAt: r.UpdatedAt.Time, LastConsolidatedAt: r.LastConsolidatedAt.Time,
		}
	}
	return out, nil
}
