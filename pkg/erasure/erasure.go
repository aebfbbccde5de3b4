// Package erasure removes a tenant's session or memory scope, every row of
// it, for good (DELETE /v1/sessions/{id}, DELETE /v1/scopes/{scope}).
//
// An erasure is recorded first (store.StartErasure), in a transaction of
// its own, then worked through table by table in batches of at most
// Config.Batch rows, each batch its own short transaction that also adds
// what it removed to the erasure's counts, so no lock is held for long and
// a crash loses nothing: the record says what is left to do, and the
// sweep (Run) finishes erasures whose worker stopped. A pass goes over
// every table; the erasure finishes after a pass that found nothing left,
// so rows written meanwhile (a turn accounted while the session was being
// erased) go too. Finishing writes the audit record in the same
// transaction. Working on an erasure twice, at once or one after the
// other, is harmless: a batch removes what is there.
//
// A tenant's erasure also purges the tenant's events from the message
// streams (Streams), after its last pass and before it finishes: finishing
// removes the tenant's row and the erasure's record with it, so the purge
// comes first, and a crash between the two purges again. An Eraser without
// streams (the command line, acting on the database alone) erases the rows
// and leaves the erasure unfinished, ErrStreamsPending: the sweep of a
// process with streams (the gateway's) purges and finishes it.
package erasure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// The audit log's actions of erasures.
const (
	ActionEraseSession = "erase_session"
	ActionEraseScope   = "erase_scope"
	ActionEraseTenant  = "erase_tenant"
)

// Config of an Eraser.
type Config struct {
	// Batch is the most rows one statement removes.
	Batch int
	// MaxPasses bounds the passes of one attempt: a session that keeps
	// receiving events while it is erased is left to the sweep after that.
	MaxPasses int
	// Lease is how long an erasure taken up by a worker is left alone by
	// the sweep; SweepInterval how often the sweep looks.
	Lease         time.Duration
	SweepInterval time.Duration
	// AfterBatch, when set, runs after each batch that removed rows; an
	// error stops the erasure there, unfinished (tests use it to stop a
	// worker midway, as a crash would).
	AfterBatch func(step string, rows int64) error
	// Finished, when set, runs once per erasure, in the worker whose
	// transaction finished it (after the commit): whoever works on an
	// erasure, at once or later, it is told of it once.
	Finished func(ctx context.Context, er store.Erasure)
}

// DefaultConfig holds the defaults.
func DefaultConfig() Config {
	return Config{Batch: 1000, MaxPasses: 10, Lease: time.Minute, SweepInterval: 30 * time.Second}
}

// Streams holds the events of tenants (bus.Bus): a tenant's erasure
// purges them.
type Streams interface {
	// PurgeTenant removes every message of tenant from every stream.
	PurgeTenant(ctx context.Context, tenant string) error
}

// Eraser erases sessions, scopes and tenants.
type Eraser struct {
	cfg     Config
	store   *store.Store
	streams Streams
	log     *slog.Logger
}

// New builds an Eraser over st. streams may be nil when the process has
// none: its tenant erasures then stop short of finishing
// (ErrStreamsPending).
func New(cfg Config, st *store.Store, streams Streams, log *slog.Logger) *Eraser {
	defaults.Fill(&cfg, DefaultConfig())
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Eraser{cfg: cfg, store: st, streams: streams, log: log}
}

// ErrBusy means an erasure did not finish within its passes because rows
// kept arriving; it stays recorded and the sweep goes on with it.
var ErrBusy = errors.New("erasure: rows kept arriving; the erasure stays recorded and goes on later")

// ErrStreamsPending means a tenant's rows are erased but its events in the
// streams are not, for want of streams: the erasure stays unfinished, and
// the tenant's row with it, until the sweep of a process with streams
// purges them and finishes it.
var ErrStreamsPending = errors.New("erasure: the tenant's rows are erased; its events in the streams wait for a process with a bus (the gateway's erasure sweep) to purge them and finish the erasure")

