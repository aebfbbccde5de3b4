package compactor

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

type serviceMetrics struct {
	compactions metric.Int64Counter
	saved       metric.Int64Counter
	circuits    metric.Int64Counter
	unused      metric.Int64Counter
	retention   metric.Float64Histogram
	lowKept     metric.Int64Counter
}

func newMetrics(m metric.Meter) (serviceMetrics, error) {
	var sm serviceMetrics
	var err error
	if sm.compactions, err = m.Int64Counter("mnemos.compactions", metric.WithDescription("Compactions ended, by trigger, method and outcome.")); err != nil {
		return sm, err
	}
	if sm.saved, err = m.Int64Counter("mnemos.compactions.tokens_saved", metric.WithDescription("Tokens taken out of contexts by compactions (pre minus post), by method.")); err != nil {
		return sm, err
	}
	if sm.circuits, err = m.Int64Counter("mnemos.compactions.circuit_opened", metric.WithDescription("Sessions whose LLM compactions failed too often in a row.")); err != nil {
		return sm, err
	}
	if sm.unused, err = m.Int64Counter("mnemos.compactions.no_progress",
		metric.WithDescription("Summaries not used because they made no progress (still at or above auto-compact, or under min_saving_percent saved), by method; the funnel went on to its next step.")); err != nil {
		return sm, err
	}
	if sm.retention, err = m.Float64Histogram("mnemos.compactions.retention",
		metric.WithDescription("Retention score of each completed compaction (0 to 1: the share of what must survive the replaced messages that it kept), by method."),
		metric.WithExplicitBucketBoundaries(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)); err != nil {
		return sm, err
	}
	if sm.lowKept, err = m.Int64Counter("mnemos.compactions.low_retention",
		metric.WithDescription("Session-notes and model summaries not used because their retention score was under compaction.min_retention, by method; the funnel went on to its next step.")); err != nil {
		return sm, err
	}
	return sm, nil
}

func (m serviceMetrics) lowRetention(ctx context.Context, method string) {
	m.lowKept.Add(ctx, 1, metric.WithAttributes(attribute.String("method", method)))
}

func (m serviceMetrics) noProgress(ctx context.Context, method string) {
	m.unused.Add(ctx, 1, metric.WithAttributes(attribute.String("method", method)))
}

func (m serviceMetrics) completed(ctx context.Context, c store.Compaction, opened bool) {
	m.compactions.Add(ctx, 1, metric.WithAttributes(attribute.String("trigger", c.Trigger), attribute.String("method", c.Method), attribute.String("outcome", store.CompactionCompleted)))
	if c.Retention != nil {
		m.retention.Record(ctx, *c.Retention, metric.WithAttributes(attribute.String("method", c.Method)))
	}
	if c.PreTokens > c.PostTokens {
		m.saved.Add(ctx, c.PreTokens-c.PostTokens, metric.WithAttributes(attribute.String("method", c.Method)))
	}
	if opened {
		m.circuits.Add(ctx, 1)
	}
}

func (m serviceMetrics) ended(ctx context.Context, trigger, status string) {
	m.compactions.Add(ctx, 1, metric.WithAttributes(attribute.String("trigger", trigger), attribute.String("method", ""), attribute.String("outcome", status)))
}

// timeAfter is time.After; a variable so nothing else needs a clock.
var timeAfter = time.After
