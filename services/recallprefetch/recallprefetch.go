// Package recallprefetch runs recall on ingest (see docs/memory.md): on each
// turn.accounted that adds a user message of more than one word, it recalls
// the memories that bear on it and records them, so the context
// (GET /v1/sessions/{id}/context) shows them beside that message. It runs in
// the extractor target, next to the other long-term memory work, on its own
// durable consumer "recall".
package recallprefetch

import (
	"context"
	"log/slog"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Durable is the consumer's name.
const Durable = "recall"

// Config of the prefetch.
type Config struct {
	// Workers handle turn.accounted events concurrently.
	Workers int
	// MaxDeliver bounds redeliveries of an event that keeps failing.
	MaxDeliver int
	// Timeout bounds one prefetch: a selection that takes longer is of no
	// use to the message it was for.
	Timeout time.Duration
}

// DefaultConfig holds the defaults.
func DefaultConfig() Config {
	return Config{Workers: 4, MaxDeliver: 8, Timeout: time.Minute}
}

// Service is the recall prefetch.
type Service struct {
	cfg    Config
	bus    *bus.Bus
	recall *recall.Recaller
	log    *slog.Logger
}

// New builds the service; r runs the recalls (and counts them; the bus
// counts the deliveries).
func New(cfg Config, b *bus.Bus, r *recall.Recaller, log *slog.Logger) (*Service, error) {
	defaults.Fill(&cfg, DefaultConfig())
	return &Service{cfg: cfg, bus: b, recall: r, log: log}, nil
}

// Run consumes turn.accounted events until ctx ends, then drains the
// prefetches in flight.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("recall prefetch consuming", "subject", bus.KindTurnAccounted+".>", "workers", s.cfg.Workers, "provider", s.recall.Provider())
	return s.bus.Serve(ctx, bus.Service{
		Name: "recall",
		Consumers: []bus.Consumer{{
			Spec: bus.ConsumerSpec{
				Stream:        bus.StreamEvents,
				Durable:       Durable,
				FilterSubject: bus.KindTurnAccounted + ".>",
				Workers:       s.cfg.Workers,
				MaxDeliver:    s.cfg.MaxDeliver,
				AckWait:       s.cfg.Timeout + 30*time.Second,
				Classify:      bus.TransientIf(store.IsUnavailable),
			},
			Handler: events.Handler(s.bus, s.handle),
		}},
		Drain: s.cfg.Timeout + 10*time.Second,
	})
}

// handle prefetches the memories to show beside a turn's new user message.
func (s *Service) handle(ctx context.Context, _ bus.Message, ev events.TurnAccounted) error {
	tenant, session := ev.Address()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	res, err := s.recall.Prefetch(ctx, recall.Turn{
		Tenant: tenant, SessionID: session, Seq: ev.Seq, MemoryScope: ev.MemoryScope, MessageUUIDs: ev.MessageUUIDs,
	})
	switch {
	case err == nil:
		if res.Outcome == recall.OutcomeSurfaced {
			s.log.Debug("recall prefetched", "tenant", tenant, "session", session, "seq", ev.Seq, "memories", len(res.Memories))
		}
		return nil
	case res.Outcome == recall.OutcomeFailed:
		// Recorded as showing nothing: a retry would come too late to help.
		s.log.Warn("recall prefetch: the selector failed; nothing is shown beside the message", "tenant", tenant, "session", session, "seq", ev.Seq, "err", err)
		return nil
	default:
		return err
	}
}
