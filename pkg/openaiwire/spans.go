package openaiwire

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// A proxy maps a request's whole history every round, and most of it is
// the same as the round before. Spans split the history as
// ResponsesInput (ChatInput) does without mapping it — reading only each
// item's type and role — so that a caller maps each message once
// (ResponsesMessage, ChatMessage) and keeps what it mapped by the items'
// bytes.

// ResponsesSpans splits a Responses API request's input items, each valid
// JSON, as ResponsesInput does: how many instructions they open with, then
// how many items each message folds, in order.
func ResponsesSpans(items []json.RawMessage) (instructions int, spans []int) {
	return responsesDialect.spans(items)
}

// ChatSpans splits Chat Completions messages, each valid JSON, as
// ChatInput does.
func ChatSpans(items []json.RawMessage) (instructions int, spans []int) {
	return chatDialect.spans(items)
}

// ResponsesMessage maps the items of one span of ResponsesSpans to the
// message ResponsesInput makes of them.
func ResponsesMessage(items []json.RawMessage) (turn.Message, error) {
	return responsesDialect.message(items)
}

// ChatMessage maps the messages of one span of ChatSpans to the message
// ChatInput makes of them.
func ChatMessage(items []json.RawMessage) (turn.Message, error) {
	return chatDialect.message(items)
}

func (d dialect) spans(items []json.RawMessage) (int, []int) {
	i := 0
	for ; i < len(items) && d.instructs(fields(items[i])); i++ {
	}
	instructions := i
	var spans []int
	last := ""
	for ; i < len(items); i++ {
		side := d.sideOf(fields(items[i]))
		if len(spans) > 0 && side == last {
			spans[len(spans)-1]++
		} else {
			spans = append(spans, 1)
		}
		last = side
	}
	return instructions, spans
}

// fields is the item's fields a span is told by, its type and role, split
// without decoding their values; none when it is no object.
func fields(raw json.RawMessage) obj {
	o, err := jsonwalk.Fields(raw, "type", "role")
	if err != nil {
		return nil
	}
	return o
}

// errSpan says the items given as one span fold into more than one message.
var errSpan = errors.New("the items are not one span: they fold into more than one message")

func (d dialect) message(items []json.RawMessage) (turn.Message, error) {
	var msgs []turn.Message
	for i, raw := range items {
		role, pieces := d.item(raw, "")
		var err error
		if msgs, err = finish(msgs, role, pieces, d.joins); err != nil {
			return turn.Message{}, fmt.Errorf("%s %d: %w", d.what, i, err)
		}
	}
	if len(msgs) != 1 {
		return turn.Message{}, errSpan
	}
	return msgs[0], nil
}
