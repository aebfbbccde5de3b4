// Package singlerun runs work for a key — a memory scope, say — at most once
// at a time across every replica of a service, with the requests that
// arrive while a run holds the key coalesced into one trailing run.
//
// The key is held by a lease row in Postgres (table run_leases): a request
// takes the key when no live lease holds it and runs the work; a request
// that finds the key held only marks it pending and returns. When a run
// ends, in one statement under the row's lock, the holder either keeps the
// key for one more run (something was pending: the trailing run, which
// reads the newest state) or lets it go, so no request is lost between the
// two. The lease is renewed while the work runs and taken over by another
// replica once it runs out (a crashed worker); a worker that finds its
// lease gone has its work cancelled, and Claim.Check lets the work's last
// write make sure, in its own transaction, that the key is still its own.
// A trailing run left behind by a worker that stopped, and a run whose
// worker died while it ran (its lease ran out), are found by Sweep.
//
// Work must be idempotent and read what it has to do from Postgres, not
// from the request: a trailing run stands for every request coalesced into
// it.
package singlerun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/mnemos-ai/mnemos/pkg/lease"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// ErrLost means another worker took the key over (this one's lease ran
// out): the work's result must be dropped.
var ErrLost = errors.New("singlerun: the key's lease was lost")

// ErrUnfinished is what work returns when it stops before it is done (the
// worker is shutting down): the key is let go with a run pending, which
// Sweep, on this worker or another, or the next request, makes.
var ErrUnfinished = errors.New("singlerun: the work stopped before it was done")

// Config says what runs and how long a lease lasts.
type Config struct {
	// Kind names the runs; keys of different kinds never meet. Required.
	Kind string
	// Lease is how long a claim lasts without renewal (default 2 minutes).
	// It is renewed every third of it while the work runs.
	Lease time.Duration
	// Now is the clock of lease expiry (time.Now when nil).
	Now func() time.Time
	// Log receives what goes wrong on the side (slog.Default when nil).
	Log *slog.Logger
}

// DefaultLease is a claim's lifetime without renewal.
const DefaultLease = 2 * time.Minute

// Runs runs the work of one kind, one run per key at a time.
type Runs struct {
	st  *store.Store
	cfg Config
}

// New returns the runs of cfg.Kind on st.
func New(st *store.Store, cfg Config) (*Runs, error) {
	if cfg.Kind == "" {
		return nil, errors.New("singlerun.New: no kind")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Runs{st: st, cfg: cfg}, nil
}

// Claim is a key held by a run.
type Claim struct {
	Tenant, Key string
	// Owner identifies this holding of the key.
	Owner string
	kind  string
}

// Check reports ErrLost unless the claim still holds its key, and keeps
// the key from changing hands until tx ends. Work calls it in the
// transaction of its last write, so a run whose lease was taken over
// writes nothing.
func (c Claim) Check(ctx context.Context, tx *store.Tx) error {
	ok, err := tx.HoldsRun(ctx, c.kind, c.Key, c.Owner)
	if err != nil {
		return err
	}
	if !ok {
		return ErrLost
	}
	return nil
}

// Work is one run for a claimed key. It is called again, with the same
// claim, for the trailing run. Its context is cancelled when the lease is
// lost.
type Work func(ctx context.Context, c Claim) error

// Options shape how a request runs its work.
type Options struct {
	// Progress, when set, is called each time the lease is renewed (a bus
	// message's InProgress, so it is not delivered again meanwhile).
	Progress func() error
	// Stopping, when closed, ends the run loop after the run under way: a
	// trailing run is not started but left pending, for Sweep or the next
	// request (on another replica) to run.
	Stopping <-chan struct{}
}

// Request asks for a run of key. When no run holds the key, it claims the
// key, runs work — then the trailing run, as long as requests arrived
// during the run before — and lets the key go, returning ran = true and
// work's error, if any. When a run holds the key, the request is
// coalesced into the holder's trailing run and Request returns at once
// (ran = false).
func (r *Runs) Request(ctx context.Context, tenant, key string, work Work, opts Options) (ran bool, err error) {
	c := Claim{Tenant: tenant, Key: key, Owner: uuid.NewString(), kind: r.cfg.Kind}
	err = r.st.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		ran, err = tx.RequestRun(ctx, r.cfg.Kind, key, c.Owner, r.until())
		return err
	})
	if err != nil {
		return false, fmt.Errorf("singlerun: request %s %s/%s: %w", r.cfg.Kind, tenant, key, err)
	}
	if !ran {
		return false, nil
	}
	return true, r.run(ctx, c, work, opts)
}

