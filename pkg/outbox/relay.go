// Package outbox publishes what committed transactions wrote to the outbox
// table: "write, then emit" without ever publishing inside a transaction.
package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Config tunes the relay.
type Config struct {
	// Batch is the most rows one round claims.
	Batch int32
	// Poll is how often the relay looks without a notification (a safety net
	// for a lost LISTEN connection).
	Poll time.Duration
	// Meter, when set, reports the rows waiting to be published
	// (mnemos.outbox.pending), counted every BacklogInterval.
	Meter           metric.Meter
	BacklogInterval time.Duration
	// AfterPublish, when set, is called after a batch was published and
	// before its rows are deleted: the point where a crash has the batch
	// published again. It is a test hook (pkg/faults); production leaves it nil.
	AfterPublish func()
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Batch: 256, Poll: time.Second, BacklogInterval: 15 * time.Second}
}

// Relay moves outbox rows to the bus.
type Relay struct {
	cfg   Config
	store *store.Store
	bus   *bus.Bus
	log   *slog.Logger
}

// New builds a relay.
func New(cfg Config, st *store.Store, b *bus.Bus, log *slog.Logger) *Relay {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultConfig().Batch
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultConfig().Poll
	}
	if cfg.BacklogInterval <= 0 {
		cfg.BacklogInterval = DefaultConfig().BacklogInterval
	}
	return &Relay{cfg: cfg, store: st, bus: b, log: log}
}

// Run relays until ctx ends. Wake-ups come from Postgres NOTIFY, with a poll as
// a fallback; a failed round is retried after a pause.
func (r *Relay) Run(ctx context.Context) error {
	if r.cfg.Meter != nil {
		stop, err := r.reportBacklog(ctx)
		if err != nil {
			return err
		}
		defer stop()
	}
	wake := make(chan struct{}, 1)
	go r.listen(ctx, wake)
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	for {
		for {
			n, err := r.RelayOnce(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				r.log.Warn("outbox relay round failed; retrying", "err", err)
				break
			}
			if n < int(r.cfg.Batch) {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-tick.C:
		}
	}
}

func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	for ctx.Err() == nil {
		err := r.store.ListenOutbox(ctx, wake)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("outbox LISTEN connection lost; polling until it is back", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// RelayOnce publishes one batch and reports how many rows it published.
func (r *Relay) RelayOnce(ctx context.Context) (int, error) {
	return r.store.RelayOutbox(ctx, r.cfg.Batch, r.publish)
}

func (r *Relay) publish(ctx context.Context, evs []store.OutboxEvent) ([]int64, error) {
	msgs := make([]bus.Outgoing, len(evs))
	for i, e := range evs {
		hdr := nats.Header{}
		for k, v := range e.Headers {
			hdr.Set(k, v)
		}
		msgs[i] = bus.Outgoing{
			// The transaction that wrote the event is the publish's parent span.
			Ctx:     propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(e.Headers)),
			Subject: r.bus.Prefix(e.Subject),
			MsgID:   bus.MsgID(e.TenantID, e.MsgID), // ids are unique per tenant, deduplicated per stream
			Data:    e.Payload,
			Header:  hdr,
		}
	}
	stored, err := r.bus.PublishBatch(ctx, msgs)
	done := make([]int64, 0, len(evs))
	for i, ok := range stored {
		if ok {
			done = append(done, evs[i].ID)
		}
	}
	if len(done) > 0 && r.cfg.AfterPublish != nil {
		r.cfg.AfterPublish()
	}
	return done, err
}

// reportBacklog counts the unpublished rows now and every BacklogInterval
// for the mnemos.outbox.pending gauge, until the returned stop is called.
func (r *Relay) reportBacklog(ctx context.Context) (stop func(), err error) {
	var latest atomic.Int64
	latest.Store(-1)
	gauge, err := r.cfg.Meter.Int64ObservableGauge("mnemos.outbox.pending",
		metric.WithDescription("Outbox rows written and not yet published (every relay reports the same number)."))
	if err != nil {
		return nil, fmt.Errorf("outbox: backlog gauge: %w", err)
	}
	reg, err := r.cfg.Meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if n := latest.Load(); n >= 0 {
			o.ObserveInt64(gauge, n)
		}
		return nil
	}, gauge)
	if err != nil {
		return nil, fmt.Errorf("outbox: backlog gauge: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(r.cfg.BacklogInterval)
		defer tick.Stop()
		for {
			n, err := r.store.OutboxBacklog(ctx)
			switch {
			case err == nil:
				latest.Store(n)
			case ctx.Err() == nil:
				r.log.Warn("outbox: counting the backlog failed; next period retries", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		_ = reg.Unregister() // only fails on a provider already shut down
	}, nil
}
