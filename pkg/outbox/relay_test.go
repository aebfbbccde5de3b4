package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

func TestRelayPublishesEveryCommittedRowOnceWithItsTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.New(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	cfg := bustest.Config(t)
	cfg.TracerProvider = tp
	b := bustest.Connect(t, cfg)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))

	// The transaction that writes the rows runs inside a span.
	wctx, writeSpan := tp.Tracer("test").Start(ctx, "write")
	const n = 600
	require.NoError(t, st.InTx(wctx, "acme", func(tx *store.Tx) error {
		for i := range n {
			if err := tx.Enqueue(wctx, store.OutboxEvent{
				Subject: bus.Subject(bus.KindTurnAccounted, "acme", fmt.Sprintf("s%d", i%7)),
				MsgID:   fmt.Sprintf("m-%d", i),
				Payload: []byte(fmt.Sprintf(`{"i":%d}`, i)),
				Headers: bus.TraceHeaders(wctx),
			}); err != nil {
				return err
			}
		}
		return nil
	}))
	writeSpan.End()
	// A rolled-back transaction's rows never leave.
	require.Error(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		if err := tx.Enqueue(ctx, store.OutboxEvent{Subject: bus.Subject(bus.KindTurnAccounted, "acme", "s0"), MsgID: "ghost", Payload: []byte("{}")}); err != nil {
			return err
		}
		return fmt.Errorf("roll back")
	}))

	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	relay := outbox.New(outbox.Config{Batch: 100, Poll: 20 * time.Millisecond}, st, b, bustest.Logger(t))
	go func() { done <- relay.Run(rctx) }()
	require.Eventually(t, func() bool {
		left, err := st.OutboxBacklog(ctx)
		return err == nil && left == 0
	}, 20*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	info, err := b.JetStream().Stream(ctx, b.StreamName(bus.StreamEvents))
	require.NoError(t, err)
	require.EqualValues(t, n, info.CachedInfo().State.Msgs, "every committed row published once, the rolled-back one never")

	c, err := b.JetStream().OrderedConsumer(ctx, b.StreamName(bus.StreamEvents), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.Equal(t, "acme:m-0", m.Headers().Get(jetstream.MsgIDHeader), "oldest first, the id scoped to its tenant")
	require.Contains(t, m.Headers().Get("traceparent"), writeSpan.SpanContext().TraceID().String(),
		"the published event continues the trace of the transaction that wrote it")

	published := 0
	for _, s := range rec.Ended() {
		if s.Name() == "publish turn.accounted" {
			published++
			require.Equal(t, writeSpan.SpanContext().TraceID(), s.SpanContext().TraceID())
		}
	}
	require.Equal(t, n, published)
}

func TestRelayReportsItsBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.New(t)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		for i := range 5 {
			if err := tx.Enqueue(ctx, store.OutboxEvent{Subject: bus.Subject(bus.KindTurnAccounted, "acme", "s"), MsgID: fmt.Sprintf("b-%d", i), Payload: []byte("{}")}); err != nil {
				return err
			}
		}
		return nil
	}))
	run := func(b *bus.Bus) (*telemetrytest.Reader, func()) {
		metrics := telemetrytest.New(t)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		relay := outbox.New(outbox.Config{Poll: 20 * time.Millisecond, Meter: metrics.Meter(), BacklogInterval: 20 * time.Millisecond}, st, b, bustest.Logger(t))
		go func() { done <- relay.Run(rctx) }()
		return metrics, func() { cancel(); require.NoError(t, <-done) }
	}

	// A bus whose streams do not exist cannot publish: the rows wait.
	cfg := bustest.Config(t)
	broken, err := bus.Connect(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = broken.Close(ctx) })
	metrics, stop := run(broken)
	require.Eventually(t, func() bool {
		n, ok := metrics.Gauge("mnemos.outbox.pending", "", "")
		return ok && n == 5
	}, 20*time.Second, 10*time.Millisecond)
	stop()

	metrics, stop = run(bustest.New(t))
	defer stop()
	require.Eventually(t, func() bool {
		n, ok := metrics.Gauge("mnemos.outbox.pending", "", "")
		return ok && n == 0
	}, 20*time.Second, 10*time.Millisecond)
}

// TestRelayLetsGoOfRowsWhoseAcknowledgementIsLost: a publish whose
// acknowledgement never comes (a node killed after it took the message, a
// reply lost while the connection moved) fails after the bus's AckWait, and
// the relay's round ends, releasing its rows for the next round. The chaos
// schedule found the relay waiting forever instead, its transaction holding
// the rows locked, so that no relay could publish them again.
func TestRelayLetsGoOfRowsWhoseAcknowledgementIsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.New(t)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		for i := range 3 {
			if err := tx.Enqueue(ctx, store.OutboxEvent{Subject: bus.Subject(bus.KindTurnAccounted, "acme", "lost"), MsgID: fmt.Sprintf("l-%d", i), Payload: []byte("{}")}); err != nil {
				return err
			}
		}
		return nil
	}))

	// No stream yet; a plain subscriber takes the messages and answers
	// none of them, as a node that dies before acknowledging does.
	cfg := bustest.Config(t)
	cfg.AckWait = 300 * time.Millisecond
	b, err := bus.Connect(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(ctx) })
	swallow, err := b.Conn().SubscribeSync(b.Prefix(bus.Subject(bus.KindTurnAccounted, "acme", "lost")))
	require.NoError(t, err)
	require.NoError(t, b.Conn().Flush())

	relay := outbox.New(outbox.Config{Batch: 10}, st, b, bustest.Logger(t))
	rctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel) // first of the cleanups: a round still waiting ends
	round := make(chan error, 1)
	go func() {
		_, err := relay.RelayOnce(rctx)
		round <- err
	}()
	select {
	case err := <-round:
		require.ErrorIs(t, err, jetstream.ErrAsyncPublishTimeout, "the round fails on the missing acknowledgements")
	case <-time.After(15 * time.Second):
		t.Fatal("the relay still waits for acknowledgements that will never come, its rows locked")
	}
	msg, err := swallow.NextMsg(time.Second)
	require.NoError(t, err, "the message did leave")
	require.Equal(t, "acme:l-0", msg.Header.Get(jetstream.MsgIDHeader))
	require.NoError(t, swallow.Unsubscribe())

	// The rows are free: a relay whose bus has its streams publishes them.
	backlog, err := st.OutboxBacklog(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, backlog, "nothing was deleted without an acknowledgement")
	n, err := outbox.New(outbox.Config{Batch: 10}, st, bustest.Connect(t, cfg), bustest.Logger(t)).RelayOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	backlog, err = st.OutboxBacklog(ctx)
	require.NoError(t, err)
	require.Zero(t, backlog)
}
