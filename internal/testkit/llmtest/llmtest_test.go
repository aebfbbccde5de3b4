package llmtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
)

func post(t *testing.T, url, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out), "%s", data)
	return res.StatusCode, res.Header, out
}

func TestSequence(t *testing.T) {
	t.Parallel()
	s := llmtest.Sequence(llmtest.RateLimited(), llmtest.Text("a"), llmtest.Text("b"))
	var got []llmtest.Reply
	for range 5 {
		got = append(got, s(llmtest.Request{}))
	}
	require.Equal(t, []llmtest.Reply{llmtest.RateLimited(), llmtest.Text("a"), llmtest.Text("b"), llmtest.Text("b"), llmtest.Text("b")}, got)
	require.Equal(t, llmtest.Text(""), llmtest.Sequence()(llmtest.Request{}))
}

func TestAnthropicServerAnswers(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewAnthropicServer(t, llmtest.Sequence(llmtest.Reply{
		Text:      "Looking.",
		ToolCalls: []llm.ToolCall{{Name: "read", Input: json.RawMessage(`{"path":"a"}`)}},
		Usage:     llm.Usage{InputTokens: 3, OutputTokens: 4, CacheReadTokens: 5, CacheWriteTokens: 6},
	}))
	status, _, body := post(t, srv.URL+"/v1/messages", `{"model":"claude-x","max_tokens":10,
		"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],
		"messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, status)
	want := `{"id":"msg_llmtest","type":"message","role":"assistant","model":"claude-x",
		"content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_1","name":"read","input":{"path":"a"}}],
		"stop_reason":"tool_use","stop_sequence":null,
		"usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":5,"cache_creation_input_tokens":6}}`
	got, err := json.Marshal(body)
	require.NoError(t, err)
	require.JSONEq(t, want, string(got))

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "Be brief.", reqs[0].System)
	require.True(t, reqs[0].CachedSystem)
	require.Equal(t, []llmtest.Message{{Role: "user", Text: "hi"}}, reqs[0].Messages)
}

func TestAnthropicServerRefusesWhatTheAPIRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
	}{
		{"not JSON", `{`},
		{"no model", `{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"no messages", `{"model":"m","max_tokens":1,"messages":[]}`},
		{"system role", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"hi"}]}`},
		{"empty content", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[]}]}`},
		{"blank text", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":" "}]}`},
		{"prefill ends in whitespace", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"so "}]}`},
		{"orphan result", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}]}]}`},
		{"unanswered call", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":"and?"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := llmtest.NewAnthropicServer(t, llmtest.Sequence(llmtest.Text("ok")))
			status, _, body := post(t, srv.URL+"/v1/messages", tc.body)
			require.Equal(t, http.StatusBadRequest, status)
			require.Equal(t, "error", body["type"])
			require.Equal(t, "invalid_request_error", body["error"].(map[string]any)["type"])
			require.Equal(t, 1, srv.Calls(), "refused calls are recorded too")
		})
	}
}

func TestAnthropicServerErrors(t *testing.T) {
	t.Parallel()
	limited := llmtest.RateLimited()
	limited.RetryAfter = 2 * time.Second
	for _, tc := range []struct {
		reply   llmtest.Reply
		status  int
		typ     string
		message string
	}{
		{llmtest.PromptTooLong(210_000, 200_000), 400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"},
		{limited, 429, "rate_limit_error", ""},
		{llmtest.ServerError(), 500, "api_error", "Internal server error"},
		{llmtest.Overloaded(), 529, "overloaded_error", "Overloaded"},
		{llmtest.Unauthorized(), 401, "authentication_error", "invalid x-api-key"},
	} {
		srv := llmtest.NewAnthropicServer(t, llmtest.Sequence(tc.reply))
		status, header, body := post(t, srv.URL+"/v1/messages", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`)
		require.Equal(t, tc.status, status)
		e := body["error"].(map[string]any)
		require.Equal(t, tc.typ, e["type"])
		if tc.message != "" {
			require.Equal(t, tc.message, e["message"])
		}
		if tc.reply.RetryAfter > 0 {
			require.Equal(t, "2000", header.Get("Retry-After-Ms"))
		}
	}
}

func TestOpenAIServer(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(
		llmtest.Reply{Text: "hello", Usage: llm.Usage{InputTokens: 10, OutputTokens: 2, CacheReadTokens: 30}},
		llmtest.PromptTooLong(130_000, 128_000),
	))
	require.Equal(t, "/v1", srv.URL[len(srv.URL)-3:])
	status, _, body := post(t, srv.URL+"/chat/completions", `{"model":"gpt-x","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "chat.completion", body["object"])
	choice := body["choices"].([]any)[0].(map[string]any)
	require.Equal(t, "stop", choice["finish_reason"])
	require.Equal(t, "hello", choice["message"].(map[string]any)["content"])
	usage := body["usage"].(map[string]any)
	require.EqualValues(t, 40, usage["prompt_tokens"])
	require.EqualValues(t, 30, usage["prompt_tokens_details"].(map[string]any)["cached_tokens"])

	// Also without the /v1 prefix, as some clients call it.
	status, _, body = post(t, srv.URL[:len(srv.URL)-3]+"/chat/completions", `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusBadRequest, status)
	e := body["error"].(map[string]any)
	require.Equal(t, "context_length_exceeded", e["code"])
	require.Contains(t, e["message"], "maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens")

	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, "Be brief.", reqs[0].System)
	require.Equal(t, "/chat/completions", reqs[1].Path)
}

func TestOpenAIServerRefusesUnpairedTools(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"orphan tool message": `{"model":"m","messages":[{"role":"tool","tool_call_id":"c1","content":"x"}]}`,
		"unanswered call": `{"model":"m","messages":[{"role":"user","content":"hi"},
			{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
		"user before the answer": `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c1","content":"x"}]}`,
		"no model": `{"messages":[{"role":"user","content":"hi"}]}`,
	} {
		srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
		status, _, out := post(t, srv.URL+"/chat/completions", body)
		require.Equal(t, http.StatusBadRequest, status, name)
		require.Equal(t, "invalid_request_error", out["error"].(map[string]any)["type"], name)
	}
}
