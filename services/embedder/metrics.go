package embedder

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Outcomes of the messages and memories the embedder reads, the values of
// mnemos.embedder.messages and mnemos.embedder.memories.
const (
	// OutcomeEmbedded: its vector was stored.
	OutcomeEmbedded = "embedded"
	// OutcomeNoText: a message without text (tool calls and results only),
	// marked read without a vector.
	OutcomeNoText = "no_text"
	// OutcomeRefused: the endpoint refused its text; it stays without a
	// vector, and the others of its batch are stored.
	OutcomeRefused = "refused"
)

type serviceMetrics struct {
	messages metric.Int64Counter
	memories metric.Int64Counter
}

func newMetrics(m metric.Meter) (serviceMetrics, error) {
	var sm serviceMetrics
	var err error
	if sm.messages, err = m.Int64Counter("mnemos.embedder.messages", metric.WithUnit("{message}"), metric.WithDescription(
		"Messages the embedder read, by outcome: embedded; no_text (nothing but tool calls and results); refused (the endpoint would not take its text).")); err != nil {
		return sm, err
	}
	if sm.memories, err = m.Int64Counter("mnemos.embedder.memories", metric.WithUnit("{memory}"), metric.WithDescription(
		"Memory revisions the embedder read, by outcome: embedded; refused (the endpoint would not take its text).")); err != nil {
		return sm, err
	}
	return sm, nil
}

func (m serviceMetrics) message(ctx context.Context, outcome string) {
	m.messages.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

func (m serviceMetrics) memory(ctx context.Context, outcome string) {
	m.memories.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}
