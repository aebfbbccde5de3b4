package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// RetentionTenants lists the tenants whose settings name a retention
// section: the retention sweep's read across tenants, which then reads
// each one's effective settings and works in its transactions.
func (s *Store) RetentionTenants(ctx context.Context) ([]string, error) {
	ids, err := dbsqlc.New(s.pool).RetentionTenants(ctx)
	if err != nil {
		return nil, fmt.Errorf("store.RetentionTenants: %w", err)
	}
	return ids, nil
}

// LockRetention takes the tenant's retention lock, a Postgres session-level
// advisory lock held on a connection of its own (no transaction stays
// open), so that of two sweepers only one works on a tenant at a time. ok
// is false when another holds it; otherwise unlock gives it back. A
// process that dies loses its connection and with it the lock.
func (s *Store) LockRetention(ctx context.Context, tenant string) (unlock func(), ok bool, err error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("store.LockRetention: %w", err)
	}
	const key = "SELECT hashtextextended('mnemos.retention:' || $1::text, 0)"
	if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock(("+key+"))", tenant).Scan(&ok); err != nil || !ok {
		c.Release()
		if err != nil {
			return nil, false, fmt.Errorf("store.LockRetention: %w", err)
		}
		return nil, false, nil
	}
	return func() {
		// A connection that cannot give the lock back is closed, which does.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := c.Exec(ctx, "SELECT pg_advisory_unlock(("+key+"))", tenant); err != nil {
			_ = c.Conn().Close(ctx)
		}
		c.Release()
	}, true, nil
}

// IdleSessions lists up to limit of the tenant's sessions without activity
// since before, oldest first. A proxy thread is never listed by itself: it
// goes with its client's session, listed only when every thread of it is
// idle too.
func (t *Tx) IdleSessions(ctx context.Context, before time.Time, limit int) ([]string, error) {
	ids, err := t.q.RetentionIdleSessions(ctx, dbsqlc.RetentionIdleSessionsParams{TenantID: t.tenant, Before: timestamptz(before), MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store.IdleSessions: %w", err)
	}
	return ids, nil
}

// SessionIdle locks the session's row for the rest of the transaction and
// reports whether it has had no activity since before; false when it is
// gone.
func (t *Tx) SessionIdle(ctx context.Context, session string, before time.Time) (bool, error) {
	idle, err := t.q.RetentionSessionStillIdle(ctx, dbsqlc.RetentionSessionStillIdleParams{TenantID: t.tenant, SessionID: session, Before: timestamptz(before)})
	if errors.Is(notFound(err), ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store.SessionIdle: %w", err)
	}
	return idle, nil
}

// ExpireToolResults deletes up to limit of the tenant's stored tool results
// stored before before, skipping rows another transaction holds, and
// returns how many it deleted.
func (t *Tx) ExpireToolResults(ctx context.Context, before time.Time, limit int) (int64, error) {
	n, err := t.q.RetentionDeleteToolResults(ctx, dbsqlc.RetentionDeleteToolResultsParams{TenantID: t.tenant, Before: timestamptz(before), MaxRows: int32(limit)})
	if err != nil {
		return 0, fmt.Errorf("store.ExpireToolResults: %w", err)
	}
	return n, nil
}

// ExpireMemoryRevisions deletes up to limit of the tenant's memory
// revisions written before before, except each memory's last keep
// revisions and its live one, and returns how many it deleted.
func (t *Tx) ExpireMemoryRevisions(ctx context.Context, before time.Time, keep, limit int) (int64, error) {
	n, err := t.q.RetentionDeleteMemoryRevisions(ctx, dbsqlc.RetentionDeleteMemoryRevisionsParams{
		TenantID: t.tenant, Before: timestamptz(before), Keep: int64(keep), MaxRows: int32(limit),
	})
	if err != nil {
		return 0, fmt.Errorf("store.ExpireMemoryRevisions: %w", err)
	}
	return n, nil
}

// ToolResultOffloaded reports whether the tenant's tool result id was
// offloaded once: a replacement in some session's context names it. For
// an id no longer stored, true means it expired (retention).
func (t *Tx) ToolResultOffloaded(ctx context.Context, id string) (bool, error) {
	ok, err := t.q.ToolResultOffloaded(ctx, dbsqlc.ToolResultOffloadedParams{TenantID: t.tenant, ID: id})
	if err != nil {
		return false, fmt.Errorf("store.ToolResultOffloaded: %w", err)
	}
	return ok, nil
}
