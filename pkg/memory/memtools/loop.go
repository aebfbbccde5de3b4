package memtools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// DefaultMaxTurns bounds a loop's model calls (docs/memory.md: at most 5).
const DefaultMaxTurns = 5

// LoopResult is what a loop did.
type LoopResult struct {
	// Turns is how many times the model was called.
	Turns int
	// Capped is set when the model still called tools on its last allowed
	// turn: those calls ran, but the model did not see their results.
	Capped bool
	// StopReason is the model's last stop reason; Text its last text.
	StopReason string
	Text       string
	// ToolCalls counts the calls run; ToolErrors those that were errors.
	ToolCalls, ToolErrors int
	// Usage sums the calls' usage.
	Usage llm.Usage
	// Written, Deleted, Proposals and IndexChanged are the executor's.
	Written      []memory.Name
	Deleted      []memory.Name
	Proposals    []Proposal
	IndexChanged bool
	// Messages is the conversation as it ended, the request's messages first.
	Messages []llm.Message
}

// Loop runs the model with the executor's tools: each turn calls the model,
// runs the tool calls it made (in order) and sends their results back, until
// the model answers without a tool call or maxTurns (DefaultMaxTurns when 0
// or less) calls were made. req holds the system prompt and the first user
// message(s); its Tools, when empty, are the executor's. A failed model call
// ends the loop with its error, keeping what was written until then.
func Loop(ctx context.Context, p llm.Provider, req llm.Request, ex *Executor, maxTurns int) (res LoopResult, err error) {
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	// What the executor did is reported however the loop ends.
	defer func() {
		res.Written, res.Deleted, res.Proposals, res.IndexChanged = ex.Written(), ex.Deleted(), ex.Proposals(), ex.IndexChanged()
	}()
	if len(req.Messages) == 0 {
		return res, errors.New("memtools.Loop: the request has no message")
	}
	if len(req.Tools) == 0 {
		tools, err := ex.Tools(ctx)
		if err != nil {
			return res, err
		}
		req.Tools = tools
	}
	req.Messages = append([]llm.Message(nil), req.Messages...)
	defer func() { res.Messages = req.Messages }()
	for res.Turns < maxTurns {
		resp, err := p.Complete(ctx, req)
		res.Usage = res.Usage.Add(resp.Usage)
		if err != nil {
			return res, fmt.Errorf("memtools.Loop: turn %d: %w", res.Turns+1, err)
		}
		res.Turns++
		res.StopReason, res.Text = resp.StopReason, resp.Text
		req.Messages = append(req.Messages, assistantMessage(resp))
		if len(resp.ToolCalls) == 0 {
			return res, nil
		}
		results := make(turn.Content, 0, len(resp.ToolCalls))
		texts, errs := make([]string, 0, len(resp.ToolCalls)), make([]bool, 0, len(resp.ToolCalls))
		for _, call := range resp.ToolCalls {
			out, err := ex.Run(ctx, call)
			if err != nil {
				return res, fmt.Errorf("memtools.Loop: %s: %w", call.Name, err)
			}
			res.ToolCalls++
			if out.IsError {
				res.ToolErrors++
			}
			text := out.Text
			if strings.TrimSpace(text) == "" {
				text = "(no output)"
			}
			content := turn.Content{{Type: turn.BlockText, Text: text}}
			results = append(results, turn.Block{Type: turn.BlockToolResult, ToolUseID: call.ID, Content: &content, IsError: out.IsError})
			texts, errs = append(texts, text), append(errs, out.IsError)
		}
		req.Messages = append(req.Messages, llm.Message{Role: "user", Content: results})
		// The same turn for a forked call (llm.Request.Continuation).
		req.Continuation = append(req.Continuation, llm.ForkedTurn(resp.ToolCalls, texts, errs)...)
	}
	res.Capped = true
	return res, nil
}

// assistantMessage records the model's answer: its text, then its tool calls.
func assistantMessage(resp llm.Response) llm.Message {
	var c turn.Content
	if strings.TrimSpace(resp.Text) != "" {
		c = append(c, turn.Block{Type: turn.BlockText, Text: resp.Text})
	}
	for _, call := range resp.ToolCalls {
		input := call.Input
		if len(input) == 0 {
			input = []byte("{}")
		}
		c = append(c, turn.Block{Type: turn.BlockToolUse, ID: call.ID, Name: call.Name, Input: input})
	}
	if len(c) == 0 {
		c = turn.Content{{Type: turn.BlockText, Text: "(no answer)"}}
	}
	return llm.Message{Role: "assistant", Content: c}
}
