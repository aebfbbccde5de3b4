package openaiwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/mnemos-ai/mnemos/pkg/sse"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// ResponsesStream assembles a streamed Responses API answer from its
// events: each output item as response.output_item.done gives it, and the
// status and usage of response.completed (or response.incomplete). The
// deltas, and events of types it does not know, are skipped: the done
// events repeat what they spelled.
type ResponsesStream struct {
	items  map[int]json.RawMessage
	final  *responseBody
	failed error
}

// responsesEvent is the part of a stream event read here.
type responsesEvent struct {
	Type        string          `json:"type"`
	OutputIndex int             `json:"output_index"`
	Item        json.RawMessage `json:"item"`
	Response    *responseBody   `json:"response"`
	Code        any             `json:"code"`
	Message     string          `json:"message"`
}

// Add reads one event.
func (s *ResponsesStream) Add(event []byte) error {
	data := sse.Data(event)
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	var ev responsesEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("a stream event: %w", err)
	}
	switch ev.Type {
	case "response.output_item.done":
		if len(ev.Item) == 0 {
			return fmt.Errorf("output item %d: done without its item", ev.OutputIndex)
		}
		if s.items == nil {
			s.items = map[int]json.RawMessage{}
		}
		s.items[ev.OutputIndex] = append(json.RawMessage(nil), ev.Item...)
	case "response.completed", "response.incomplete":
		if ev.Response == nil {
			return fmt.Errorf("%s without its response", ev.Type)
		}
		s.final = ev.Response
	case "response.failed":
		s.failed = errors.New("the upstream failed the response")
		if ev.Response != nil && ev.Response.Error != nil {
			s.failed = ev.Response.Error.err()
		}
	case "error":
		s.failed = (&apiError{Code: ev.Code, Message: ev.Message}).err()
	}
	return nil
}

// Answer is the answer the stream carried, once it completed: its items in
// output order, those response.completed lists that no done event gave
// included.
func (s *ResponsesStream) Answer() (ResponsesAnswer, error) {
	if s.failed != nil {
		return ResponsesAnswer{}, s.failed
	}
	if s.final == nil {
		return ResponsesAnswer{}, errors.New("the stream ended before response.completed")
	}
	a, err := s.final.answer()
	if err != nil {
		return ResponsesAnswer{}, err
	}
	n := len(s.final.Output)
	for i := range s.items {
		n = max(n, i+1)
	}
	out := make([]json.RawMessage, 0, n)
	for i := range n {
		switch {
		case s.items[i] != nil:
			out = append(out, s.items[i])
		case i < len(s.final.Output):
			out = append(out, s.final.Output[i])
		}
	}
	a.Output = out
	return a, nil
}

// ReadResponsesStream assembles a whole streamed Responses API answer.
func ReadResponsesStream(r io.Reader) (ResponsesAnswer, error) {
	var s ResponsesStream
	if err := sse.Read(r, s.Add); err != nil {
		return ResponsesAnswer{}, err
	}
	return s.Answer()
}

// ChatStream assembles a streamed Chat Completions answer from its chunks:
// the first choice's deltas merged into one message (strings appended, a
// tool call's pieces by its index, fields it does not know kept the same
// way), its finish_reason, and the usage of the last chunk when the request
// asked for it (stream_options.include_usage).
type ChatStream struct {
	message map[string]any
	finish  string
	usage   *turn.Usage
	done    bool
	failed  error
}

