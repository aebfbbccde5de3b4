package anthropic_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// agentBody is an agent's request as a client sends it: streamed, with
// thinking, context management, a tool and breakpoints on the system
// prompt and the last message.
const agentBody = `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,"metadata":{"user_id":"u1"},` +
	`"thinking":{"type":"enabled","budget_tokens":4000},` +
	`"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]},` +
	`"system":[{"type":"text","text":"You are a careful coding agent.","cache_control":{"type":"ephemeral"}}],` +
	`"tools":[{"name":"Read","description":"Read a file.","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],` +
	`"messages":[{"role":"user","content":"Fix the flaky test."},` +
	`{"role":"assistant","content":[{"type":"text","text":"Reading it."},{"type":"tool_use","id":"t1","name":"Read","input":{"path":"a_test.go"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"package a","cache_control":{"type":"ephemeral"}}]}]}`

func forkRequest() llm.Request {
	return llm.Request{
		Tenant: "acme", Task: llm.TaskRecall, Model: "claude-haiku-4-5",
		System:     "Pick the memories worth showing.",
		Messages:   []llm.Message{{Role: "user", Content: turn.Content{text("the unforked ask")}}},
		MaxTokens:  500,
		JSONSchema: json.RawMessage(`{"type":"object","properties":{"memories":{"type":"array"}}}`),
		Session:    "s1",
		Ask:        turn.Content{text("Candidates: testing.md")},
		Prefix: &llm.Prefix{
			Model: "claude-sonnet-4-5", Body: json.RawMessage(agentBody),
			Reply: json.RawMessage(`[{"type":"text","text":"The test races on a timer."}]`),
			Beta:  "context-management-2025-06-27",
		},
	}
}

func TestAForkSendsTheAgentsRequestWithTheAskAppended(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Final("Here it is:\n```json\n{\"memories\": [\"testing.md\"]}\n```"), nil
	}})
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-test", BaseURL: up.URL})
	require.NoError(t, err)

	resp, err := p.Complete(context.Background(), forkRequest())
	require.NoError(t, err)
	require.True(t, resp.Forked)
	require.JSONEq(t, `{"memories": ["testing.md"]}`, resp.Text, "the JSON the answer holds")

	calls := up.Messages()
	require.Len(t, calls, 1)
	require.Equal(t, "context-management-2025-06-27", calls[0].Header.Get("anthropic-beta"))
	var sent, agent map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(calls[0].Body, &sent))
	require.NoError(t, json.Unmarshal([]byte(agentBody), &agent))
	for _, field := range []string{"system", "tools", "thinking", "context_management"} {
		require.JSONEq(t, string(agent[field]), string(sent[field]), "%s goes as the agent sent it", field)
	}
	require.JSONEq(t, `"claude-sonnet-4-5"`, string(sent["model"]), "the agent's model, whose cache it is")
	require.JSONEq(t, `4500`, string(sent["max_tokens"]), "the ask's 500 on top of the thinking budget")
	require.NotContains(t, sent, "stream")
	require.NotContains(t, sent, "metadata")

	var sentMsgs, agentMsgs []json.RawMessage
	require.NoError(t, json.Unmarshal(sent["messages"], &sentMsgs))
	require.NoError(t, json.Unmarshal(agent["messages"], &agentMsgs))
	require.Len(t, sentMsgs, len(agentMsgs)+2, "the agent's messages, its answer, the ask")
	for i := range agentMsgs {
		require.JSONEq(t, string(agentMsgs[i]), string(sentMsgs[i]), "message %d unchanged, breakpoint included", i)
	}
	require.JSONEq(t, `{"role":"assistant","content":[{"type":"text","text":"The test races on a timer."}]}`, string(sentMsgs[len(agentMsgs)]))
	ask := calls[0].Request.Last()
	require.Equal(t, "user", ask.Role)
	for _, want := range []string{"background work on the conversation above", "Pick the memories worth showing.", "Candidates: testing.md", `"memories"`} {
		require.Contains(t, ask.Text(), want)
	}
	require.NotContains(t, ask.Text(), "the unforked ask")
}

func TestAForkThatCallsAToolIsMadeAgainUnforked(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{Script: func(r *upstream.Request) (upstream.Reply, error) {
		if strings.Contains(r.Last().Text(), "background work") {
			return upstream.Say(upstream.ToolUse("Read", map[string]string{"path": "b.go"})), nil
		}
		return upstream.Say(upstream.ToolUse(anthropic.AnswerTool, map[string][]string{"memories": {"testing.md"}})), nil
	}})
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-test", BaseURL: up.URL})
	require.NoError(t, err)

	resp, err := p.Complete(context.Background(), forkRequest())
	require.NoError(t, err)
	require.False(t, resp.Forked)
	require.JSONEq(t, `{"memories": ["testing.md"]}`, resp.Text)
	calls := up.Messages()
	require.Len(t, calls, 2, "the fork, then the ordinary call")
	require.Equal(t, "claude-haiku-4-5", calls[1].Request.Model, "the ordinary call goes to the task's model")
	require.Contains(t, calls[1].Request.Last().Text(), "the unforked ask")
	total := upstream.Sum(calls)
	require.Equal(t, total.InputTokens+total.CacheReadInputTokens+total.CacheCreationInputTokens,
		resp.Usage.InputTokens+resp.Usage.CacheReadTokens+resp.Usage.CacheWriteTokens, "both calls are accounted")
}

func TestWithoutAPrefixTheCallIsOrdinary(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Say(upstream.ToolUse(anthropic.AnswerTool, map[string][]string{"memories": {}})), nil
	}})
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-test", BaseURL: up.URL})
	require.NoError(t, err)
	req := forkRequest()
	req.Prefix = nil
	forks := llm.WithForks(p, func(context.Context, string, string) (*llm.Prefix, error) { return nil, nil })
	resp, err := forks.Complete(context.Background(), req)
	require.NoError(t, err)
	require.False(t, resp.Forked)
	require.Equal(t, "claude-haiku-4-5", up.Messages()[0].Request.Model)
}
