package store

import (
	"context"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// RunLease is the lease row of one key of one kind of run (pkg/singlerun).
type RunLease struct {
	Kind, Key string
	// Owner holds the key until LeaseUntil ("" and zero when no run holds it).
	Owner      string
	LeaseUntil time.Time
	// Pending is set when requests arrived while a run held the key.
	Pending bool
	// Runs counts the runs finished.
	Runs      int64
	UpdatedAt time.Time
}

func toRunLease(r dbsqlc.RunLease) RunLease {
	return RunLease{Kind: r.Kind, Key: r.Key, Owner: r.Owner, LeaseUntil: r.LeaseUntil.Time, Pending: r.Pending, Runs: r.Runs, UpdatedAt: r.UpdatedAt.Time}
}

// RequestRun asks for a run of kind on key: when no live run holds the key
// it is taken for owner until leaseUntil (claimed); otherwise the request
// is recorded as the holder's trailing run.
func (t *Tx) RequestRun(ctx context.Context, kind, key, owner string, leaseUntil time.Time) (claimed bool, err error) {
	claimed, err = t.q.RunLeaseRequest(ctx, dbsqlc.RunLeaseRequestParams{
		TenantID: t.tenant, Kind: kind, Key: key, Owner: owner, LeaseUntil: timestamptz(leaseUntil),
	})
	if err != nil {
		return false, fmt.Errorf("store.RequestRun: %w", err)
	}
	return claimed, nil
}

// AdoptRun takes for owner a key whose trailing run waits behind a lease
// that was released or ran out. It reports false when there is nothing to
// adopt (another worker did, or a run holds the key).
func (t *Tx) AdoptRun(ctx context.Context, kind, key, owner string, leaseUntil time.Time) (bool, error) {
	n, err := t.q.RunLeaseAdopt(ctx, dbsqlc.RunLeaseAdoptParams{TenantID: t.tenant, Kind: kind, Key: key, Owner: owner, LeaseUntil: timestamptz(leaseUntil)})
	if err != nil {
		return false, fmt.Errorf("store.AdoptRun: %w", err)
	}
	return n == 1, nil
}

// RenewRun extends owner's lease; ErrNotFound when owner no longer holds the key.
func (t *Tx) RenewRun(ctx context.Context, kind, key, owner string, leaseUntil time.Time) error {
	n, err := t.q.RunLeaseRenew(ctx, dbsqlc.RunLeaseRenewParams{TenantID: t.tenant, Kind: kind, Key: key, Owner: owner, LeaseUntil: timestamptz(leaseUntil)})
	if err != nil {
		return fmt.Errorf("store.RenewRun: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store.RenewRun %s %s: %w", kind, key, ErrNotFound)
	}
	return nil
}

// FinishRun ends owner's run. When requests arrived meanwhile, owner keeps
// the key, its lease renewed to leaseUntil, for one trailing run (again);
// otherwise the key is free. ErrNotFound when owner no longer holds it.
func (t *Tx) FinishRun(ctx context.Context, kind, key, owner string, leaseUntil time.Time) (again bool, err error) {
	rows, err := t.q.RunLeaseFinish(ctx, dbsqlc.RunLeaseFinishParams{TenantID: t.tenant, Kind: kind, Key: key, Owner: owner, LeaseUntil: timestamptz(leaseUntil)})
	if err != nil {
		return false, fmt.Errorf("store.FinishRun: %w", err)
	}
	if len(rows) == 0 {
		return false, fmt.Errorf("store.FinishRun %s %s: %w", kind, key, ErrNotFound)
	}
	return rows[0], nil
}

// ReleaseRun lets go of owner's key and leaves any trailing run pending,
// for the sweep or the next request; keepPending marks one pending (the
// work stopped before it was done). Releasing a key owner no longer holds
// changes nothing.
func (t *Tx) ReleaseRun(ctx context.Context, kind, key, owner string, keepPending bool) error {
	if _, err := t.q.RunLeaseRelease(ctx, dbsqlc.RunLeaseReleaseParams{TenantID: t.tenant, Kind: kind, Key: key, Owner: owner, KeepPending: keepPending}); err != nil {
		return fmt.Errorf("store.ReleaseRun: %w", err)
	}
	return nil
}

// HoldsRun reports whether owner holds the key, and if so keeps it from
// changing hands until the transaction ends: a run's last write checks it
// in the same transaction.
func (t *Tx) HoldsRun(ctx context.Context, kind, key, owner string) (bool, error) {
	rows, err := t.q.RunLeaseHeld(ctx, dbsqlc.RunLeaseHeldParams{TenantID: t.tenant, Kind: kind, Key: key, Owner: owner})
	if err != nil {
		return false, fmt.Errorf("store.HoldsRun: %w", err)
	}
	return len(rows) == 1, nil
}

// RunLease reads the lease row of a key; ErrNotFound when the key never ran.
func (t *Tx) RunLease(ctx context.Context, kind, key string) (RunLease, error) {
	rows, err := t.q.RunLeaseGet(ctx, dbsqlc.RunLeaseGetParams{TenantID: t.tenant, Kind: kind, Key: key})
	if err != nil {
		return RunLease{}, fmt.Errorf("store.RunLease: %w", err)
	}
	if len(rows) == 0 {
		return RunLease{}, fmt.Errorf("store.RunLease %s %s: %w", kind, key, ErrNotFound)
	}
	return toRunLease(rows[0]), nil
}

// RunRef names a key of a tenant.
type RunRef struct {
	TenantID, Key string
}

// StaleRuns lists up to limit keys of kind whose trailing run waits behind
// a lease that was released or ran out (its worker stopped). It reads
// across tenants — the one query of runs that does — and is meant for a
// service's sweep, which then works in each tenant's own transactions.
func (s *Store) StaleRuns(ctx context.Context, kind string, limit int) ([]RunRef, error) {
	rows, err := dbsqlc.New(s.pool).RunLeaseStale(ctx, dbsqlc.RunLeaseStaleParams{Kind: kind, MaxRows: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("store.StaleRuns: %w", err)
	}
	out := make([]RunRef, len(rows))
	for i, r := range rows {
		out[i] = RunRef{TenantID: r.TenantID, Key: r.Key}
	}
	return out, nil
}
