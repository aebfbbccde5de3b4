package bus_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
)

// endedSpan waits for an ended span with the given name and message id.
func endedSpan(t *testing.T, rec *tracetest.SpanRecorder, name, msgID string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, s := range rec.Ended() {
			if s.Name() != name {
				continue
			}
			for _, a := range s.Attributes() {
				if a.Key == "messaging.message.id" && a.Value.AsString() == msgID {
					found = s
					return true
				}
			}
		}
		return false
	}, waitFor, tick, "span %q of %s", name, msgID)
	return found
}

func TestTraceContextFollowsTheMessage(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })

	cfg := bustest.Config(t)
	cfg.TracerProvider = tp
	b := bustest.Connect(t, cfg)

	var o outcomes
	handlerSpans := make(chan trace.SpanContext, 2)
	bustest.Run(t, b, turnSpec("trace", &o), func(ctx context.Context, m bus.Message) error {
		handlerSpans <- trace.SpanContextFromContext(ctx)
		if m.MsgID == "e-bad" {
			return bus.Permanent(errors.New("bad input"))
		}
		return nil
	})

	ctx, root := tp.Tracer("test").Start(testContext(t), "ingest")
	subject := b.Subject(bus.KindTurnCompleted, "acme", "s-1")
	_, err := b.Publish(ctx, subject, "e-ok", []byte(`{}`), nil)
	require.NoError(t, err)
	_, err = b.Publish(ctx, subject, "e-bad", []byte(`{}`), nil)
	require.NoError(t, err)
	root.End()

	publish := endedSpan(t, rec, "publish turn.completed", "e-ok")
	process := endedSpan(t, rec, "process turn.completed", "e-ok")
	require.Equal(t, trace.SpanKindProducer, publish.SpanKind())
	require.Equal(t, trace.SpanKindConsumer, process.SpanKind())
	require.Equal(t, root.SpanContext().SpanID(), publish.Parent().SpanID())
	require.Equal(t, root.SpanContext().TraceID(), process.SpanContext().TraceID())
	require.Equal(t, publish.SpanContext().SpanID(), process.Parent().SpanID())
	require.True(t, process.Parent().IsRemote())
	require.Equal(t, codes.Unset, process.Status().Code)
	require.Contains(t, process.Attributes(), attribute.String("messaging.system", "nats"))
	require.Contains(t, process.Attributes(), attribute.String("messaging.consumer.group.name", "trace"))
	require.Contains(t, process.Attributes(), attribute.String("mnemos.bus.result", "acked"))

	// The handler runs inside the process span.
	seen := []trace.SpanContext{<-handlerSpans, <-handlerSpans}
	require.Contains(t, seen, process.SpanContext())

	// A failure sets the span status, and the dead letter continues the trace.
	failed := endedSpan(t, rec, "process turn.completed", "e-bad")
	require.Equal(t, codes.Error, failed.Status().Code)
	require.Equal(t, "bad input", failed.Status().Description)
	require.Contains(t, failed.Attributes(), attribute.String("mnemos.bus.result", "dead_lettered"))
	var dl sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "publish deadletter.turn.completed" {
				dl = s
				return true
			}
		}
		return false
	}, waitFor, tick)
	require.Equal(t, failed.SpanContext().SpanID(), dl.Parent().SpanID())
	require.Equal(t, root.SpanContext().TraceID(), dl.SpanContext().TraceID())
}
