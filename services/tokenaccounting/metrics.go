package tokenaccounting

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

type serviceMetrics struct {
	turns    metric.Int64Counter
	rejects  metric.Int64Counter
	latency  metric.Float64Histogram
	compacts metric.Int64Counter
	offloads metric.Int64Counter
	offChars metric.Int64Counter
	gapsSeqs metric.Int64Counter
	stale    metric.Int64Counter
	thrash   metric.Int64Counter
	prefix   metric.Int64Counter
	batch    metric.Int64Histogram
}

func newMetrics(m metric.Meter) (serviceMetrics, error) {
	var sm serviceMetrics
	var err error
	if sm.turns, err = m.Int64Counter("mnemos.turns.accounted", metric.WithDescription("Turn events handled by the accountant, by outcome; a turn kept waiting for its predecessor counts as waiting, then as applied when it applies.")); err != nil {
		return sm, err
	}
	if sm.rejects, err = m.Int64Counter("mnemos.turns.rejected", metric.WithDescription("Turn events refused, by reason.")); err != nil {
		return sm, err
	}
	if sm.latency, err = m.Float64Histogram("mnemos.accounting.duration", metric.WithUnit("s"), metric.WithDescription("Time to account one turn event.")); err != nil {
		return sm, err
	}
	if sm.compacts, err = m.Int64Counter("mnemos.compactions.requested", metric.WithDescription("Automatic compactions requested.")); err != nil {
		return sm, err
	}
	if sm.offloads, err = m.Int64Counter("mnemos.tool_results.offloaded", metric.WithDescription("Tool results stored outside the context.")); err != nil {
		return sm, err
	}
	if sm.offChars, err = m.Int64Counter("mnemos.tool_results.offloaded_chars", metric.WithDescription("Characters of tool results stored outside the context.")); err != nil {
		return sm, err
	}
	if sm.gapsSeqs, err = m.Int64Counter("mnemos.turns.gap_skipped", metric.WithDescription("Turn seqs given up on after the gap timeout.")); err != nil {
		return sm, err
	}
	if sm.stale, err = m.Int64Counter("mnemos.accounting.stale_usage", metric.WithDescription("Responses whose usage came from the context before a compaction, counted by estimate instead.")); err != nil {
		return sm, err
	}
	if sm.thrash, err = m.Int64Counter("mnemos.compactions.thrash_held",
		metric.WithDescription("Turns past the auto-compact threshold whose compaction the thrash guard held back (too many automatic compactions within the last turns).")); err != nil {
		return sm, err
	}
	if sm.prefix, err = m.Int64Counter("mnemos.accounting.unknown_prefix",
		metric.WithDescription("Turn events whose request_prefix named only a hash the session did not hold: the session's prefix was kept.")); err != nil {
		return sm, err
	}
	if sm.batch, err = m.Int64Histogram("mnemos.accounting.batch_size", metric.WithUnit("{turn}"),
		metric.WithDescription("Turn events applied together in one transaction (group commit); events a batch leaves out are applied one by one and not counted here.")); err != nil {
		return sm, err
	}
	return sm, nil
}

func (m serviceMetrics) batched(ctx context.Context, n int) {
	if n > 0 {
		m.batch.Record(ctx, int64(n))
	}
}

func (m serviceMetrics) outcome(ctx context.Context, o Outcome, d time.Duration) {
	m.turns.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", string(o))))
	m.latency.Record(ctx, d.Seconds())
}

// appliedAfterWaiting counts n turns applied that had been kept waiting
// for a predecessor: counted as waiting when they arrived, and as applied now.
func (m serviceMetrics) appliedAfterWaiting(ctx context.Context, n int) {
	if n > 0 {
		m.turns.Add(ctx, int64(n), metric.WithAttributes(attribute.String("outcome", string(OutcomeApplied))))
	}
}

func (m serviceMetrics) rejected(ctx context.Context, reason string) {
	m.rejects.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}

func (m serviceMetrics) compactRequested(ctx context.Context) { m.compacts.Add(ctx, 1) }

func (m serviceMetrics) offloaded(ctx context.Context, chars int64) {
	m.offloads.Add(ctx, 1)
	m.offChars.Add(ctx, chars)
}

func (m serviceMetrics) gapSkipped(ctx context.Context, n int64) { m.gapsSeqs.Add(ctx, n) }

func (m serviceMetrics) staleUsage(ctx context.Context) { m.stale.Add(ctx, 1) }

func (m serviceMetrics) thrashHeld(ctx context.Context) { m.thrash.Add(ctx, 1) }

func (m serviceMetrics) unknownPrefix(ctx context.Context) { m.prefix.Add(ctx, 1) }