// Sweep runs what workers that stopped left behind: keys whose lease ran
// out (the worker died while its run was under way: the run may stand for
// requests whose messages were acknowledged, so nothing else would make
// it) and released keys with a run pending. Each is adopted (unless
// another worker does first) and run like a request. It returns how many
// it ran.
func (r *Runs) Sweep(ctx context.Context, work Work, opts Options) (int, error) {
	refs, err := r.st.StaleRuns(ctx, r.cfg.Kind, 100)
	if err != nil {
		return 0, fmt.Errorf("singlerun: sweep %s: %w", r.cfg.Kind, err)
	}
	ran := 0
	for _, ref := range refs {
		if stopping(opts.Stopping) {
			break
		}
		c := Claim{Tenant: ref.TenantID, Key: ref.Key, Owner: uuid.NewString(), kind: r.cfg.Kind}
		adopted := false
		err := r.st.InTx(ctx, ref.TenantID, func(tx *store.Tx) error {
			var err error
			adopted, err = tx.AdoptRun(ctx, r.cfg.Kind, ref.Key, c.Owner, r.until())
			return err
		})
		if err != nil {
			return ran, fmt.Errorf("singlerun: adopt %s %s/%s: %w", r.cfg.Kind, ref.TenantID, ref.Key, err)
		}
		if !adopted {
			continue
		}
		r.cfg.Log.Info("running a trailing run left behind by a stopped worker", "kind", r.cfg.Kind, "tenant", ref.TenantID, "key", ref.Key)
		ran++
		if err := r.run(ctx, c, work, opts); err != nil {
			return ran, err
		}
	}
	return ran, nil
}

func (r *Runs) until() time.Time { return r.cfg.Now().Add(r.cfg.Lease) }

// run holds c's key: it runs work, then the trailing run while requests
// arrived meanwhile, and lets the key go.
func (r *Runs) run(ctx context.Context, c Claim, work Work, opts Options) error {
	for {
		err := lease.Hold(ctx, r.holder(c, opts.Progress), func(ctx context.Context) error { return work(ctx, c) })
		switch {
		case errors.Is(err, ErrLost):
			r.cfg.Log.Warn("another worker took this run's key over; its result is dropped", "kind", r.cfg.Kind, "tenant", c.Tenant, "key", c.Key)
			return nil
		case errors.Is(err, ErrUnfinished):
			r.release(ctx, c, true)
			return nil
		case err != nil:
			r.release(ctx, c, false)
			return err
		case stopping(opts.Stopping):
			r.release(ctx, c, false) // what is pending stays so, for another worker
			return nil
		}
		again, err := r.finish(ctx, c)
		if err != nil || !again {
			return err
		}
	}
}

// finish ends a run: again when requests arrived meanwhile and the key is
// kept for the trailing run.
func (r *Runs) finish(ctx context.Context, c Claim) (again bool, err error) {
	err = r.st.InTx(ctx, c.Tenant, func(tx *store.Tx) error {
		var err error
		again, err = tx.FinishRun(ctx, r.cfg.Kind, c.Key, c.Owner, r.until())
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		r.cfg.Log.Warn("another worker took this run's key over before it ended", "kind", r.cfg.Kind, "tenant", c.Tenant, "key", c.Key)
		return false, nil
	}
	if err != nil {
		r.release(ctx, c, false)
		return false, fmt.Errorf("singlerun: finish %s %s/%s: %w", r.cfg.Kind, c.Tenant, c.Key, err)
	}
	return again, nil
}

// release lets the key go without running what is pending (marking a run
// pending when unfinished), so another request, or the sweep, takes it at
// once rather than after the lease. If that fails too, the lease runs out.
func (r *Runs) release(ctx context.Context, c Claim, unfinished bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := r.st.InTx(rctx, c.Tenant, func(tx *store.Tx) error { return tx.ReleaseRun(rctx, r.cfg.Kind, c.Key, c.Owner, unfinished) })
	if err != nil {
		r.cfg.Log.Warn("could not let go of a run's key; its lease will run out", "kind", r.cfg.Kind, "tenant", c.Tenant, "key", c.Key, "err", err)
	}
}

// holder keeps c's lease while its work runs.
func (r *Runs) holder(c Claim, progress func() error) lease.Holder {
	return lease.Holder{
		Every: r.cfg.Lease / 3,
		Renew: func(ctx context.Context) error {
			return r.st.InTx(ctx, c.Tenant, func(tx *store.Tx) error {
				return tx.RenewRun(ctx, r.cfg.Kind, c.Key, c.Owner, r.until())
			})
		},
		Progress: progress, Lost: ErrLost,
		Log: r.cfg.Log, Attrs: []any{"kind", r.cfg.Kind, "tenant", c.Tenant, "key", c.Key},
	}
}

func stopping(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
