package responses

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mnemos-ai/mnemos/pkg/jsonvalid"
	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
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
// model, no input. known holds the items read before, by their bytes'
// digest: a client sends its whole history every call, and reading it all
// again would make the upstream a large part of what a benchmark times.
func decodeRequest(body []byte, h http.Header, known map[[sha256.Size]byte]Item) (*Request, error) {
	if !jsonvalid.Valid(body) {
		return nil, errors.New("the body is not JSON")
	}
	fields, err := jsonwalk.SplitObject(body)
	if err != nil {
		return nil, fmt.Errorf("the body is not a JSON object: %w", err)
	}
	req := &Request{Tools: fields["tools"], Session: h.Get("Session-Id")}
	for name, into := range map[string]any{"model": &req.Model, "stream": &req.Stream, "instructions": &req.Instructions, "prompt_cache_key": &req.PromptCacheKey} {
		if raw, ok := fields[name]; ok {
			if err := json.Unmarshal(raw, into); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	if req.Model == "" {
		return nil, errors.New("missing required parameter: 'model'")
	}
	var meta struct {
		RequestKind string `json:"request_kind"`
	}
	if m := h.Get("X-Codex-Turn-Metadata"); m != "" && json.Unmarshal([]byte(m), &meta) == nil {
		req.Kind = meta.RequestKind
	}
	input := bytes.TrimSpace(fields["input"])
	if len(input) > 0 && input[0] == '"' {
		var text string
		if err := json.Unmarshal(input, &text); err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		raw, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": text})
		req.Items = []Item{{Raw: raw, Type: "message", Role: "user", Text: text}}
		return req, nil
	}
	raws, err := jsonwalk.SplitArray(input)
	if err != nil || len(raws) == 0 {
		return nil, errors.New("input: want a string or a non-empty list of items")
	}
	for i, raw := range raws {
		sum := sha256.Sum256(raw)
		it, ok := known[sum]
		if !ok {
			if it, err = decodeItem(raw); err != nil {
				return nil, fmt.Errorf("input[%d]: %w", i, err)
			}
			known[sum] = it
		}
		it.Raw = raw
		req.Items = append(req.Items, it)
	}
	return req, nil
}

// decodeItem reads what a script reads of an item.
func decodeItem(raw json.RawMessage) (Item, error) {
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
		return Item{}, err
	}
	if it.Type == "" && it.Role != "" {
		it.Type = "message" // the API's shorthand: a role and content
	}
	return Item{Type: it.Type, Role: it.Role, Text: textOf(it.Content),
		CallID: it.CallID, Name: it.Name, Arguments: it.Arguments, Output: textOf(it.Output)}, nil
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
