package bus

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Outgoing is one message of a batch.
type Outgoing struct {
	// Ctx carries the trace the publish belongs to; nil means the batch's ctx.
	Ctx     context.Context
	Subject string // full subject, namespace included
	MsgID   string
	Data    []byte
	Header  nats.Header
}

// PublishBatch publishes msgs without waiting for each acknowledgement in
// turn, then waits for all of them. It returns, in order, whether each one
// was stored; the error is the first failure. A message's outcome is only
// reported as stored once the server acknowledged it, within the bus's
// AckWait: one without an acknowledgement by then is reported not stored.
func (b *Bus) PublishBatch(ctx context.Context, msgs []Outgoing) ([]bool, error) {
	stored := make([]bool, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	spans := make([]trace.Span, len(msgs))
	var firstErr error
	fail := func(i int, err error) {
		spans[i].RecordError(err)
		spans[i].SetStatus(codes.Error, err.Error())
		if firstErr == nil {
			firstErr = fmt.Errorf("bus.PublishBatch: %s: %w", msgs[i].MsgID, err)
		}
	}
	for i, m := range msgs {
		mctx := m.Ctx
		if mctx == nil {
			mctx = ctx
		}
		mctx, spans[i] = b.startPublishSpan(mctx, m.Subject, m.MsgID, len(m.Data))
		if m.MsgID == "" {
			fail(i, fmt.Errorf("msgID is required"))
			continue
		}
		msg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: make(nats.Header, len(m.Header)+2)}
		maps.Copy(msg.Header, m.Header)
		b.prop.Inject(mctx, headerCarrier(msg.Header))
		f, err := b.js.PublishMsgAsync(msg, jetstream.WithMsgID(m.MsgID))
		if err != nil {
			fail(i, err)
			continue
		}
		futures[i] = f
	}
	// Each acknowledgement fails after the bus's AckWait (jetstream's
	// publish async timeout); the batch also stops waiting a moment after
	// that, so a lost acknowledgement never holds its caller.
	wait, cancel := context.WithTimeout(ctx, b.ackWait+time.Second)
	defer cancel()
	for i, f := range futures {
		if f == nil {
			spans[i].End()
			continue
		}
		select {
		case <-f.Ok():
			stored[i] = true
		case err := <-f.Err():
			fail(i, err)
		case <-wait.Done():
			fail(i, fmt.Errorf("no acknowledgement within %s: %w", b.ackWait, wait.Err()))
		}
		spans[i].End()
	}
	return stored, firstErr
}