// EraseSession erases the tenant's session and the threads the proxy kept
// under it, and returns the finished erasure. actor is who asked, for the
// audit log.
func (e *Eraser) EraseSession(ctx context.Context, tenant, session, actor string) (store.Erasure, error) {
	return e.erase(ctx, tenant, store.ErasureSession, session, actor)
}

// EraseScope erases the tenant's memory scope.
func (e *Eraser) EraseScope(ctx context.Context, tenant string, scope memory.Scope, actor string) (store.Erasure, error) {
	return e.erase(ctx, tenant, store.ErasureScope, scope.String(), actor)
}

// EraseTenant erases every row of the tenant, its API keys first, then
// the tenant itself; the audit log keeps the record of it. Its events go
// from the streams before the tenant's row; without streams the erasure
// stops there and is returned as it stands, with ErrStreamsPending. A
// tenant that does not exist is store.ErrUnknownTenant.
func (e *Eraser) EraseTenant(ctx context.Context, tenant, actor string) (store.Erasure, error) {
	if _, err := e.store.TenantSettings(ctx, tenant); err != nil {
		return store.Erasure{}, err
	}
	return e.erase(ctx, tenant, store.ErasureTenant, tenant, actor)
}

func (e *Eraser) erase(ctx context.Context, tenant, kind, target, actor string) (store.Erasure, error) {
	var er store.Erasure
	err := e.store.InTx(ctx, tenant, func(tx *store.Tx) (err error) {
		er, err = tx.StartErasure(ctx, kind, target, actor)
		return err
	})
	if err != nil {
		return store.Erasure{}, fmt.Errorf("erasure: recording the erasure of %s %s: %w", kind, target, err)
	}
	return e.Work(ctx, tenant, er.ID)
}

// Work finishes the tenant's erasure id and returns it finished.
func (e *Eraser) Work(ctx context.Context, tenant string, id int64) (store.Erasure, error) {
	for range e.cfg.MaxPasses {
		er, err := e.take(ctx, tenant, id)
		if errors.Is(err, store.ErrNotFound) || err == nil && er.Finished() {
			return e.read(ctx, tenant, id) // finished by another worker
		}
		if err != nil {
			return store.Erasure{}, err
		}
		removed, err := e.pass(ctx, tenant, er)
		if err != nil {
			return store.Erasure{}, err
		}
		if removed == 0 {
			if er.Kind == store.ErasureTenant {
				if e.streams == nil {
					return er, ErrStreamsPending
				}
				if err := e.streams.PurgeTenant(ctx, tenant); err != nil {
					return store.Erasure{}, fmt.Errorf("erasure %d: purging the streams: %w", er.ID, err)
				}
			}
			return e.finish(ctx, tenant, er)
		}
	}
	return store.Erasure{}, ErrBusy
}

// take marks the erasure as worked on; a session's erasure adds the
// session's threads to those it covers, found while the rows that tie them
// to it still exist.
func (e *Eraser) take(ctx context.Context, tenant string, id int64) (er store.Erasure, err error) {
	err = e.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		if er, err = tx.Erasure(ctx, id); err != nil || er.Finished() {
			return err
		}
		var sessions []string
		if er.Kind == store.ErasureSession {
			threads, err := tx.SessionThreadIDs(ctx, er.Target)
			if err != nil {
				return err
			}
			sessions = append([]string{er.Target}, threads...)
		}
		er, err = tx.TakeErasure(ctx, id, sessions)
		return err
	})
	return er, err
}

