package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Request is a call's body as the upstream reads it.
type Request struct {
	Model          string
	Stream         bool
	Instructions   string
	PromptCacheKey string
	// Tools is the tools' JSON as sent.
	Tools json.RawMessage
	Items []Item
	// Session is the session-id header the Codex CLI sends; Kind its
	// x-codex-turn-metadata's request_kind ("turn", "compaction"), ""
	// from other clients.
	Session, Kind string
}

// Item is one input item, kept as sent beside what a script reads of it.
type Item struct {
	Raw  json.RawMessage
	Type string
	// Role and Text are a message's; Text joins its text parts.
	Role, Text string
	// CallID, Name and Arguments are a function_call's; CallID and Output
	// a function_call_output's.
	CallID, Name, Arguments, Output string
}

// decodeRequest reads a body, refusing what the API refuses first: no
// model, no input.
func decodeRequest(body []byte, h http.Header) (*Request, error) {
	var wire struct {
		Model          string          `json:"model"`
		Stream         bool            `json:"stream"`
		Instructions   string          `json:"instructions"`
		PromptCacheKey string          `json:"prompt_cache_key"`
		Tools          json.RawMessage `json:"tools"`
		Input          json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, fmt.Errorf("the body is not JSON: %w", err)
	}
	if wire.Model == "" {
		return nil, errors.New("missing required parameter: 'model'")
	}
	req := &Request{Model: wire.Model, Stream: wire.Stream, Instructions: wire.Instructions, PromptCacheKey: wire.PromptCacheKey,
		Tools: wire.Tools, Session: h.Get("Session-Id")}
	var meta struct {
		RequestKind string `json:"request_kind"`
	}
	if m := h.Get("X-Codex-Turn-Metadata"); m != "" && json.Unmarshal([]byte(m), &meta) == nil {
		req.Kind = meta.RequestKind
	}
	var text string
	if json.Unmarshal(wire.Input, &text) == nil {
		raw, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": text})
		req.Items = []Item{{Raw: raw, Type: "message", Role: "user", Text: text}}
		return req, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(wire.Input, &raws); err != nil || len(raws) == 0 {
		return nil, errors.New("input: want a string or a non-empty list of items")
	}
	for i, raw := range raws {
		var it struct {
			Type      string          `json:"type"`
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			CallID    string          `json:"call_id"`
			Name      string          `json:"name"`
			Arguments string          `json:"arguments"`
			Output    json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, fmt.Errorf("input[%d]: %w", i, err)
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message" // the API's shorthand: a role and content
		}
		req.Items = append(req.Items, Item{Raw: raw, Type: it.Type, Role: it.Role, Text: textOf(it.Content),
			CallID: it.CallID, Name: it.Name, Arguments: it.Arguments, Output: textOf(it.Output)})
	}
	return req, nil
}

// Outputs counts the request's function_call_output items.
func (r *Request) Outputs() int {
	n := 0
	for _, it := range r.Items {
		if it.Type == "function_call_output" {
			n++
		}
	}
	return n
}

// Messages are the request's message items of role, in order.
func (r *Request) Messages(role string) []Item {
	var out []Item
	for _, it := range r.Items {
		if it.Type == "message" && it.Role == role {
			out = append(out, it)
		}
	}
	return out
}
