// Package turn defines the turn event a backend publishes once per model API
// round (schema mnemos.turn.v1), the Anthropic-shaped messages it carries, and
// the decoding and validation every entry point applies to it.
package turn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// SchemaV1 is the first schema version; SchemaV1_1 adds the optional
// request_prefix and client_compaction. This build accepts both: a v1 event
// reads as it always did.
const (
	SchemaV1   = "mnemos.turn.v1"
	SchemaV1_1 = "mnemos.turn.v1.1"
)

// Event is one model API round: the messages added to the conversation since
// the previous response, the model's response, and the usage it reported.
type Event struct {
	Schema          string            `json:"schema"`
	EventID         string            `json:"event_id"`
	TenantID        string            `json:"tenant_id,omitempty"`
	SessionID       string            `json:"session_id"`
	Seq             int64             `json:"seq"`
	AgentID         string            `json:"agent_id,omitempty"`
	MemoryScope     map[string]string `json:"memory_scope,omitempty"`
	Model           string            `json:"model,omitempty"`
	ContextWindow   int64             `json:"context_window,omitempty"`
	MaxOutputTokens int64             `json:"max_output_tokens,omitempty"`
	InputMessages   []Message         `json:"input_messages"`
	Response        *Message          `json:"response,omitempty"`
	Usage           *Usage            `json:"usage,omitempty"`
	// RequestPrefix (v1.1) describes the request's system prompt and tool
	// schemas, which no message carries, so the count before a usage
	// includes them.
	RequestPrefix *RequestPrefix `json:"request_prefix,omitempty"`
	// ClientCompaction (v1.1) says the client compacted its own context
	// before this round: the input messages open the new context (its
	// summary first) and nothing before them is in the request.
	ClientCompaction *ClientCompaction `json:"client_compaction,omitempty"`
	OccurredAt       time.Time         `json:"occurred_at"`
}

// RequestPrefix is a request's system prompt and tools, given whole or by
// size. Whole, Mnemos estimates them; by size, tokens wins over bytes; with
// only the hash, the estimate stored for that hash is used, so a client
// sends the text once and the hash after.
type RequestPrefix struct {
	// System is the request's system field: a string or text blocks.
	System json.RawMessage `json:"system,omitempty"`
	// Tools is the request's tools field: an array of tool definitions.
	Tools json.RawMessage `json:"tools,omitempty"`
	// Tokens is the client's own count of system and tools.
	Tokens int64 `json:"tokens,omitempty"`
	// Bytes is their size, counted at 4 bytes per token when Tokens is not given.
	Bytes int64 `json:"bytes,omitempty"`
	// Hash identifies system and tools as the client chose to hash them.
	Hash string `json:"hash,omitempty"`
}

// ClientCompaction is the client's own compaction before a round.
type ClientCompaction struct {
	// Trigger is "manual" or "auto".
	Trigger string `json:"trigger,omitempty"`
	// PreTokens is the client's count before it compacted.
	PreTokens int64 `json:"pre_tokens,omitempty"`
}

// MainAgent is the agent id of the session's main agent; sub-agents use other ids.
const MainAgent = "main"

// Agent returns the event's agent id, defaulting to the main agent.
func (e *Event) Agent() string {
	if e.AgentID == "" {
		return MainAgent
	}
	return e.AgentID
}

// Messages returns the input messages followed by the response, in conversation order.
func (e *Event) Messages() []Message {
	out := make([]Message, 0, len(e.InputMessages)+1)
	out = append(out, e.InputMessages...)
	if e.Response != nil {
		out = append(out, *e.Response)
	}
	return out
}

// ClosesUserTurn reports whether this round ends the agent's query loop: a
// response without tool_use that stopped with end_turn.
func (e *Event) ClosesUserTurn() bool {
	if e.Response == nil || e.Response.StopReason != "end_turn" {
		return false
	}
	return e.Response.ToolUseCount() == 0
}

