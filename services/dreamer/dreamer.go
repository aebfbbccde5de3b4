// Package dreamer is the dreamer service (see docs/dreaming.md): the scheduled
// consolidation of each scope's long-term memories across sessions.
//
// A scan looks at every scope holding memories, of every tenant, and runs
// the gates cheapest first, stopping at the first that fails: the tenant
// enabled it; 24 hours since the scope's last consolidation; its sessions
// not counted in the last 10 minutes; 5 sessions naming the scope active
// since the last consolidation; the scope's lease free (or its holder's run
// out). A scope that passes is consolidated by a bounded tool loop — the
// model, or the builtin consolidation — whose changes are staged, then
// applied in one transaction when they delete or rewrite no more than the
// tenant's share of the scope's memories, or else kept as a proposal for
// approval. Only a consolidation that ends moves the scope's consolidation
// time, so one that fails, is killed or dies is tried again by a later
// scan. Operators ask for one at once through dream.requested (the API's
// POST /v1/scopes/{scope}/dream), and kill a running one from any process:
// the run looks at its dream row with every heartbeat.
package dreamer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// Config of the dreamer target.
type Config struct {
	// ScanEvery is how often the scan looks at the scopes (each scope's
	// sessions are counted at most every dreaming.scan_interval_seconds).
	ScanEvery time.Duration
	// Heartbeat is how often a running dream renews its lease and looks
	// for a kill request: how promptly a kill takes.
	Heartbeat time.Duration
	// Workers bounds the scheduled dreams this instance runs at once.
	Workers int
	// PageSize is how many scopes the scan reads at a time.
	PageSize int
	// Holder names this instance in the leases it takes ("" makes one
	// from the host name and a random suffix).
	Holder string
	// MaxDeliver bounds redeliveries of a dream.requested that keeps failing.
	MaxDeliver int
	// MaxTokens bounds each model answer.
	MaxTokens int64
}

// DefaultConfig holds the target's defaults.
func DefaultConfig() Config {
	return Config{
		ScanEvery:  time.Minute,
		Heartbeat:  2 * time.Second,
		Workers:    2,
		PageSize:   500,
		MaxDeliver: 8,
		MaxTokens:  8192,
	}
}

// Service is the dreamer service.
type Service struct {
	cfg      Config
	store    *store.Store
	memories *memory.Store
	bus      *bus.Bus
	settings *tenantcfg.Cache
	provider llm.Provider
	log      *slog.Logger
	now      func() time.Time
	metrics  serviceMetrics
	gates    *Gates
	slots    chan struct{}
	runs     sync.WaitGroup
}

// Options are the service's parts a test replaces.
type Options struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Sessions and Leases are what the gates ask (Postgres when nil).
	Sessions Sessions
	Leases   Leases
}

// New builds the service. provider runs the consolidation (llm.TaskDreaming);
// meter may be nil.
func New(cfg Config, st *store.Store, b *bus.Bus, settings *tenantcfg.Cache, provider llm.Provider, log *slog.Logger, meter metric.Meter, opts Options) (*Service, error) {
	meter = defaults.Meter(meter)
	m, err := newMetrics(meter)
	if err != nil {
		return nil, fmt.Errorf("dreamer.New: %w", err)
	}
	defaults.Fill(&cfg, DefaultConfig())
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		cfg.Holder = fmt.Sprintf("%s-%s", host, uuid.NewString()[:8])
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	memories, err := memory.NewStore(st, meter, memory.Options{Now: now, Limits: settings.MemoryLimits})
	if err != nil {
		return nil, fmt.Errorf("dreamer.New: %w", err)
	}
	s := &Service{
		cfg: cfg, store: st, memories: memories, bus: b, settings: settings, provider: provider, log: log,
		now: func() time.Time { return now().UTC().Truncate(time.Microsecond) }, metrics: m,
		slots: make(chan struct{}, cfg.Workers),
	}
	pg := PG{DB: st}
	s.gates = &Gates{
		Settings: s.dreaming, Now: s.now, Sessions: pg, Leases: pg, Holder: cfg.Holder, NewID: uuid.NewString,
		Count: s.metrics.gate,
	}
	if opts.Sessions != nil {
		s.gates.Sessions = opts.Sessions
	}
	if opts.Leases != nil {
		s.gates.Leases = opts.Leases
	}
	return s, nil
}

// Holder names this instance in leases.
func (s *Service) Holder() string { return s.cfg.Holder }

// Gates are the service's gates.
func (s *Service) Gates() *Gates { return s.gates }

func (s *Service) dreaming(ctx context.Context, tenant string) (tenantcfg.Dreaming, error) {
	set, err := s.settings.For(ctx, tenant)
	return set.Dreaming, err
}