// pass goes over every table of the erasure once, in batches, and returns
// how many rows it removed.
func (e *Eraser) pass(ctx context.Context, tenant string, er store.Erasure) (int64, error) {
	target := store.ErasureTarget{Sessions: er.Sessions}
	if er.Kind == store.ErasureScope {
		scope, err := memory.ParseScope(er.Target)
		if err != nil {
			return 0, fmt.Errorf("erasure %d: %w", er.ID, err)
		}
		target.Scope = er.Target
		if target.ScopeFilter, err = json.Marshal(map[string]string{string(scope.Kind): scope.ID}); err != nil {
			return 0, err
		}
	}
	steps := store.ErasureSteps(er.Kind)
	batch := func(tx *store.Tx, step string) (int64, error) {
		return tx.EraseBatch(ctx, er.ID, er.Kind, step, target, e.cfg.Batch)
	}
	if er.Kind == store.ErasureTenant {
		err := e.store.InTx(ctx, tenant, func(tx *store.Tx) (err error) {
			steps, err = tx.TenantErasureSteps(ctx)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("erasure %d: %w", er.ID, err)
		}
		batch = func(tx *store.Tx, table string) (int64, error) {
			return tx.EraseTenantBatch(ctx, er.ID, table, e.cfg.Batch)
		}
	}
	var total int64
	for _, step := range steps {
		for {
			var n int64
			err := e.store.InTx(ctx, tenant, func(tx *store.Tx) (err error) {
				n, err = batch(tx, step)
				return err
			})
			if err != nil {
				return total, fmt.Errorf("erasure %d: %w", er.ID, err)
			}
			total += n
			if n > 0 && e.cfg.AfterBatch != nil {
				if err := e.cfg.AfterBatch(step, n); err != nil {
					return total, err
				}
			}
			if n < int64(e.cfg.Batch) {
				break
			}
		}
	}
	return total, nil
}

func (e *Eraser) finish(ctx context.Context, tenant string, er store.Erasure) (store.Erasure, error) {
	var done store.Erasure
	err := e.store.InTx(ctx, tenant, func(tx *store.Tx) (err error) {
		switch er.Kind {
		case store.ErasureTenant:
			done, err = tx.FinishTenantErasure(ctx, er.ID, ActionEraseTenant)
		case store.ErasureScope:
			done, err = tx.FinishErasure(ctx, er.ID, ActionEraseScope)
		default:
			done, err = tx.FinishErasure(ctx, er.ID, ActionEraseSession)
		}
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return e.read(ctx, tenant, er.ID)
	}
	if err != nil {
		return store.Erasure{}, fmt.Errorf("erasure %d: finishing: %w", er.ID, err)
	}
	e.log.Info("erasure finished", "tenant", tenant, "erasure", done.ID, "kind", done.Kind, "rows", done.Rows())
	if e.cfg.Finished != nil {
		e.cfg.Finished(ctx, done)
	}
	return done, nil
}

func (e *Eraser) read(ctx context.Context, tenant string, id int64) (er store.Erasure, err error) {
	err = e.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		er, err = tx.Erasure(ctx, id)
		return err
	})
	return er, err
}

// Sweep finishes the unfinished erasures no worker took up within the
// lease (their worker stopped: a crash, a client gone) and returns how
// many it finished.
func (e *Eraser) Sweep(ctx context.Context) (int, error) {
	refs, err := e.store.UnfinishedErasures(ctx, time.Now().Add(-e.cfg.Lease), 100)
	if err != nil {
		return 0, err
	}
	done := 0
	for _, ref := range refs {
		if _, err := e.Work(ctx, ref.TenantID, ref.ID); err != nil {
			if ctx.Err() != nil {
				return done, ctx.Err()
			}
			if errors.Is(err, ErrStreamsPending) {
				continue // for a sweep with streams
			}
			e.log.Warn("resuming an erasure failed; the sweep tries again", "tenant", ref.TenantID, "erasure", ref.ID, "err", err)
			continue
		}
		done++
	}
	return done, nil
}

// Run sweeps at start and then every SweepInterval until ctx ends.
func (e *Eraser) Run(ctx context.Context) error {
	t := time.NewTicker(e.cfg.SweepInterval)
	defer t.Stop()
	for {
		if _, err := e.Sweep(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("the erasure sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
