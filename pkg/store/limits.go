package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// TakeTokens refills a tenant's token bucket named bucket for the time since
// its last refill (rate tokens a second, at most burst) and takes up to want
// whole tokens. It returns how many it took and how many are left. Every
// replica shares the bucket: the clock is the database's.
func (s *Store) TakeTokens(ctx context.Context, tenant, bucket string, rate, burst float64, want int) (granted int, left float64, err error) {
	err = s.InTx(ctx, tenant, func(tx *Tx) error {
		r, err := tx.q.LimitBucketTake(ctx, dbsqlc.LimitBucketTakeParams{
			TenantID: tenant, Bucket: bucket, Rate: rate, Burst: burst, Want: int32(want),
		})
		if err != nil {
			return unknownTenant(err, tenant)
		}
		granted, left = int(r.Granted), r.Tokens
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store.TakeTokens: %w", err)
	}
	return granted, left, nil
}

// SessionAdmission is the answer of AdmitSession.
type SessionAdmission struct {
	// Admitted: the session was active already, or took a free slot.
	Admitted bool
	// Active is the number of the tenant's active sessions when they were
	// counted (a session that was active already is not counted: 0).
	Active int64
	// RetryAfter is, for a session refused, how long until the longest idle
	// active session stops counting and frees its slot.
	RetryAfter time.Duration
}

// AdmitSession marks a tenant's session active. A session active within
// window stays so; another one is admitted only while fewer than limit of the
// tenant's sessions are active. Sessions becoming active serialize on a lock
// of the tenant, so the cap holds across replicas.
func (s *Store) AdmitSession(ctx context.Context, tenant, session string, limit int, window time.Duration) (SessionAdmission, error) {
	var out SessionAdmission
	secs := window.Seconds()
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		n, err := tx.q.ActiveSessionTouch(ctx, dbsqlc.ActiveSessionTouchParams{TenantID: tenant, SessionID: session, WindowSeconds: secs})
		if err != nil {
			return err
		}
		if n > 0 {
			out.Admitted = true
			return nil
		}
		if err := tx.q.ActiveSessionsLock(ctx, tenant); err != nil {
			return err
		}
		if err := tx.q.ActiveSessionsPrune(ctx, dbsqlc.ActiveSessionsPruneParams{TenantID: tenant, WindowSeconds: secs}); err != nil {
			return err
		}
		c, err := tx.q.ActiveSessionsCount(ctx, dbsqlc.ActiveSessionsCountParams{TenantID: tenant, WindowSeconds: secs})
		if err != nil {
			return err
		}
		out.Active = c.Active
		if c.Active >= int64(limit) {
			out.RetryAfter = max(c.Oldest.Time.Add(window).Sub(c.Now.Time), 0)
			return nil
		}
		if err := tx.q.ActiveSessionUpsert(ctx, dbsqlc.ActiveSessionUpsertParams{TenantID: tenant, SessionID: session}); err != nil {
			return unknownTenant(err, tenant)
		}
		out.Admitted, out.Active = true, c.Active+1
		return nil
	})
	if err != nil {
		return SessionAdmission{}, fmt.Errorf("store.AdmitSession: %w", err)
	}
	return out, nil
}

// unknownTenant turns a foreign-key violation on the tenant into ErrUnknownTenant.
func unknownTenant(err error, tenant string) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return fmt.Errorf("tenant %q: %w", tenant, ErrUnknownTenant)
	}
	return err
}
