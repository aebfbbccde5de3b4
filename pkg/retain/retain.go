// Package retain enforces each tenant's retention settings (tenantcfg
// Retention; docs/tenants.md, Retention): a sweep erases the sessions
// idle past sessions_idle_days, deletes the offloaded tool results older
// than tool_results_days and the memory revisions older than
// memory_revisions_days beyond each memory's last memory_revisions_keep.
//
// A sweep reads, across tenants, those whose settings name a retention
// section, then works on each under the tenant's retention lock (a
// session-level advisory lock, store.LockRetention): of two sweepers at
// once, one works on a tenant and the other passes it by, so nothing is
// done or counted twice. Every statement removes at most Config.Batch
// rows in a short transaction of its own and skips rows another
// transaction holds. A session is erased through pkg/erasure, as
// DELETE /v1/sessions/{id} erases it, with Actor in its audit record.
package retain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// Actor is who the audit log names for what retention erases.
const Actor = "retention"

// The kinds of what retention deletes, as the metric and Result name them.
const (
	KindSessions        = "sessions"
	KindToolResults     = "tool_results"
	KindMemoryRevisions = "memory_revisions"
)

// Config of a Sweeper.
type Config struct {
	// Interval is how often Run sweeps.
	Interval time.Duration
	// Batch is the most rows one statement deletes.
	Batch int
	// MaxBatches bounds the batches of one rule for one tenant in one
	// sweep, so that one tenant's backlog does not hold up the others; the
	// next sweep goes on with it.
	MaxBatches int
	// Sessions is the most sessions of one tenant one sweep erases.
	Sessions int
	// Now is the clock (time.Now when nil); tests set it.
	Now func() time.Time
}

// DefaultConfig holds the defaults.
func DefaultConfig() Config {
	return Config{Interval: 5 * time.Minute, Batch: 1000, MaxBatches: 100, Sessions: 100, Now: time.Now}
}

// Sweeper enforces retention.
type Sweeper struct {
	cfg      Config
	store    *store.Store
	settings *tenantcfg.Cache
	eraser   *erasure.Eraser
	log      *slog.Logger

	deleted  metric.Int64Counter
	failures metric.Int64Counter
	duration metric.Float64Histogram
}