// Add reads one event.
func (s *ChatStream) Add(event []byte) error {
	data := bytes.TrimSpace(sse.Data(event))
	if len(data) == 0 {
		return nil
	}
	if string(data) == "[DONE]" {
		s.done = true
		return nil
	}
	var chunk struct {
		Choices []struct {
			Index        int            `json:"index"`
			Delta        map[string]any `json:"delta"`
			FinishReason *string        `json:"finish_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
		Error *apiError       `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&chunk); err != nil {
		return fmt.Errorf("a stream chunk: %w", err)
	}
	if chunk.Error != nil {
		s.failed = chunk.Error.err()
		return nil
	}
	for _, c := range chunk.Choices {
		if c.Index != 0 {
			continue
		}
		if s.message == nil {
			s.message = map[string]any{}
		}
		mergeDelta(s.message, c.Delta)
		if c.FinishReason != nil && *c.FinishReason != "" {
			s.finish = *c.FinishReason
		}
	}
	if len(chunk.Usage) > 0 && string(chunk.Usage) != "null" {
		u, err := ChatUsage(chunk.Usage)
		if err != nil {
			return err
		}
		s.usage = &u
	}
	return nil
}

// replaced are the keys whose strings a delta replaces rather than extends.
var replaced = map[string]bool{"index": true, "type": true, "id": true, "role": true}

// mergeDelta merges a delta into what the deltas before it spelled: a
// string is appended (index, type, id and role replace), an object merged, a
// list of objects merged element by element by their index, anything else
// replaced; a null changes nothing.
func mergeDelta(acc, delta map[string]any) {
	for k, v := range delta {
		switch v := v.(type) {
		case nil:
		case string:
			if prev, ok := acc[k].(string); ok && !replaced[k] {
				acc[k] = prev + v
			} else {
				acc[k] = v
			}
		case map[string]any:
			prev, ok := acc[k].(map[string]any)
			if !ok {
				prev = map[string]any{}
				acc[k] = prev
			}
			mergeDelta(prev, v)
		case []any:
			acc[k] = mergeList(acc[k], v)
		default:
			acc[k] = v
		}
	}
}

// mergeList merges a delta's list into the list before it: elements that
// are objects with an index go to the element of that index.
func mergeList(prev any, delta []any) []any {
	list, _ := prev.([]any)
	for _, d := range delta {
		obj, ok := d.(map[string]any)
		if !ok {
			list = append(list, d)
			continue
		}
		idx, ok := obj["index"]
		found := false
		if ok {
			for _, e := range list {
				if eo, isObj := e.(map[string]any); isObj && fmt.Sprint(eo["index"]) == fmt.Sprint(idx) {
					mergeDelta(eo, obj)
					found = true
					break
				}
			}
		}
		if !found {
			fresh := map[string]any{}
			mergeDelta(fresh, obj)
			list = append(list, fresh)
		}
	}
	return list
}

// Answer is the answer the stream carried, once it ended: the message as
// the API would have sent it whole (content null when no content came, the
// tool calls in index order without their index).
func (s *ChatStream) Answer() (ChatAnswer, error) {
	if s.failed != nil {
		return ChatAnswer{}, s.failed
	}
	if !s.done && s.finish == "" {
		return ChatAnswer{}, errors.New("the stream ended before a finish_reason or [DONE]")
	}
	msg := s.message
	if msg == nil {
		msg = map[string]any{}
	}
	if _, ok := msg["role"]; !ok {
		msg["role"] = "assistant"
	}
	if _, ok := msg["content"]; !ok {
		msg["content"] = nil
	}
	if calls, ok := msg["tool_calls"].([]any); ok {
		sort.SliceStable(calls, func(i, j int) bool { return indexOf(calls[i]) < indexOf(calls[j]) })
		for _, c := range calls {
			if co, ok := c.(map[string]any); ok {
				delete(co, "index")
			}
		}
	}
	raw, err := turn.Marshal(msg)
	if err != nil {
		return ChatAnswer{}, err
	}
	return ChatAnswer{Message: raw, FinishReason: s.finish, Usage: s.usage}, nil
}

func indexOf(v any) int64 {
	o, _ := v.(map[string]any)
	n, _ := o["index"].(json.Number)
	i, _ := n.Int64()
	return i
}

// ReadChatStream assembles a whole streamed Chat Completions answer.
func ReadChatStream(r io.Reader) (ChatAnswer, error) {
	var s ChatStream
	if err := sse.Read(r, s.Add); err != nil {
		return ChatAnswer{}, err
	}
	return s.Answer()
}
