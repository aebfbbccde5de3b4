package sessionmemory

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

type serviceMetrics struct {
	updates metric.Int64Counter
}

func newMetrics(m metric.Meter) (serviceMetrics, error) {
	var sm serviceMetrics
	var err error
	if sm.updates, err = m.Int64Counter("mnemos.session_notes.updates", metric.WithDescription(
		"Session notes updates, by outcome: updated; rejected (the answer broke the notes' structure); failed (the model call failed); coalesced (a request folded into the trailing run of an update already running).")); err != nil {
		return sm, err
	}
	return sm, nil
}

func (m serviceMetrics) update(ctx context.Context, outcome string) {
	m.updates.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}