// New builds a Sweeper; eraser erases the idle sessions. meter may be nil.
func New(cfg Config, st *store.Store, settings *tenantcfg.Cache, eraser *erasure.Eraser, log *slog.Logger, meter metric.Meter) (*Sweeper, error) {
	defaults.Fill(&cfg, DefaultConfig())
	if cfg.Batch > 1000 {
		return nil, fmt.Errorf("retain.New: a batch of %d rows: at most 1000", cfg.Batch)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sweeper{cfg: cfg, store: st, settings: settings, eraser: eraser, log: log}
	meter = defaults.Meter(meter)
	var err error
	if s.deleted, err = meter.Int64Counter("mnemos.retention.deleted",
		metric.WithDescription("rows retention deleted, by kind: sessions (erased whole), tool_results, memory_revisions")); err != nil {
		return nil, fmt.Errorf("retain.New: %w", err)
	}
	if s.failures, err = meter.Int64Counter("mnemos.retention.failures",
		metric.WithDescription("retention work that failed and is tried again next sweep, by kind (a rule, or settings and tenants)")); err != nil {
		return nil, fmt.Errorf("retain.New: %w", err)
	}
	if s.duration, err = meter.Float64Histogram("mnemos.retention.sweep.duration", metric.WithUnit("s"),
		metric.WithDescription("how long one retention sweep over every tenant took")); err != nil {
		return nil, fmt.Errorf("retain.New: %w", err)
	}
	return s, nil
}

// Result is what one sweep did.
type Result struct {
	// Tenants are the tenants with a rule on; Busy those another sweeper
	// was working on, passed by.
	Tenants, Busy int
	// Deleted counts what was deleted by kind: sessions whose erasure
	// finished in this sweep, tool results and memory revisions deleted.
	Deleted map[string]int64
	// Failed counts the failures, each logged.
	Failed int
}

// Sweep goes once over every tenant with retention on. It returns an
// error only when the tenants cannot be listed; a tenant's failure is
// logged and counted, and the sweep goes on with the others.
func (s *Sweeper) Sweep(ctx context.Context) (Result, error) {
	start := time.Now()
	res := Result{Deleted: map[string]int64{}}
	defer func() { s.duration.Record(context.WithoutCancel(ctx), time.Since(start).Seconds()) }()
	tenants, err := s.store.RetentionTenants(ctx)
	if err != nil {
		s.fail(ctx, &res, "tenants", "", err)
		return res, err
	}
	for _, tenant := range tenants {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		set, err := s.settings.For(ctx, tenant)
		if err != nil {
			s.fail(ctx, &res, "settings", tenant, err)
			continue
		}
		if !set.Retention.On() {
			continue
		}
		res.Tenants++
		unlock, ok, err := s.store.LockRetention(ctx, tenant)
		if err != nil {
			s.fail(ctx, &res, "lock", tenant, err)
			continue
		}
		if !ok {
			res.Busy++
			continue
		}
		s.tenant(ctx, &res, tenant, set.Retention)
		unlock()
	}
	return res, nil
}

// tenant applies the tenant's rules, each on its own: one failing does not
// stop the others.
func (s *Sweeper) tenant(ctx context.Context, res *Result, tenant string, r tenantcfg.Retention) {
	now := s.cfg.Now()
	if r.ToolResultsDays > 0 {
		before := now.Add(-days(r.ToolResultsDays))
		s.batches(ctx, res, tenant, KindToolResults, func(tx *store.Tx) (int64, error) {
			return tx.ExpireToolResults(ctx, before, s.cfg.Batch)
		})
	}
	if r.MemoryRevisionsDays > 0 {
		before := now.Add(-days(r.MemoryRevisionsDays))
		s.batches(ctx, res, tenant, KindMemoryRevisions, func(tx *store.Tx) (int64, error) {
			return tx.ExpireMemoryRevisions(ctx, before, r.MemoryRevisionsKeep, s.cfg.Batch)
		})
	}
	if r.SessionsIdleDays > 0 {
		s.sessions(ctx, res, tenant, now.Add(-days(r.SessionsIdleDays)))
	}
}

func days(n int) time.Duration { return time.Duration(n) * 24 * time.Hour }

// batches runs batch, each in its own transaction, until one deletes less
// than a full batch or MaxBatches ran.
func (s *Sweeper) batches(ctx context.Context, res *Result, tenant, kind string, batch func(*store.Tx) (int64, error)) {
	for range s.cfg.MaxBatches {
		var n int64
		err := s.store.InTx(ctx, tenant, func(tx *store.Tx) (err error) {
			n, err = batch(tx)
			return err
		})
		if err != nil {
			s.fail(ctx, res, kind, tenant, err)
			return
		}
		s.count(ctx, res, kind, n)
		if n < int64(s.cfg.Batch) {
			return
		}
	}
}

// sessions erases the tenant's sessions idle since before, at most
// Config.Sessions of them. Each is checked again, under its row's lock,
// as its erasure is recorded: a turn that came since keeps it.
func (s *Sweeper) sessions(ctx context.Context, res *Result, tenant string, before time.Time) {
	var ids []string
	err := s.store.InTx(ctx, tenant, func(tx *store.Tx) (err error) {
		ids, err = tx.IdleSessions(ctx, before, s.cfg.Sessions)
		return err
	})
	if err != nil {
		s.fail(ctx, res, KindSessions, tenant, err)
		return
	}
	for _, id := range ids {
		var er store.Erasure
		err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			idle, err := tx.SessionIdle(ctx, id, before)
			if err != nil || !idle {
				return err
			}
			er, err = tx.StartErasure(ctx, store.ErasureSession, id, Actor)
			return err
		})
		if err != nil {
			s.fail(ctx, res, KindSessions, tenant, fmt.Errorf("session %s: %w", id, err))
			continue
		}
		if er.ID == 0 {
			continue // active again
		}
		// The metric counts the session when its erasure finishes
		// (Finished), here or in whichever worker finishes it.
		done, err := s.eraser.Work(ctx, tenant, er.ID)
		if errors.Is(err, erasure.ErrBusy) {
			s.log.Info("a session erased by retention keeps receiving rows; the erasure sweep finishes it", "tenant", tenant, "session", id, "erasure", er.ID)
			continue
		}
		if err != nil {
			s.fail(ctx, res, KindSessions, tenant, fmt.Errorf("session %s: %w", id, err))
			continue
		}
		if done.Actor == Actor {
			res.Deleted[KindSessions]++
		}
	}
}

// Finished counts a session erased by retention: the process's Eraser
// calls it (erasure.Config.Finished) once per erasure it finished, so a
// session is counted once, by the process that finished its erasure,
// whether retention's sweep or the erasure sweep after a crash. An
// erasure someone else asked for, which retention joined, is theirs.
func (s *Sweeper) Finished(ctx context.Context, er store.Erasure) {
	if er.Kind == store.ErasureSession && er.Actor == Actor {
		s.count(ctx, nil, KindSessions, 1)
	}
}

func (s *Sweeper) count(ctx context.Context, res *Result, kind string, n int64) {
	if n == 0 {
		return
	}
	if res != nil { // nil: counted in the metric alone (Finished)
		res.Deleted[kind] += n
	}
	s.deleted.Add(context.WithoutCancel(ctx), n, metric.WithAttributes(attribute.String("kind", kind)))
}

func (s *Sweeper) fail(ctx context.Context, res *Result, kind, tenant string, err error) {
	if ctx.Err() != nil {
		return // stopping, not failing
	}
	res.Failed++
	s.failures.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("kind", kind)))
	s.log.Warn("retention failed; the next sweep tries again", "kind", kind, "tenant", tenant, "err", err)
}

// Run sweeps every Interval, the first time one Interval after it starts,
// until ctx ends.
func (s *Sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		res, err := s.Sweep(ctx)
		if err == nil && (len(res.Deleted) > 0 || res.Failed > 0) {
			s.log.Info("retention sweep", "tenants", res.Tenants, "busy", res.Busy, "deleted", res.Deleted, "failed", res.Failed)
		}
	}
}