// Run scans every ScanEvery and runs the dreams operators request, until
// ctx ends; then the running dreams stop (each ends failed, applying
// nothing, and frees its scope) and Run returns.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("dreamer scanning", "every", s.cfg.ScanEvery, "workers", s.cfg.Workers, "holder", s.cfg.Holder, "provider", s.provider.Name())
	return s.bus.Serve(ctx, bus.Service{
		Name: "dreamer",
		Consumers: []bus.Consumer{{
			Spec: bus.ConsumerSpec{
				Stream:        bus.StreamEvents,
				Durable:       "dreamer",
				FilterSubject: bus.KindDreamRequested + ".>",
				Workers:       1,
				MaxDeliver:    s.cfg.MaxDeliver,
				AckWait:       max(30*time.Second, 5*s.cfg.Heartbeat),
				Classify:      bus.TransientIf(store.IsUnavailable),
			},
			Handler: events.Handler(s.bus, s.handle),
		}},
		Loops: []func(context.Context){s.scanLoop},
		Wait:  func(context.Context) { s.runs.Wait() },
	})
}

// scanLoop scans at once, then every ScanEvery, until ctx ends.
func (s *Service) scanLoop(ctx context.Context) {
	tick := time.NewTicker(s.cfg.ScanEvery)
	defer tick.Stop()
	for {
		if err := s.Scan(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("dream scan failed; the next tick retries", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Scan looks at every scope holding memories once: each that passes the
// gates starts a dream, while this instance has a free worker.
func (s *Service) Scan(ctx context.Context) error {
	afterTenant, afterScope := "", ""
	for {
		page, err := s.store.DreamCandidates(ctx, afterTenant, afterScope, s.cfg.PageSize)
		if err != nil {
			return err
		}
		for _, r := range page {
			sc, err := memory.ParseScope(r.Scope)
			if err != nil {
				continue // written through pkg/memory, so never
			}
			select {
			case s.slots <- struct{}{}:
			default:
				return nil // every worker is busy: the next scan goes on
			}
			adm, err := s.gates.Check(ctx, Candidate{Tenant: r.TenantID, Scope: sc, LastConsolidatedAt: r.LastConsolidatedAt, LastScanAt: r.LastScanAt})
			if err != nil && ctx.Err() == nil {
				s.log.Warn("dream gate could not be checked", "tenant", r.TenantID, "scope", r.Scope, "err", err)
			}
			if adm.Failed != "" || !adm.Lease.Taken {
				<-s.slots
				continue
			}
			s.runs.Go(func() {
				defer func() { <-s.slots }()
				s.run(ctx, adm.Lease, nil)
			})
		}
		if len(page) < s.cfg.PageSize {
			return nil
		}
		afterTenant, afterScope = page[len(page)-1].TenantID, page[len(page)-1].Scope
	}
}

// handle runs a requested dream (dream.requested): the time and session
// gates do not apply; the tenant must have dreaming enabled and the scope's
// lease must be free, or the dream ends failed saying why.
func (s *Service) handle(ctx context.Context, m bus.Message, req events.Dream) error {
	tenant, id := req.Address()
	var d store.Dream
	err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		d, err = tx.Dream(ctx, id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return bus.Permanent(fmt.Errorf("dream.requested: tenant %s has no dream %s", tenant, id))
	}
	if err != nil {
		return err
	}
	if dream.Status(d.Status) != dream.StatusRequested {
		return nil // killed before it started, or started already
	}
	sc, err := memory.ParseScope(d.Scope)
	if err != nil {
		return bus.Permanent(fmt.Errorf("dream %s: %w", id, err))
	}
	set, err := s.dreaming(ctx, tenant)
	if err != nil {
		return fmt.Errorf("dreamer: settings of %s: %w", tenant, err)
	}
	if !set.Enabled {
		return s.refuse(ctx, tenant, d, "dreaming is disabled for the tenant")
	}
	l, err := s.gates.Leases.Take(ctx, LeaseRequest{
		Tenant: tenant, Scope: sc, Holder: s.cfg.Holder, DreamID: id, Trigger: dream.TriggerManual, Now: s.now(), Stale: set.LeaseStale(),
	})
	switch {
	case err != nil:
		return err
	case l.NotWaiting:
		return nil
	case !l.Taken:
		return s.refuse(ctx, tenant, d, fmt.Sprintf("dream %s holds the scope's lease", l.HeldBy))
	}
	s.runs.Add(1)
	defer s.runs.Done()
	s.run(ctx, l, m.InProgress)
	return nil
}

// refuse ends a requested dream that cannot run, saying why.
func (s *Service) refuse(ctx context.Context, tenant string, d store.Dream, reason string) error {
	now := s.now()
	err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		err := tx.FinishDream(ctx, d.DreamID, store.DreamOutcome{Status: string(dream.StatusFailed), DreamWork: store.DreamWork{Error: reason, LLMProvider: s.provider.Name()}, At: now})
		if errors.Is(err, store.ErrNotFound) {
			return nil // it ended meanwhile
		}
		if err != nil {
			return err
		}
		return dream.Enqueue(ctx, tx, bus.KindDreamFailed, events.Dream{DreamID: d.DreamID, Scope: d.Scope, Trigger: d.Trigger, Reason: reason, At: now})
	})
	if err == nil {
		s.metrics.dream(ctx, string(dream.StatusFailed))
	}
	return err
}
