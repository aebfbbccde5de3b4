package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Prefix is an agent's last request as it went to the provider, the
// prefix a background call forks: every prompt-cache breakpoint in it
// was written to the provider's cache when the agent's call was served.
type Prefix struct {
	// Model is the model the agent called: a fork must call it too, as a
	// prompt cache is kept per model.
	Model string
	// Body is the request body as sent (Anthropic Messages API JSON).
	Body json.RawMessage
	// Reply is the content of the answer the agent got, when a fork may
	// follow it (it called no tool); nil otherwise.
	Reply json.RawMessage
	// Beta is the request's anthropic-beta header: the features the body
	// uses (context management among them) and the fork needs too.
	Beta string
}

// Prefixes finds the last request of a tenant's session; (nil, nil) when
// none is known.
type Prefixes func(ctx context.Context, tenant, session string) (*Prefix, error)

// Forker is a provider that can fork an agent's request (Request.Prefix).
type Forker interface {
	Provider
	// Forks reports whether the provider's calls use a Prefix.
	Forks() bool
}

// WithForks returns p, giving every call that names a session and asks
// in forked form (Request.Session, Request.Ask) the session's last agent
// request from prefixes. A provider that is no Forker is returned as it
// is. A failed lookup leaves the call unforked: a fork only saves money.
func WithForks(p Provider, prefixes Prefixes) Provider {
	if f, ok := p.(Forker); !ok || !f.Forks() || prefixes == nil {
		return p
	}
	return &forking{p: p, prefixes: prefixes}
}

type forking struct {
	p        Provider
	prefixes Prefixes
}

func (f *forking) Name() string { return f.p.Name() }

func (f *forking) Complete(ctx context.Context, req Request) (Response, error) {
	if req.Prefix == nil && req.Session != "" && len(req.Ask) > 0 {
		if prefix, err := f.prefixes(ctx, req.Tenant, req.Session); err == nil {
			req.Prefix = prefix
		}
	}
	return f.p.Complete(ctx, req)
}

// ForkedTurn is what a tool loop appends to Request.Continuation after a
// turn whose tool calls it ran: the calls as the forked model writes them
// (ForkedCalls), then their results as text. A forked call cannot offer
// the task's tools without changing the agent's, which the cache holds
// first, so its tools are described in the ask and called in JSON.
func ForkedTurn(calls []ToolCall, results []string, isError []bool) []Message {
	var b strings.Builder
	for i, c := range calls {
		status := "result"
		if i < len(isError) && isError[i] {
			status = "error"
		}
		text := ""
		if i < len(results) {
			text = results[i]
		}
		fmt.Fprintf(&b, "<tool-%s name=%q id=%q>\n%s\n</tool-%s>\n", status, c.Name, c.ID, text, status)
	}
	return []Message{
		{Role: "assistant", Content: turn.Content{{Type: turn.BlockText, Text: string(ForkedCalls(calls, ""))}}},
		{Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: strings.TrimSpace(b.String())}}},
	}
}

// forkedAnswer is the JSON a forked model answers with when it has tools
// (ForkedCalls writes it, ReadForkedCalls reads it).
type forkedAnswer struct {
	ToolCalls []forkedCall `json:"tool_calls"`
	Text      string       `json:"text,omitempty"`
}

type forkedCall struct {
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// ForkedCalls is the JSON a forked model answers with when it has tools:
// {"tool_calls": [{"name", "input"}], "text"}.
func ForkedCalls(calls []ToolCall, text string) []byte {
	out := forkedAnswer{ToolCalls: []forkedCall{}, Text: text}
	for _, c := range calls {
		input := c.Input
		if !json.Valid(input) {
			input = json.RawMessage("{}")
		}
		out.ToolCalls = append(out.ToolCalls, forkedCall{c.Name, input})
	}
	data, _ := json.Marshal(out) // names, valid JSON inputs and a string always encode
	return data
}

// ReadForkedCalls reads a forked model's JSON answer (ForkedCalls): its
// tool calls, with ids made up and unique in a loop (turns counts the
// loop's turns so far), and its text.
func ReadForkedCalls(answer []byte, turns int) ([]ToolCall, string, error) {
	var out forkedAnswer
	if err := json.Unmarshal(answer, &out); err != nil {
		return nil, "", fmt.Errorf("the tool calls do not read: %w", err)
	}
	var calls []ToolCall
	for i, c := range out.ToolCalls {
		if c.Name == "" {
			return nil, "", fmt.Errorf("tool call %d names no tool", i+1)
		}
		input := c.Input
		if !json.Valid(input) || string(input) == "null" {
			input = json.RawMessage("{}")
		}
		calls = append(calls, ToolCall{ID: fmt.Sprintf("fork_%d_%d", turns+1, i+1), Name: c.Name, Input: input})
	}
	return calls, out.Text, nil
}