// Usage is the token usage the provider reported for the response.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// InputSide is everything the request carried: fresh, cache-written and cache-read input.
func (u Usage) InputSide() int64 {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// Total is input side plus output.
func (u Usage) Total() int64 { return u.InputSide() + u.OutputTokens }

// Message is an Anthropic Messages API message with the id the backend gave it.
type Message struct {
	UUID       string  `json:"uuid"`
	Role       string  `json:"role"`
	Content    Content `json:"content"`
	StopReason string  `json:"stop_reason,omitempty"`
}

// ToolUseCount is the number of tool_use blocks in the message.
func (m Message) ToolUseCount() int {
	n := 0
	for _, b := range m.Content {
		if b.Type == BlockToolUse {
			n++
		}
	}
	return n
}

// Block types of the Anthropic Messages API that Mnemos understands. Blocks
// of other types are accepted and kept as sent (Block.Raw).
const (
	BlockText             = "text"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
	BlockToolUse          = "tool_use"
	BlockToolResult       = "tool_result"
	BlockImage            = "image"
	BlockDocument         = "document"
)

// Block is one content block. Only the fields of its type are set. The json
// tags are the decoding; MarshalJSON writes a block's required fields even
// when they are empty.
type Block struct {
	Type string `json:"type"`

	// text
	Text      string          `json:"text,omitempty"`
	Citations json.RawMessage `json:"citations,omitempty"`

	// thinking, redacted_thinking
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`

	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`

	// tool_result
	ToolUseID string   `json:"tool_use_id,omitempty"`
	Content   *Content `json:"content,omitempty"`
	IsError   bool     `json:"is_error,omitempty"`

	// image, document
	Source  json.RawMessage `json:"source,omitempty"`
	Title   string          `json:"title,omitempty"`
	Context string          `json:"context,omitempty"`

	CacheControl json.RawMessage `json:"cache_control,omitempty"`

	// Raw is a block of a type this build does not know (a tool_reference,
	// a server tool's result), as sent less its cache_control: it is stored
	// and sent on as it came, and only its size is counted.
	Raw json.RawMessage `json:"-"`
}

// Known reports whether Mnemos understands blocks of type t; others are
// kept as sent (Block.Raw).
func Known(t string) bool {
	switch t {
	case BlockText, BlockThinking, BlockRedactedThinking, BlockToolUse, BlockToolResult, BlockImage, BlockDocument:
		return true
	}
	return false
}

// UnmarshalJSON decodes a block; one of a type Mnemos does not know keeps
// its JSON (Raw), its cache_control apart.
func (b *Block) UnmarshalJSON(data []byte) error {
	type plain Block // without this method
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*b = Block(p)
	if Known(b.Type) {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	delete(fields, "cache_control")
	raw, err := Marshal(fields) // keys sorted: the same block always has the same bytes
	if err != nil {
		return err
	}
	b.Raw = raw
	return nil
}

// Content is a message's content: on the wire either a plain string or an
// array of blocks; in memory always blocks (a string becomes one text block).
type Content []Block

// UnmarshalJSON accepts a string or an array of blocks.
func (c *Content) UnmarshalJSON(data []byte) error {
	if slowContentOnly.Load() {
		return c.unmarshalSlowly(data)
	}
	if blocks, ok := decodeContent(data); ok {
		*c = blocks
		return nil
	}
	return c.unmarshalSlowly(data)
}

// unmarshalSlowly is UnmarshalJSON through encoding/json, for what
// decodeContent declines (fastcontent.go).
func (c *Content) unmarshalSlowly(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*c = Content{{Type: BlockText, Text: s}}
		return nil
	}
	var blocks []Block
	if err := json.Unmarshal(data, &blocks); err != nil {
		return fmt.Errorf("content: want a string or an array of blocks: %w", err)
	}
	*c = blocks
	return nil
}

// MarshalJSON always writes an array, so equal content has equal bytes.
// Nothing is HTML-escaped (see Marshal).
func (c Content) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("[]"), nil
	}
	// Joined by hand: the blocks' encodings are compact already, and an
	// encoder would scan them once more for each level of nesting.
	buf := make([]byte, 0, 128*len(c))
	buf = append(buf, '[')
	for i := range c {
		if i > 0 {
			buf = append(buf, ',')
		}
		if Known(c[i].Type) && !slowContentOnly.Load() {
			if out, ok := appendBlock(buf, &c[i]); ok { // straight into buf, no copy of each block
				buf = out
				continue
			}
		}
		data, err := c[i].MarshalJSON()
		if err != nil {
			return nil, err
		}
		buf = append(buf, data...)
	}
	return append(buf, ']'), nil
}

