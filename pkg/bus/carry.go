package bus

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
)

// TraceHeaders returns ctx's W3C trace context as headers, for an event that
// is stored now (an outbox row) and published later, so its publish and
// consume spans join the trace that produced it.
func TraceHeaders(ctx context.Context) map[string]string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	return carrier
}

// DeadLetterSubject is the unprefixed dead-letter subject of an unprefixed subject.
func DeadLetterSubject(subject string) string { return deadLetterPrefix + subject }

// Prefix returns an unprefixed subject (as stored in the outbox) with this
// bus's namespace, ready to publish.
func (b *Bus) Prefix(subject string) string { return b.prefix(subject) }
