// Package llmtest helps test code that calls models: local HTTP servers
// that speak the Anthropic Messages and OpenAI Chat Completions wire
// formats, answering as a script says and recording what they were sent; a
// handler that makes the builtin provider answer the same scripts; and the
// contract every llm.Provider meets, run against each implementation.
package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Request is a call as a fake server received it, in one shape for every
// wire format.
type Request struct {
	// Path is the URL path that was called.
	Path   string
	Model  string
	System string
	// Messages are the conversation's messages as text (see Flatten). With
	// OpenAI's format, tool results are messages of role "tool".
	Messages []Message
	// Tools are the names of the tools offered, in order (without the
	// Anthropic answer tool that stands for a JSON Schema).
	Tools []string
	// JSON is whether a JSON answer was asked for (Anthropic: a forced
	// tool call; OpenAI: a json_schema or json_object response format).
	JSON      bool
	MaxTokens int64
	// CachedSystem and CachedTools (Anthropic only): whether the last
	// system block and the last tool carry cache_control.
	CachedSystem bool
	CachedTools  bool
	// Header is the request's HTTP header; Body its raw JSON.
	Header http.Header
	Body   json.RawMessage

	answerTool string // Anthropic: the tool a JSON answer is a call of
}

// Message is one message of a Request.
type Message struct {
	Role string
	Text string
}

// Reply is what a script answers: a model's answer, or a failure.
type Reply struct {
	Text      string
	ToolCalls []llm.ToolCall
	// StopReason is the Anthropic-shaped stop reason ("" chooses end_turn,
	// or tool_use when there are tool calls); OpenAI servers send the
	// matching finish reason.
	StopReason string
	// Usage is the usage reported; zero reports an estimate of the request
	// and the reply (bytes / 4).
	Usage llm.Usage
	// Model is the model reported ("" reports the one asked for).
	Model string

	// Fail, when set, makes the call fail with that kind of error, as the
	// provider's API says it (see PromptTooLong, RateLimited, …).
	Fail llm.ErrorKind
	// Status replaces the failure's HTTP status (529: overloaded).
	Status int
	// Actual and Limit are a KindPromptTooLong failure's token counts.
	Actual, Limit int64
	// RetryAfter is sent as a Retry-After hint with the failure.
	RetryAfter time.Duration
	// Hang makes the server answer nothing until the client gives up.
	Hang bool
	// Raw, when set, is the whole body of a 200 answer, sent as it is
	// instead of the wire format: a server answering garbage.
	Raw []byte
}

// Script answers each call a fake server receives. It may be called from
// several goroutines at once.
type Script func(Request) Reply

// Text is a reply with text.
func Text(s string) Reply { return Reply{Text: s} }

// PromptTooLong is the failure of a prompt of actual tokens sent to a
// model whose window holds limit.
func PromptTooLong(actual, limit int64) Reply {
	return Reply{Fail: llm.KindPromptTooLong, Actual: actual, Limit: limit}
}

// RateLimited is a 429.
func RateLimited() Reply { return Reply{Fail: llm.KindRateLimited} }

// ServerError is a 500.
func ServerError() Reply { return Reply{Fail: llm.KindServer} }

// Overloaded is Anthropic's 529 (OpenAI servers send a 503).
func Overloaded() Reply { return Reply{Fail: llm.KindServer, Status: 529} }

// Unauthorized is a 401.
func Unauthorized() Reply { return Reply{Fail: llm.KindAuth} }

// BadRequest is a 400 that is not about length.
func BadRequest() Reply { return Reply{Fail: llm.KindRequest} }

// Hang is a server that never answers.
func Hang() Reply { return Reply{Hang: true} }

// Garbage is a 200 answer whose body is raw, whatever it holds.
func Garbage(raw string) Reply { return Reply{Raw: []byte(raw)} }

// Sequence answers the n-th call with replies[n], and every call after the
// last with the last reply.
func Sequence(replies ...Reply) Script {
	if len(replies) == 0 {
		replies = []Reply{Text("")}
	}
	var (
		mu sync.Mutex
		n  int
	)
	return func(Request) Reply {
		mu.Lock()
		defer mu.Unlock()
		r := replies[min(n, len(replies)-1)]
		n++
		return r
	}
}

