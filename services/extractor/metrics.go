package extractor

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

type serviceMetrics struct {
	runs metric.Int64Counter
}

func newMetrics(m metric.Meter) (serviceMetrics, error) {
	var sm serviceMetrics
	var err error
	if sm.runs, err = m.Int64Counter("mnemos.extractor.runs", metric.WithDescription(
		"Memory extraction after user turns, by outcome: runs end saved, nothing, capped (out of model turns), failed (the model call failed) "+
			"or skipped_agent_wrote (the main agent wrote memory itself); turns that start no run of their own are throttled, coalesced, "+
			"skipped_agent_wrote or no_scope.")); err != nil {
		return sm, err
	}
	return sm, nil
}

func (m serviceMetrics) run(ctx context.Context, outcome string) {
	m.runs.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}
