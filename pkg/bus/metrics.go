package bus

import (
	"context"
	"sync"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Dead-letter reason classes, the reason label of mnemos.bus.dead_letters.
const (
	// ReasonPermanent: the handler said the message can never be processed
	// (bad input).
	ReasonPermanent = "permanent"
	// ReasonMaxDeliveries: the message failed on every allowed delivery.
	ReasonMaxDeliveries = "max_deliveries"
)

// DefaultConsumerInfoInterval is how often a runner reads its consumer's
// pending counts for mnemos.bus.consumer.pending.
const DefaultConsumerInfoInterval = 15 * time.Second

// busMetrics are the instruments every runner of a Bus counts with, so that
// every consumer, present and future, is measured the same way.
type busMetrics struct {
	deliveries   metric.Int64Counter
	redeliveries metric.Int64Counter
	deadLetters  metric.Int64Counter
	duration     metric.Float64Histogram
	pendingGauge metric.Int64ObservableGauge
	registration metric.Registration

	mu      sync.Mutex
	runners map[*Runner]struct{}
}

// newBusMetrics makes the instruments. An instrument the meter refuses (an
// SDK's error for a bad name, which these are not) is replaced by a no-op
// one: metrics never stop a consumer.
func newBusMetrics(m metric.Meter) *busMetrics {
	m = defaults.Meter(m)
	fallback := defaults.Meter(nil)
	bm := &busMetrics{runners: map[*Runner]struct{}{}}
	var err error
	if bm.deliveries, err = m.Int64Counter("mnemos.bus.deliveries",
		metric.WithDescription("Deliveries to a consumer, by consumer and result (acked, retried, dead_lettered).")); err != nil {
		bm.deliveries, _ = fallback.Int64Counter("mnemos.bus.deliveries")
	}
	if bm.redeliveries, err = m.Int64Counter("mnemos.bus.redeliveries",
		metric.WithDescription("Deliveries of a message delivered before (num_delivered > 1), by consumer.")); err != nil {
		bm.redeliveries, _ = fallback.Int64Counter("mnemos.bus.redeliveries")
	}
	if bm.deadLetters, err = m.Int64Counter("mnemos.bus.dead_letters",
		metric.WithDescription("Messages sent to the dead-letter stream, by consumer and reason (permanent: bad input; max_deliveries: failed on every allowed delivery).")); err != nil {
		bm.deadLetters, _ = fallback.Int64Counter("mnemos.bus.dead_letters")
	}
	if bm.duration, err = m.Float64Histogram("mnemos.bus.process.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a consumer's handler spent on one delivery, by consumer and result (acked, retried, dead_lettered).")); err != nil {
		bm.duration, _ = fallback.Float64Histogram("mnemos.bus.process.duration")
	}
	if bm.pendingGauge, err = m.Int64ObservableGauge("mnemos.bus.consumer.pending",
		metric.WithDescription("Messages a durable consumer has not settled yet: not yet delivered (num_pending) plus delivered and unacknowledged (num_ack_pending), by consumer and stream. Every instance of a consumer reports the same number.")); err != nil {
		return bm
	}
	bm.registration, err = m.RegisterCallback(bm.observe, bm.pendingGauge)
	if err != nil {
		bm.registration = nil
	}
	return bm
}

// observe reports the latest pending count of every running consumer, once
// per consumer even when this process runs it twice.
func (bm *busMetrics) observe(_ context.Context, o metric.Observer) error {
	bm.mu.Lock()
	defer bm.mu.Unlock()
	seen := map[[2]string]bool{}
	for r := range bm.runners {
		n := r.pending.Load()
		key := [2]string{r.stream, r.spec.Durable}
		if n < 0 || seen[key] {
			continue // not read yet
		}
		seen[key] = true
		o.ObserveInt64(bm.pendingGauge, n, metric.WithAttributes(
			attribute.String("consumer", r.spec.Durable), attribute.String("stream", r.stream)))
	}
	return nil
}

func (bm *busMetrics) add(r *Runner) {
	bm.mu.Lock()
	bm.runners[r] = struct{}{}
	bm.mu.Unlock()
}

func (bm *busMetrics) remove(r *Runner) {
	bm.mu.Lock()
	delete(bm.runners, r)
	bm.mu.Unlock()
}

// close stops observing the gauge.
func (bm *busMetrics) close() {
	if bm.registration != nil {
		_ = bm.registration.Unregister() // the provider is shut down already: nothing to stop
	}
}

// delivery counts one settled delivery.
func (bm *busMetrics) delivery(ctx context.Context, out Outcome, reason string) {
	consumer := attribute.String("consumer", out.Consumer)
	bm.deliveries.Add(ctx, 1, metric.WithAttributes(consumer, attribute.String("result", string(out.Result))))
	if out.NumDelivered > 1 {
		bm.redeliveries.Add(ctx, 1, metric.WithAttributes(consumer))
	}
	if out.Result == DeadLettered && out.SettleErr == nil {
		bm.deadLetters.Add(ctx, 1, metric.WithAttributes(consumer, attribute.String("reason", reason)))
	}
	bm.duration.Record(ctx, out.Duration.Seconds(), metric.WithAttributes(consumer, attribute.String("result", string(out.Result))))
}

// watchPending reads the consumer's info now and every interval until the
// runner stops, for the pending gauge.
func (r *Runner) watchPending(interval time.Duration) {
	r.b.metrics.add(r)
	defer r.b.metrics.remove(r)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(r.ctx, min(interval, 10*time.Second))
		info, err := r.cons.Info(ctx)
		cancel()
		switch {
		case err == nil:
			r.pending.Store(int64(info.NumPending) + int64(info.NumAckPending))
		case r.ctx.Err() == nil:
			r.log.Debug("bus: reading consumer info", "err", err)
		}
		select {
		case <-r.done:
			return
		case <-r.ctx.Done():
			return
		case <-tick.C:
		}
	}
}