// Flatten renders Anthropic-shaped content as the text of a Message: text
// as it is, a tool_use as "[tool_use NAME INPUT]", a tool result as
// "[tool_result ID] CONTENT" (with "(error)" after the id when it is one),
// an image as "[image]", a document as "[document]"; one line each.
// Thinking is left out.
func Flatten(c turn.Content) string {
	var lines []string
	for _, b := range c {
		switch b.Type {
		case turn.BlockText:
			lines = append(lines, b.Text)
		case turn.BlockToolUse:
			lines = append(lines, fmt.Sprintf("[tool_use %s %s]", b.Name, compact(b.Input)))
		case turn.BlockToolResult:
			head := "[tool_result " + b.ToolUseID + "]"
			if b.IsError {
				head += " (error)"
			}
			if b.Content != nil {
				head += " " + Flatten(*b.Content)
			}
			lines = append(lines, head)
		case turn.BlockImage:
			lines = append(lines, "[image]")
		case turn.BlockDocument:
			lines = append(lines, "[document]")
		}
	}
	return strings.Join(lines, "\n")
}

func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	out, _ := turn.Marshal(v)
	return string(out)
}

// Handler makes a builtin provider's handler answer as script says, so the
// builtin provider runs the same scripts as the fake servers:
//
//	builtin.New(map[llm.Task]builtin.Handler{llm.TaskNotes: llmtest.Handler(script)})
//
// A reply's failure becomes an *llm.Error of its kind, garbage (Raw) one of
// KindBadResponse; Hang blocks until ctx is done.
func Handler(script Script) func(context.Context, llm.Request) (llm.Response, error) {
	return func(ctx context.Context, req llm.Request) (llm.Response, error) {
		r := Request{
			Model:     req.Model,
			System:    req.System,
			JSON:      req.JSONSchema != nil,
			MaxTokens: req.MaxTokens,
		}
		for _, m := range req.Messages {
			r.Messages = append(r.Messages, Message{Role: m.Role, Text: Flatten(m.Content)})
		}
		for _, t := range req.Tools {
			r.Tools = append(r.Tools, t.Name)
		}
		reply := script(r)
		switch {
		case reply.Hang:
			<-ctx.Done()
			return llm.Response{}, ctx.Err()
		case reply.Raw != nil:
			return llm.Response{}, &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("llmtest: scripted garbage %.80q", reply.Raw)}
		case reply.Fail != "":
			e := &llm.Error{Kind: reply.Fail, Status: reply.Status, RetryAfter: reply.RetryAfter,
				Err: fmt.Errorf("llmtest: scripted %s", reply.Fail)}
			if reply.Fail == llm.KindPromptTooLong {
				e.Gap = reply.Actual - reply.Limit
			}
			return llm.Response{}, e
		}
		return llm.Response{
			Text:       reply.Text,
			ToolCalls:  toolCalls(reply.ToolCalls, "call_"),
			StopReason: reply.StopReason,
			Model:      reply.Model,
			Usage:      reply.Usage,
		}, nil
	}
}

// toolCalls fills missing ids (prefix and position) and inputs ({}).
func toolCalls(calls []llm.ToolCall, prefix string) []llm.ToolCall {
	out := make([]llm.ToolCall, len(calls))
	for i, c := range calls {
		if c.ID == "" {
			c.ID = fmt.Sprintf("%s%d", prefix, i+1)
		}
		if len(c.Input) == 0 {
			c.Input = json.RawMessage("{}")
		}
		out[i] = c
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// stopReason is the reply's stop reason, defaulted.
func (r Reply) stopReason() string {
	switch {
	case r.StopReason != "":
		return r.StopReason
	case len(r.ToolCalls) > 0:
		return "tool_use"
	default:
		return "end_turn"
	}
}

// usage is the reply's usage, estimated when unset.
func (r Reply) usage(body []byte) llm.Usage {
	if r.Usage != (llm.Usage{}) {
		return r.Usage
	}
	out := len(r.Text)
	for _, c := range r.ToolCalls {
		out += len(c.Name) + len(c.Input)
	}
	return llm.Usage{InputTokens: int64(len(body)/4 + 1), OutputTokens: int64(out/4 + 1)}
}
