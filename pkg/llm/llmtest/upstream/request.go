package upstream

import (
	"encoding/json"
	"strings"
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

// Message is one message of a Request.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
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
