package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/jsonvalid"
	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
)

// Request is the part of a Messages API call the scripts and the cache
// model read, parsed from its body.
type Request struct {
	Model     string            `json:"model"`
	MaxTokens int64             `json:"max_tokens"`
	Stream    bool              `json:"stream"`
	System    json.RawMessage   `json:"system"`
	Tools     []json.RawMessage `json:"tools"`
	Messages  []Message         `json:"messages"`
	Thinking  *struct {
		Type string `json:"type"`
	} `json:"thinking"`
	// CacheControl is the top-level cache_control of automatic caching: a
	// breakpoint on the last block.
	CacheControl json.RawMessage `json:"cache_control"`
	// ContextManagement is the context_management object, as sent.
	ContextManagement json.RawMessage `json:"context_management"`
}

// decodeRequest reads a call's body as json.Unmarshal into a Request
// would, for a body whose keys are spelled as the API spells them, but
// checked once and split without encoding/json's scanner (pkg/jsonwalk):
// a long session's request is 600 KB, sent every round, and this stand-in
// for a remote server shares the machine with what it measures. The
// request's raw parts are the body's own bytes, not copies.
func decodeRequest(body []byte) (Request, error) {
	var req Request
	if !jsonvalid.Valid(body) {
		return req, errors.New("the body is not valid JSON")
	}
	fields, err := jsonwalk.SplitObject(body)
	if err != nil {
		return req, fmt.Errorf("the body: %w", err)
	}
	for key, raw := range fields {
		var err error
		switch key {
		case "model":
			err = json.Unmarshal(raw, &req.Model)
		case "max_tokens":
			err = json.Unmarshal(raw, &req.MaxTokens)
		case "stream":
			err = json.Unmarshal(raw, &req.Stream)
		case "thinking":
			err = json.Unmarshal(raw, &req.Thinking)
		case "system":
			req.System = raw
		case "cache_control":
			req.CacheControl = raw
		case "context_management":
			req.ContextManagement = raw
		case "tools":
			req.Tools, err = jsonwalk.SplitArray(raw)
		case "messages":
			req.Messages, err = decodeMessages(raw)
		}
		if err != nil {
			return Request{}, fmt.Errorf("%s: %w", key, err)
		}
	}
	return req, nil
}

// decodeMessages reads a request's valid JSON messages. A message seen
// before (a session's next call resends them all) is not split again: its
// role and where its content lies are remembered by its bytes' digest.
func decodeMessages(raw []byte) ([]Message, error) {
	list, err := jsonwalk.SplitArray(raw)
	if err != nil || list == nil {
		return nil, err
	}
	out := make([]Message, len(list))
	for i, m := range list {
		parts, err := messageParts.ofOrErr(m, splitMessage)
		if err != nil {
			return nil, fmt.Errorf("%d: %w", i, err)
		}
		out[i].Role, out[i].canons = parts.role, parts.canons
		if parts.content[1] > 0 {
			out[i].Content = m[parts.content[0]:parts.content[1]:parts.content[1]]
		}
	}
	return out, nil
}

// message is what decodeMessages takes of a message: its role, the
// offsets in its bytes of its content's start and end (0 and 0 when it has
// none), and the canon of each block of its content, for Measure.
type message struct {
	role    string
	content [2]int
	canons  []canon
}

// messageParts remembers each message's parts by its bytes.
var messageParts memo[message]

// splitMessage is a message's parts.
func splitMessage(m []byte) (message, error) {
	fields, err := jsonwalk.SplitObject(m)
	if err != nil {
		return message{}, err
	}
	var out message
	if role, ok := fields["role"]; ok {
		if plain, ok := jsonwalk.PlainString(role); ok {
			out.role = plain
		} else if err := json.Unmarshal(role, &out.role); err != nil {
			return message{}, fmt.Errorf("role: %w", err)
		}
	}
	if content, ok := fields["content"]; ok {
		// Where in m: any run of m's bytes equal to content is as good.
		start := bytes.Index(m, content)
		out.content = [2]int{start, start + len(content)}
		out.canons = blockCanons(content)
	}
	return out, nil
}

// Message is one message of a Request.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// canons are Content's blocks as Measure takes them, when the
	// message was decoded from a call (nil: Measure works them out).
	canons []canon
}

// ContentBlock is one block of a message's content.
type ContentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// Blocks reads the message's content: a string is one text block; content
// that cannot be read has none.
func (m Message) Blocks() []ContentBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []ContentBlock{{Type: "text", Text: s}}
	}
	var out []ContentBlock
	_ = json.Unmarshal(m.Content, &out) // a content we cannot read has no blocks
	return out
}

// Text is the message's text blocks, joined by line breaks.
func (m Message) Text() string {
	var parts []string
	for _, b := range m.Blocks() {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// IsToolResult is whether a user message answers tool calls.
func (m Message) IsToolResult() bool {
	for _, b := range m.Blocks() {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

// CacheControl is whether a block of the message carries cache_control.
func (m Message) CacheControl() bool {
	_, marked := canonical(m.Content)
	return marked
}

// SystemCacheControl is whether a block of the system prompt carries
// cache_control.
func (r *Request) SystemCacheControl() bool {
	_, marked := canonical(r.System)
	return marked
}

// ToolNames are the names of the tools the call offers, in order.
func (r *Request) ToolNames() []string {
	var names []string
	for _, t := range r.Tools {
		var head struct{ Name string }
		if json.Unmarshal(t, &head) == nil {
			names = append(names, head.Name)
		}
	}
	return names
}

// Round is how many answers the model has given since the last message the
// user typed: 0 for the first call of a user turn, 1 after one tool call
// round, and so on.
func (r *Request) Round() int {
	n := 0
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role == "user" && !m.IsToolResult() {
			return n
		}
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// Last is the call's last message (the zero Message when it has none).
func (r *Request) Last() Message {
	if len(r.Messages) == 0 {
		return Message{}
	}
	return r.Messages[len(r.Messages)-1]
}
