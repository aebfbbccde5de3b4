package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Event builds the outbox row of an event of kind about a session: payload
// as JSON, the subject "<kind>.<tenant>.<session>", and ctx's trace context
// in its headers.
func Event(ctx context.Context, kind, tenant, session, msgID string, payload any) (store.OutboxEvent, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return store.OutboxEvent{}, fmt.Errorf("encode %s: %w", kind, err)
	}
	return store.OutboxEvent{
		Subject: bus.Subject(kind, tenant, session),
		MsgID:   msgID,
		Payload: data,
		Headers: bus.TraceHeaders(ctx),
	}, nil
}

// Emit is Event for a typed event: its subject and message id are the ones
// the event declares (events.Event).
func Emit(ctx context.Context, ev events.Event) (store.OutboxEvent, error) {
	tenant, session := ev.Address()
	return Event(ctx, ev.Kind(), tenant, session, ev.MsgID(), ev)
}

// Enqueue writes ev to the outbox in tx: it is published once tx commits.
func Enqueue(ctx context.Context, tx *store.Tx, ev events.Event) error {
	e, err := Emit(ctx, ev)
	if err != nil {
		return err
	}
	return tx.Enqueue(ctx, e)
}
