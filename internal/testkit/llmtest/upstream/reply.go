package upstream

import (
	"net/http"
	"time"
)

// Reply is one scripted answer: its blocks in order and its stop reason,
// or a failure.
type Reply struct {
	Blocks []Block
	// StopReason is sent as it is; "" is tool_use when a block is a tool
	// call, else end_turn.
	StopReason string
	// Error, when set, is sent instead of an answer.
	Error *APIError
}

// Block is a text, thinking or tool_use content block of a Reply.
type Block struct {
	Type  string // "text", "thinking" or "tool_use"
	Text  string // the text or the thinking
	Name  string // tool_use: the tool
	Input any    // tool_use: its input, encoded as JSON
}

// Text is a text block.
func Text(s string) Block { return Block{Type: "text", Text: s} }

// Thinking is a thinking block; it is sent only to a call that enables
// thinking, with a made-up signature.
func Thinking(s string) Block { return Block{Type: "thinking", Text: s} }

// ToolUse is a call of the tool name with input.
func ToolUse(name string, input any) Block { return Block{Type: "tool_use", Name: name, Input: input} }

// Say is a reply of blocks.
func Say(blocks ...Block) Reply { return Reply{Blocks: blocks} }

// Final is a reply of one text block, ending the turn.
func Final(s string) Reply { return Say(Text(s)) }

// APIError is a failure in the Messages API's error shape:
// {"type":"error","error":{"type":Type,"message":Message}}.
type APIError struct {
	Status  int
	Type    string
	Message string
	// RetryAfter, when positive, is sent as the retry-after header, in
	// whole seconds rounded up.
	RetryAfter time.Duration
}

// Fail is a reply that fails with e.
func Fail(e APIError) Reply { return Reply{Error: &e} }

// RateLimited is a 429 rate_limit_error asking to retry after d.
func RateLimited(d time.Duration) Reply {
	return Fail(APIError{Status: http.StatusTooManyRequests, Type: "rate_limit_error",
		Message: "This request would exceed the rate limit for your organization. Please try again later.", RetryAfter: d})
}

// Overloaded is a 529 overloaded_error asking to retry after d.
func Overloaded(d time.Duration) Reply {
	return Fail(APIError{Status: 529, Type: "overloaded_error", Message: "Overloaded", RetryAfter: d})
}

// ServerError is a 500 api_error.
func ServerError() Reply {
	return Fail(APIError{Status: http.StatusInternalServerError, Type: "api_error", Message: "Internal server error"})
}
