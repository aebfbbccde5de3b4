package outbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/bus"
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
