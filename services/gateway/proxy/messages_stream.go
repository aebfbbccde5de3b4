package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// streamAssembler rebuilds the message a Messages API stream carries from
// its events: message_start, the content blocks and their deltas,
// message_delta (stop reason, final usage) and message_stop.
type streamAssembler struct {
	msg     reply
	inputs  map[int]*bytes.Buffer // partial JSON of tool_use inputs, by block index
	stopped bool
	failed  string
}

// streamEvent is the part of a stream event's data the assembler reads.
type streamEvent struct {
	Type    string          `json:"type"`
	Index   int             `json:"index"`
	Message *reply          `json:"message"`
	Block   *turn.Block     `json:"content_block"`
	Delta   json.RawMessage `json:"delta"`
	Usage   *struct {
		InputTokens              *int64 `json:"input_tokens"`
		CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
		OutputTokens             *int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// add reads one event.
func (a *streamAssembler) add(event []byte) error {
	var data []byte
	for line := range bytes.SplitSeq(event, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			data = append(data, bytes.TrimSpace(rest)...)
		}
	}
	if len(data) == 0 {
		return nil // a comment or a ping without data
	}
	var ev streamEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("a stream event: %w", err)
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			a.msg = *ev.Message
			a.msg.Content = nil
		}
	case "content_block_start":
		if ev.Block == nil || ev.Index != len(a.msg.Content) {
			return fmt.Errorf("content block %d starts out of order", ev.Index)
		}
		b := *ev.Block
		if b.Type == turn.BlockToolUse {
			b.Input = nil // the deltas bring it
		}
		a.msg.Content = append(a.msg.Content, b)
	case "content_block_delta":
		return a.delta(ev.Index, ev.Delta)
	case "content_block_stop":
		return a.stopBlock(ev.Index)
	case "message_delta":
		var d struct {
			StopReason string `json:"stop_reason"`
		}
		_ = json.Unmarshal(ev.Delta, &d)
		if d.StopReason != "" {
			a.msg.StopReason = d.StopReason
		}
		if u := ev.Usage; u != nil {
			setIf(&a.msg.Usage.InputTokens, u.InputTokens)
			setIf(&a.msg.Usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
			setIf(&a.msg.Usage.CacheReadInputTokens, u.CacheReadInputTokens)
			setIf(&a.msg.Usage.OutputTokens, u.OutputTokens)
		}
	case "message_stop":
		a.stopped = true
	case "error":
		a.failed = "the upstream's stream failed"
		if ev.Error != nil {
			a.failed = ev.Error.Type + ": " + ev.Error.Message
		}
	}
	return nil
}

func setIf(dst *int64, v *int64) {
	if v != nil {
		*dst = *v
	}
}

// delta applies a content_block_delta to block i.
func (a *streamAssembler) delta(i int, raw json.RawMessage) error {
	if i < 0 || i >= len(a.msg.Content) {
		return fmt.Errorf("a delta for content block %d, which has not started", i)
	}
	var d struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("content block %d: %w", i, err)
	}
	b := &a.msg.Content[i]
	switch d.Type {
	case "text_delta":
		b.Text += d.Text
	case "thinking_delta":
		b.Thinking += d.Thinking
	case "signature_delta":
		b.Signature += d.Signature
	case "input_json_delta":
		if a.inputs == nil {
			a.inputs = map[int]*bytes.Buffer{}
		}
		if a.inputs[i] == nil {
			a.inputs[i] = &bytes.Buffer{}
		}
		_, _ = a.inputs[i].WriteString(d.PartialJSON) // a bytes.Buffer write never fails
	}
	return nil
}

// stopBlock completes block i: a tool_use takes the input its deltas spelled.
func (a *streamAssembler) stopBlock(i int) error {
	if i < 0 || i >= len(a.msg.Content) {
		return fmt.Errorf("content block %d stops before it started", i)
	}
	b := &a.msg.Content[i]
	if b.Type != turn.BlockToolUse {
		return nil
	}
	input := []byte("{}")
	if buf := a.inputs[i]; buf != nil && buf.Len() > 0 {
		input = buf.Bytes()
	}
	if !json.Valid(input) {
		return fmt.Errorf("tool_use %s: its input is not JSON", b.ID)
	}
	b.Input = json.RawMessage(input)
	return nil
}

// reply is the message the stream carried, once it ended with message_stop.
func (a *streamAssembler) reply() (reply, error) {
	if a.failed != "" {
		return reply{}, errors.New(a.failed)
	}
	if !a.stopped {
		return reply{}, errors.New("the stream ended before message_stop")
	}
	return a.msg, nil
}
