package api

import (
	"encoding/json"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Context is the answer to GET and POST /v1/sessions/{id}/context: what to
// send the model next, in the Anthropic Messages shape, and the session's
// token state.
type Context struct {
	// System are the system blocks (the memory section).
	System []turn.Block `json:"system"`
	// Messages are exactly the model API's message objects.
	Messages  []Message `json:"messages"`
	SessionID string    `json:"session_id"`
	// MessageUUIDs is parallel to Messages: the stored message's uuid, or ""
	// for a message a compaction made (boundary and summary, restored files).
	MessageUUIDs []string `json:"message_uuids"`
	// CacheBreakpoints suggest where to set cache_control.
	CacheBreakpoints []Breakpoint `json:"cache_breakpoints"`
	// Tokens is the accountant's count and thresholds; ContextTokens the
	// estimate of the rendered context.
	Tokens        Tokens `json:"tokens"`
	ContextTokens int64  `json:"context_tokens"`
	// Compaction is the latest compaction, the one the context starts with
	// (null when there is none).
	Compaction *CompactionRef `json:"compaction"`
	// ClearedToolResults counts the tool results micro-compaction cleared.
	ClearedToolResults int   `json:"cleared_tool_results"`
	CompactionInFlight bool  `json:"compaction_in_flight"`
	Epoch              int64 `json:"epoch"`
	// LLMProvider is the provider summaries come from ("builtin" when no
	// model is configured).
	LLMProvider string `json:"llm_provider"`
	// ContextManagement answers the edits of a POST: what they clear in
	// this context, and the compaction the compaction edit made.
	ContextManagement *ContextManagement `json:"context_management,omitempty"`
}

// Message is a message of a context, as the model API takes it.
type Message struct {
	Role    string       `json:"role"`
	Content turn.Content `json:"content"`
}

// SystemMessage is the Breakpoint.Message of a breakpoint in the system
// blocks.
const SystemMessage = -1

// Breakpoint suggests a cache_control position: block Block of message
// Message, or of the system blocks when Message is SystemMessage.
type Breakpoint struct {
	Message int `json:"message"`
	Block   int `json:"block"`
}

// InSystem reports whether the breakpoint is in the system blocks.
func (b Breakpoint) InSystem() bool { return b.Message == SystemMessage }

// CompactionRef names the compaction a context starts with.
type CompactionRef struct {
	ID         string    `json:"id"`
	Trigger    string    `json:"trigger"`
	Method     string    `json:"method"`
	Direction  string    `json:"direction,omitempty"`
	PreTokens  int64     `json:"pre_tokens"`
	PostTokens int64     `json:"post_tokens"`
	FinishedAt time.Time `json:"finished_at"`
}

// ContextManagement is the context_management of a POST's answer, shaped
// like the provider's: what each edit clears in the context answered
// (every cut recorded so far, so the same context answers the same), and
// the compaction the compaction edit made, when it made one.
type ContextManagement struct {
	AppliedEdits []AppliedEdit `json:"applied_edits"`
}

// AppliedEdit is one context-management edit's effect on the context
// answered.
type AppliedEdit struct {
	// Type is the edit's: clear_tool_uses_20250919, clear_thinking_20251015
	// or compact_20260112.
	Type string `json:"type"`
	// ClearedToolUses counts tool uses whose result or input is cleared
	// (clear_tool_uses); ClearedThinkingTurns turns whose thinking is
	// dropped (clear_thinking).
	ClearedToolUses      int `json:"cleared_tool_uses,omitempty"`
	ClearedThinkingTurns int `json:"cleared_thinking_turns,omitempty"`
	// ClearedInputTokens is the input tokens that saves: for a compaction,
	// its pre_tokens less its post_tokens.
	ClearedInputTokens int64 `json:"cleared_input_tokens"`
	// The compaction edit's: the compaction, its status (completed, or
	// still running when the wait ran out) and whether the answer paused
	// after it.
	CompactionID string `json:"compaction_id,omitempty"`
	Status       string `json:"status,omitempty"`
	Paused       bool   `json:"paused,omitempty"`
}

// ContextRequest is the body of POST /v1/sessions/{id}/context:
// Anthropic's context_management object, {"edits": [...]}, which the
// server checks (pkg/context/ctxedit). An empty body, or one without it, edits
// nothing.
type ContextRequest struct {
	ContextManagement json.RawMessage `json:"context_management,omitempty"`
}
