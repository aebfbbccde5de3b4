// Package compactor is the compactor service (see docs/compaction.md). On each
// compact.requested it compacts the session, one compaction at a time per
// session, cheapest first: the session's notes as the summary (no model
// call), then an LLM summary, then an extractive summary that needs no
// model and never fails. It records the compaction, makes it the session's
// context and token baseline, and announces compact.completed or
// compact.failed through the outbox.
package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// Config of the compactor target.
type Config struct {
	// Workers compact sessions concurrently (one compaction per session at a time).
	Workers int
	// Lease is how long a compaction's claim lasts without renewal; a worker
	// renews it while it works, so a crashed worker's claim runs out.
	Lease time.Duration
	// MaxDeliver bounds redeliveries of a request that keeps failing.
	MaxDeliver int
	// NotesPoll is how often a compaction waiting for the session's notes
	// looks again (the tenant's settings bound the wait).
	NotesPoll time.Duration
	// Slots bounds the compactions doing their own work at once in this
	// process (slots.go): half its cores, at least one. A compaction
	// waiting for a model's answer holds none.
	Slots int
}

// DefaultConfig holds the target's defaults.
func DefaultConfig() Config {
	return Config{Workers: 4, Lease: 2 * time.Minute, MaxDeliver: 8, NotesPoll: 100 * time.Millisecond, Slots: defaultSlots()}
}

// Service is the compactor.
type Service struct {
	cfg      Config
	store    *store.Store
	bus      *bus.Bus
	settings *tenantcfg.Cache
	provider llm.Provider
	slots    cpu.Heavy
	log      *slog.Logger
	now      func() time.Time
	metrics  serviceMetrics
}

// New builds the compactor. provider makes the LLM summaries; meter may be nil.
func New(cfg Config, st *store.Store, b *bus.Bus, settings *tenantcfg.Cache, provider llm.Provider, log *slog.Logger, meter metric.Meter) (*Service, error) {
	meter = defaults.Meter(meter)
	m, err := newMetrics(meter)
	if err != nil {
		return nil, fmt.Errorf("compactor.New: %w", err)
	}
	defaults.Fill(&cfg, DefaultConfig())
	return &Service{cfg: cfg, store: st, bus: b, settings: settings, provider: model(provider), slots: cpu.NewHeavy(cfg.Slots),
		log: log, now: time.Now, metrics: m}, nil
}

// Run consumes compaction requests until ctx ends, then drains in-flight work.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("compactor consuming", "subject", bus.KindCompactRequested+".>", "workers", s.cfg.Workers, "provider", s.provider.Name())
	return s.bus.Serve(ctx, bus.Service{
		Name: "compactor",
		Consumers: []bus.Consumer{{
			Spec: bus.ConsumerSpec{
				Stream:        bus.StreamEvents,
				Durable:       "compactor",
				FilterSubject: bus.KindCompactRequested + ".>",
				Workers:       s.cfg.Workers,
				MaxDeliver:    s.cfg.MaxDeliver,
				AckWait:       s.cfg.Lease,
				Classify:      bus.TransientIf(store.IsUnavailable),
			},
			Handler: events.Handler(s.bus, s.handle),
		}},
	})
}

// handle runs the compaction one compact.requested message asks for.
func (s *Service) handle(ctx context.Context, m bus.Message, req events.CompactRequested) error {
	tenant, session := req.Address()
	id := req.CompactionID
	if id == "" {
		id = AutoCompactionID(tenant, session, req.Request)
		err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			_, err := tx.RequestCompaction(ctx, store.Compaction{ID: id, SessionID: session, Request: req.Request, Trigger: events.TriggerAuto})
			return err
		})
		if err != nil {
			return err
		}
	}
	err := s.Compact(ctx, tenant, session, id, m.InProgress)
	if errors.Is(err, store.ErrCompactionRunning) {
		return bus.Transient(err) // its turn comes when the running one ends
	}
	if err != nil && m.NumDelivered >= s.cfg.MaxDeliver && !store.IsUnavailable(err) {
		// The last delivery: end the compaction, or the session would wait
		// for it forever and never be compacted again.
		if aerr := s.abandon(ctx, tenant, session, id, err); aerr != nil {
			return errors.Join(err, aerr)
		}
		return bus.Permanent(err)
	}
	return err
}

// abandon ends a compaction that kept failing, clears the session's
// compaction in flight and announces compact.failed.
func (s *Service) abandon(ctx context.Context, tenant, session, id string, cause error) error {
	var j job
	err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		c, err := tx.Compaction(ctx, id)
		if err != nil {
			return err
		}
		j.c = c
		j.state.Session, err = tx.Session(ctx, session)
		return err
	})
	if err != nil {
		return fmt.Errorf("compactor: abandon %s: %w", id, err)
	}
	return s.end(ctx, j, store.CompactionFailed, "gave up after repeated errors: "+cause.Error())
}

// AutoCompactionID names the compaction of an automatic request, so a
// redelivered request finds the compaction it made.
func AutoCompactionID(tenant, session string, request int64) string {
	return events.AutoCompactionID(tenant, session, request)
}