// wireBlock is a Block as written: a *string field is written when set, even
// to "", so a block type's required fields survive an empty value; every
// other field is written only when it is not empty.
type wireBlock struct {
	Type         string          `json:"type"`
	Text         *string         `json:"text,omitempty"`
	Citations    json.RawMessage `json:"citations,omitempty"`
	Thinking     *string         `json:"thinking,omitempty"`
	Signature    *string         `json:"signature,omitempty"`
	Data         *string         `json:"data,omitempty"`
	ID           *string         `json:"id,omitempty"`
	Name         *string         `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    *string         `json:"tool_use_id,omitempty"`
	Content      *Content        `json:"content,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	Source       json.RawMessage `json:"source,omitempty"`
	Title        *string         `json:"title,omitempty"`
	Context      *string         `json:"context,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// emptyObject stands in for a required JSON object that is not set.
var emptyObject = json.RawMessage("{}")

// MarshalJSON writes the fields the block's type requires even when they are
// empty (text: text; thinking: thinking and signature; redacted_thinking:
// data; tool_use: id, name and input, {} when unset; tool_result:
// tool_use_id; image and document: source, {} when unset), and any other
// field only when it is set. Nothing is HTML-escaped (see Marshal).
func (b Block) MarshalJSON() ([]byte, error) {
	if b.Raw != nil && !Known(b.Type) {
		if len(b.CacheControl) == 0 || len(b.Raw) < 2 {
			return b.Raw, nil
		}
		out := append([]byte{}, b.Raw[:len(b.Raw)-1]...)
		if len(b.Raw) > 2 {
			out = append(out, ',')
		}
		out = append(append(append(out, `"cache_control":`...), b.CacheControl...), '}')
		return out, nil
	}
	if !slowContentOnly.Load() {
		if out, ok := appendBlock(make([]byte, 0, 64+len(b.Text)+len(b.Input)), &b); ok {
			return out, nil
		}
	}
	w := wireBlock{
		Type:         b.Type,
		Text:         optional(b.Text),
		Citations:    b.Citations,
		Thinking:     optional(b.Thinking),
		Signature:    optional(b.Signature),
		Data:         optional(b.Data),
		ID:           optional(b.ID),
		Name:         optional(b.Name),
		Input:        b.Input,
		ToolUseID:    optional(b.ToolUseID),
		Content:      b.Content,
		IsError:      b.IsError,
		Source:       b.Source,
		Title:        optional(b.Title),
		Context:      optional(b.Context),
		CacheControl: b.CacheControl,
	}
	switch b.Type {
	case BlockText:
		w.Text = &b.Text
	case BlockThinking:
		w.Thinking, w.Signature = &b.Thinking, &b.Signature
	case BlockRedactedThinking:
		w.Data = &b.Data
	case BlockToolUse:
		w.ID, w.Name = &b.ID, &b.Name
		if len(w.Input) == 0 {
			w.Input = emptyObject
		}
	case BlockToolResult:
		w.ToolUseID = &b.ToolUseID
	case BlockImage, BlockDocument:
		if len(w.Source) == 0 {
			w.Source = emptyObject
		}
	}
	return Marshal(w)
}

// optional points at s when it is set, so an empty optional field is left out.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Marshal encodes v as JSON the way Mnemos stores and forwards events: no
// HTML escaping (json.Marshal writes <, > and & as \u003c…, inside strings
// and inside raw tool inputs alike, which changes byte sizes and so token
// estimates after a round trip) and no trailing newline.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
