package bus

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Publish stores data on subject and waits for the server's acknowledgement.
//
// The subject is the full subject, namespace included: build it with
// Bus.Subject. msgID is required: the server drops a second message with the
// same id within the stream's duplicate window (Config.DuplicateWindow, two
// minutes by default), and reports it
// with PubAck.Duplicate, so derive it from a deterministic key (an event id),
// never from time or randomness. hdr is not modified; the published headers
// are a copy with the W3C trace context of ctx added.
func (b *Bus) Publish(ctx context.Context, subject, msgID string, data []byte, hdr nats.Header) (*jetstream.PubAck, error) {
	if msgID == "" {
		return nil, errors.New("bus.Publish: msgID is required")
	}
	if _, ok := b.strip(subject); !ok {
		return nil, fmt.Errorf("bus.Publish: subject %q is outside namespace %q", subject, b.ns)
	}

	ctx, span := b.startPublishSpan(ctx, subject, msgID, len(data))
	defer span.End()

	msg := &nats.Msg{Subject: subject, Data: data, Header: make(nats.Header, len(hdr)+2)}
	maps.Copy(msg.Header, hdr) // safe: headers are replaced with Set, never appended to
	b.prop.Inject(ctx, headerCarrier(msg.Header))

	ack, err := b.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return nil, fmt.Errorf("bus.Publish: %w", err)
	}
	if ack.Duplicate {
		span.SetAttributes(attribute.Bool("mnemos.bus.duplicate", true))
	}
	return ack, nil
}

// startPublishSpan starts the producer span of one publish.
func (b *Bus) startPublishSpan(ctx context.Context, subject, msgID string, size int) (context.Context, trace.Span) {
	return b.tracer.Start(ctx, "publish "+b.kindOf(subject),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("publish"),
			semconv.MessagingDestinationName(subject),
			semconv.MessagingMessageID(msgID),
			semconv.MessagingMessageBodySize(size),
		))
}

// headerCarrier lets OpenTelemetry propagators read and write NATS headers.
// NATS header keys are case-sensitive; the W3C keys are lower case on both
// sides.
type headerCarrier nats.Header

func (c headerCarrier) Get(key string) string { return nats.Header(c).Get(key) }
func (c headerCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }
func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
