// Package builtin is the deterministic, offline llm.Provider: there is no
// model. Each task is answered by a handler the owning package registers
// (the compactor's extractive summarizer, say); a task without one is
// unsupported.
package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
)

// Name is the provider's kind, and the Model of every response.
const Name = "builtin"

// Handler answers the calls of one task.
type Handler func(ctx context.Context, req llm.Request) (llm.Response, error)

// Provider dispatches each call to the handler of its task.
type Provider struct {
	handlers map[llm.Task]Handler
}

// New returns a provider answering each task with its handler. The map is
// copied; a nil handler counts as none.
func New(handlers map[llm.Task]Handler) *Provider {
	return &Provider{handlers: maps.Clone(handlers)}
}

// Name returns "builtin".
func (p *Provider) Name() string { return Name }

// Complete runs req.Task's handler, or fails with KindUnsupported. What the
// handler leaves empty is filled in: Model "builtin", StopReason "end_turn"
// ("tool_use" when it made tool calls), and a Usage estimated from the
// bytes that went in and came out (tokens.Estimate*: about 4 bytes a
// token). A handler's error that is not an *llm.Error is wrapped: a
// deadline becomes KindTimeout. When req.JSONSchema is set, an answer that
// is not JSON is KindBadResponse.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	h := p.handlers[req.Task]
	if h == nil {
		return llm.Response{}, &llm.Error{Kind: llm.KindUnsupported,
			Err: fmt.Errorf("builtin: no handler for task %q", req.Task)}
	}
	if err := ctx.Err(); err != nil {
		return llm.Response{}, wrap(req.Task, err)
	}
	resp, err := h(ctx, req)
	if err != nil {
		return llm.Response{}, wrap(req.Task, err)
	}
	if resp.Model == "" {
		resp.Model = Name
	}
	if resp.StopReason == "" {
		resp.StopReason = "end_turn"
		if len(resp.ToolCalls) > 0 {
			resp.StopReason = "tool_use"
		}
	}
	if resp.Usage == (llm.Usage{}) {
		resp.Usage = llm.Usage{InputTokens: estimateInput(req), OutputTokens: estimateOutput(resp)}
	}
	if req.JSONSchema != nil && !json.Valid([]byte(resp.Text)) {
		return resp, &llm.Error{Kind: llm.KindBadResponse,
			Err: fmt.Errorf("builtin: task %q: asked for JSON, the handler answered %.200q", req.Task, resp.Text)}
	}
	return resp, nil
}

func wrap(task llm.Task, err error) error {
	if llm.KindOf(err) != "" {
		return err
	}
	err = fmt.Errorf("builtin: task %q: %w", task, err)
	if errors.Is(err, context.DeadlineExceeded) {
		return &llm.Error{Kind: llm.KindTimeout, Err: err}
	}
	return err
}

// estimateInput is the estimate of everything the request carries.
func estimateInput(req llm.Request) int64 {
	n := bytesToTokens(len(req.System) + len(req.JSONSchema))
	for _, m := range req.Messages {
		n += tokens.EstimateContent(m.Content)
	}
	for _, t := range req.Tools {
		n += bytesToTokens(len(t.Name) + len(t.Description) + len(t.InputSchema))
	}
	return n
}

// estimateOutput is the estimate of the answer.
func estimateOutput(resp llm.Response) int64 {
	n := bytesToTokens(len(resp.Text))
	for _, c := range resp.ToolCalls {
		n += bytesToTokens(len(c.Name) + len(c.Input))
	}
	return n
}

// bytesToTokens is ceil(n/4).
func bytesToTokens(n int) int64 { return int64(n+3) / 4 }
