// Package llm is the one small interface every Mnemos service uses to call a
// language model, with its implementations: Anthropic, OpenAI-compatible
// servers, and builtin (deterministic, offline, no model).
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Task names what a call is for. Each task may use its own model, and usage
// is recorded per tenant and task.
type Task string

// The tasks of the design.
const (
	TaskCompaction Task = "compaction"
	TaskNotes      Task = "notes"
	TaskExtraction Task = "extraction"
	TaskRecall     Task = "recall"
	TaskDreaming   Task = "dreaming"
)

// Tasks lists every task.
var Tasks = []Task{TaskCompaction, TaskNotes, TaskExtraction, TaskRecall, TaskDreaming}

// Message is one conversation message sent to a model. Content blocks are
// Anthropic-shaped (text, image, tool_use, tool_result, …); providers with
// another wire format translate them.
type Message struct {
	Role    string       `json:"role"`
	Content turn.Content `json:"content"`
}

// Tool is a tool the model may call, with the JSON Schema of its input.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is one model call.
type Request struct {
	// Tenant and Task attribute the call's usage and pick its model.
	Tenant string
	Task   Task
	// Model overrides the provider's model for Task when set.
	Model string
	// System is the system prompt. It is the shared prefix of a task's calls,
	// so providers that support prompt caching mark it cacheable.
	System   string
	Messages []Message
	Tools    []Tool
	// MaxTokens bounds the response.
	MaxTokens int64
	// JSONSchema, when set, asks for a JSON object answer matching it (the
	// response's Text is then that JSON).
	JSONSchema json.RawMessage

	// Session names the agent session the call works on, and Ask is the
	// task's request in forked form: what the call asks when it follows
	// the agent's own conversation instead of Messages. With both set,
	// WithForks gives the call the agent's last request (Prefix), and a
	// provider that can fork it (Forker) sends that request unchanged with
	// System and Ask appended, so the provider's prompt cache serves
	// everything the agent has sent; any other provider, or a call without
	// a Prefix, sends System and Messages as always.
	Session string
	Ask     turn.Content
	// Continuation is, for a forked call with Tools, the tool calls made
	// so far and their results, as text after Ask (see ForkedTurn); the
	// same turns are in Messages as tool_use and tool_result blocks, so any
	// call of a loop can go either way.
	Continuation []Message
	// Prefix is the agent's last request, set by WithForks.
	Prefix *Prefix
}

// ToolCall is a tool call the model made.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// Usage is what a call cost, in tokens.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + o.InputTokens,
		OutputTokens:     u.OutputTokens + o.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + o.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + o.CacheWriteTokens,
	}
}

// Total is every token of the call.
func (u Usage) Total() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// Response is a model's answer.
type Response struct {
	Text       string     `json:"text"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	StopReason string     `json:"stop_reason"`
	Model      string     `json:"model"`
	Usage      Usage      `json:"usage"`
	// Forked reports that the call followed the agent's request
	// (Request.Prefix) instead of sending Messages.
	Forked bool `json:"forked,omitempty"`
}

// Provider calls a model.
type Provider interface {
	// Name is the provider's kind: "anthropic", "openai" or "builtin".
	Name() string
	// Complete makes one call. Errors a caller may act on are *Error. When
	// the model answered but the answer could not be used, the returned
	// Response still carries the call's Usage, so it can be accounted.
	Complete(ctx context.Context, req Request) (Response, error)
}

// ErrorKind classifies a failed call.
type ErrorKind string

// Error kinds.
const (
	// KindPromptTooLong: the request did not fit the model's window. Error.Gap,
	// when the provider said by how much, is the excess in tokens.
	KindPromptTooLong ErrorKind = "prompt_too_long"
	// KindRateLimited and KindServer are retried with backoff.
	KindRateLimited ErrorKind = "rate_limited"
	KindServer      ErrorKind = "server"
	KindTimeout     ErrorKind = "timeout"
	// KindBudget: the tenant's daily budget (of tokens or of money) is spent.
	KindBudget ErrorKind = "budget_exhausted"
	// KindBadResponse: the answer could not be used (empty, or not the JSON asked for).
	KindBadResponse ErrorKind = "bad_response"
	KindRequest     ErrorKind = "bad_request"
	KindAuth        ErrorKind = "auth"
	KindUnsupported ErrorKind = "unsupported"
)

// Error is a failed call.
type Error struct {
	Kind ErrorKind
	// Status is the HTTP status, when there was one.
	Status int
	// Gap is how many tokens too long the prompt was, when known (KindPromptTooLong).
	Gap int64
	// RetryAfter is how long the provider asked to wait before a retry, when it said.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("llm: %s (HTTP %d): %v", e.Kind, e.Status, e.Err)
	}
	return fmt.Sprintf("llm: %s: %v", e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns err's kind, or "" when err is not an *Error.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// Retryable reports whether a call that failed with err may succeed when tried again.
func Retryable(err error) bool {
	switch KindOf(err) {
	case KindRateLimited, KindServer, KindTimeout:
		return true
	}
	return false
}
