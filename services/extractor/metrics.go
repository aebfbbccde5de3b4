package extractor

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/bus"
)

type serviceMetrics struct {
	runs     metric.Int64Counter
	delivers metric.Int64Counter
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
	if sm.delivers, err = m.Int64Counter("mnemos.bus.deliveries", metric.WithDescription("Deliveries to a consumer, by result (acked, retried, dead_lettered).")); err != nil {
		return sm, err
	}
	return sm, nil
}

func (m serviceMetrics) run(ctx context.Context, outcome string) {
	m.runs.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

func (m serviceMetrics) delivery(ctx context.Context, o bus.Outcome) {
	m.delivers.Add(ctx, 1, metric.WithAttributes(attribute.String("consumer", o.Consumer), attribute.String("result", string(o.Result))))
}
