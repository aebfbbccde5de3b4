package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Forks reports that the provider forks an agent's request: Anthropic's
// prompt cache serves a fork what the agent's own call wrote.
func (p *Provider) Forks() bool { return true }

// forkFrame opens what a forked call asks, before the task's own framing
// (its system prompt) and request.
const forkFrame = "This message does not come from the user. Mnemos, the service that keeps this " +
	"conversation's context and memory, asks for a piece of background work on the conversation " +
	"above. Do not continue the conversation, do not answer the user, and call no tool: answer in " +
	"text only, exactly as the instructions below ask."

// forkJSON closes a forked call that wants a JSON answer: the answer tool
// cannot be offered without changing the tools the agent's cache holds.
const forkJSON = "Answer with one JSON object and nothing else (no code fence, no prose), valid against this JSON Schema:\n"

// fork makes req's call as a fork of req.Prefix: the agent's request
// unchanged (model, system, tools, thinking, context management and every
// cache breakpoint), the answer it got when that called no tool, and one
// user message holding forkFrame, req.System and req.Ask.
func (p *Provider) fork(ctx context.Context, req llm.Request) (llm.Response, error) {
	body, err := forkBody(req)
	if err != nil {
		return llm.Response{}, &llm.Error{Kind: llm.KindRequest, Err: fmt.Errorf("anthropic: fork: %w", err)}
	}
	opts := []option.RequestOption{option.WithRequestBody("application/json", body)}
	if req.Prefix.Beta != "" {
		opts = append(opts, option.WithHeader("anthropic-beta", req.Prefix.Beta))
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	msg, err := p.client.Messages.New(ctx, sdk.MessageNewParams{}, opts...)
	if err != nil {
		return llm.Response{}, classify(err)
	}
	resp, _ := response(msg, false) // asking no JSON, it fails on nothing
	resp.Forked = true
	if len(resp.ToolCalls) > 0 {
		// One of the agent's tools: the fork cannot run it.
		calls := resp.ToolCalls
		resp.Text, resp.ToolCalls = "", nil
		return resp, &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("anthropic: fork: the model called %s instead of answering", calls[0].Name)}
	}
	if len(req.Tools) > 0 {
		return forkCalls(resp, len(req.Continuation)/2)
	}
	if req.JSONSchema != nil {
		answer, ok := jsonAnswer(resp.Text)
		if !ok {
			return resp, &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("anthropic: fork: asked for JSON, the answer is none (it starts %.80q)", resp.Text)}
		}
		resp.Text = answer
	}
	return resp, nil
}

// forkBody is the request body of a fork of req.Prefix.
func forkBody(req llm.Request) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(req.Prefix.Body, &fields); err != nil {
		return nil, fmt.Errorf("the agent's request: %w", err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(fields["messages"], &msgs); err != nil || len(msgs) == 0 {
		return nil, errors.New("the agent's request has no messages")
	}
	if len(bytes.TrimSpace(req.Prefix.Reply)) > 0 {
		reply, err := json.Marshal(struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}{"assistant", req.Prefix.Reply})
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, reply)
	}
	ask := turn.Content{{Type: turn.BlockText, Text: forkFrame}}
	if s := strings.TrimSpace(req.System); s != "" {
		ask = append(ask, turn.Block{Type: turn.BlockText, Text: s})
	}
	ask = append(ask, req.Ask...)
	switch {
	case len(req.Tools) > 0:
		ask = append(ask, turn.Block{Type: turn.BlockText, Text: forkTools(req.Tools)})
	case req.JSONSchema != nil:
		ask = append(ask, turn.Block{Type: turn.BlockText, Text: forkJSON + string(req.JSONSchema)})
	}
	for _, m := range append([]llm.Message{{Role: "user", Content: ask}}, req.Continuation...) {
		data, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, data)
	}
	var err error
	if fields["messages"], err = json.Marshal(msgs); err != nil {
		return nil, err
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	// Thinking stays as the agent had it (changing it would miss the
	// cache); its budget comes out of max_tokens, so the answer gets its own on top.
	var thinking struct {
		Type         string `json:"type"`
		BudgetTokens int64  `json:"budget_tokens"`
	}
	if json.Unmarshal(fields["thinking"], &thinking) == nil && thinking.Type == "enabled" {
		maxTokens += thinking.BudgetTokens
	}
	fields["max_tokens"] = json.RawMessage(fmt.Sprint(maxTokens))
	if req.Prefix.Model != "" {
		model, _ := json.Marshal(req.Prefix.Model)
		fields["model"] = model
	}
	// The fork waits for its whole answer, and is no part of the agent's traffic.
	delete(fields, "stream")
	delete(fields, "metadata")
	return json.Marshal(fields)
}

// jsonAnswer is the JSON object of a text answer: the whole text, or what
// a code fence or surrounding prose holds.
func jsonAnswer(text string) (string, bool) {
	s := strings.TrimSpace(text)
	if json.Valid([]byte(s)) && strings.HasPrefix(s, "{") {
		return s, true
	}
	i, j := strings.Index(s, "{"), strings.LastIndex(s, "}")
	if i < 0 || j < i {
		return "", false
	}
	s = s[i : j+1]
	if !json.Valid([]byte(s)) {
		return "", false
	}
	return s, true
}

// forkTools describes a forked call's tools, which go in the ask, and how
// to call them: in JSON, as llm.ForkedCalls writes it.
func forkTools(tools []llm.Tool) string {
	var b strings.Builder
	b.WriteString("You have these tools for this work (and only these; the conversation's own tools are not for it):\n")
	for _, t := range tools {
		fmt.Fprintf(&b, "- %s: %s Input JSON Schema: %s\n", t.Name, strings.TrimSpace(t.Description), compactJSON(t.InputSchema))
	}
	b.WriteString("\nAnswer with one JSON object and nothing else: " +
		`{"tool_calls": [{"name": "<tool>", "input": {…}}, …], "text": "<optional note>"}. ` +
		"The calls run in order and their results come back in the next message. " +
		`When the work is done, answer {"tool_calls": []}.`)
	return b.String()
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "{}"
	}
	return b.String()
}

// forkCalls reads the tool calls of a forked answer (forkTools,
// llm.ReadForkedCalls). An answer with no JSON in it is a final answer in
// words.
func forkCalls(resp llm.Response, turns int) (llm.Response, error) {
	answer, ok := jsonAnswer(resp.Text)
	if !ok {
		return resp, nil
	}
	calls, text, err := llm.ReadForkedCalls([]byte(answer), turns)
	if err != nil {
		return resp, &llm.Error{Kind: llm.KindBadResponse, Err: fmt.Errorf("anthropic: fork: %w", err)}
	}
	resp.Text, resp.ToolCalls = text, calls
	if len(calls) > 0 {
		resp.StopReason = string(sdk.StopReasonToolUse)
	}
	return resp, nil
}
