package dreamer

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

type serviceMetrics struct {
	gates  metric.Int64Counter
	dreams metric.Int64Counter
}

func newMetrics(m metric.Meter) (serviceMetrics, error) {
	var sm serviceMetrics
	var err error
	if sm.gates, err = m.Int64Counter("mnemos.dream.gate", metric.WithDescription(
		"Gates the dreamer checked, by gate (enabled, time, scan, sessions, lease) and outcome (pass, fail, error); the first that fails stops the others.")); err != nil {
		return sm, err
	}
	if sm.dreams, err = m.Int64Counter("mnemos.dreams", metric.WithDescription(
		"Consolidations ended, by outcome: completed, failed, killed, proposed (changes beyond the allowed share, kept for approval).")); err != nil {
		return sm, err
	}
	return sm, nil
}

func (m serviceMetrics) gate(ctx context.Context, gate, outcome string) {
	m.gates.Add(ctx, 1, metric.WithAttributes(attribute.String("gate", gate), attribute.String("outcome", outcome)))
}

func (m serviceMetrics) dream(ctx context.Context, outcome string) {
	m.dreams.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}
