package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

type setup struct {
	srv *llmtest.Server
	p   *anthropic.Provider
}

func newSetup(t *testing.T, script llmtest.Script, cfg anthropic.Config) setup {
	t.Helper()
	srv := llmtest.NewAnthropicServer(t, script)
	cfg.BaseURL = srv.URL
	if cfg.APIKey == "" {
		cfg.APIKey = "sk-test"
	}
	p, err := anthropic.New(cfg)
	require.NoError(t, err)
	return setup{srv: srv, p: p}
}

// body decodes the raw JSON of the n-th request the server received.
func (s setup) body(t *testing.T, n int) map[string]any {
	t.Helper()
	reqs := s.srv.Requests()
	require.Greater(t, len(reqs), n)
	var m map[string]any
	require.NoError(t, json.Unmarshal(reqs[n].Body, &m))
	return m
}

func text(s string) turn.Block { return turn.Block{Type: turn.BlockText, Text: s} }

func TestNewNeedsAKey(t *testing.T) {
	t.Parallel()
	_, err := anthropic.New(anthropic.Config{})
	require.Error(t, err)
}

func TestRequestTranslation(t *testing.T) {
	t.Parallel()
	s := newSetup(t, llmtest.Sequence(llmtest.Text("ok")), anthropic.Config{APIKey: "sk-secret"})
	png := json.RawMessage(`{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`)
	req := llm.Request{
		Task:      llm.TaskNotes,
		System:    "Keep notes.",
		MaxTokens: 1000,
		Tools: []llm.Tool{
			{Name: "read", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
			{Name: "write", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"body":{"type":"string"}},"additionalProperties":false}`)},
		},
		Messages: []llm.Message{
			{Role: "user", Content: turn.Content{text("Look at this."), {Type: turn.BlockImage, Source: png}, text("")}},
			{Role: "assistant", Content: turn.Content{
				{Type: turn.BlockThinking, Thinking: "hmm", Signature: "sig"},
				text("Reading it."),
				{Type: turn.BlockToolUse, ID: "toolu_1", Name: "read", Input: json.RawMessage(`{"path":"a.go"}`)},
				{Type: turn.BlockToolUse, ID: "toolu_2", Name: "read"},
			}},
			{Role: "user", Content: turn.Content{
				{Type: turn.BlockToolResult, ToolUseID: "toolu_1", Content: &turn.Content{text("package a"), {Type: turn.BlockImage, Source: png}}},
				{Type: turn.BlockToolResult, ToolUseID: "toolu_2", IsError: true, Content: &turn.Content{text("no path")}},
			}},
			{Role: "assistant", Content: turn.Content{{Type: turn.BlockRedactedThinking, Data: "xyz"}}},
		},
	}
	_, err := s.p.Complete(context.Background(), req)
	require.NoError(t, err)

	got := s.srv.Requests()[0]
	require.Equal(t, "sk-secret", got.Header.Get("X-Api-Key"))
	require.NotEmpty(t, got.Header.Get("Anthropic-Version"))
	require.True(t, got.CachedSystem, "the system prompt is cacheable")
	require.True(t, got.CachedTools, "the last tool is cacheable")
	require.False(t, got.JSON)

	want := `{
		"model": "` + anthropic.DefaultModel + `",
		"max_tokens": 1000,
		"system": [{"type": "text", "text": "Keep notes.", "cache_control": {"type": "ephemeral"}}],
		"tools": [
			{"name": "read", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
			{"name": "write", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "body": {"type": "string"}}, "additionalProperties": false},
			 "cache_control": {"type": "ephemeral"}}
		],
		"messages": [
			{"role": "user", "content": [
				{"type": "text", "text": "Look at this."},
				{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
			]},
			{"role": "assistant", "content": [
				{"type": "text", "text": "Reading it."},
				{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.go"}},
				{"type": "tool_use", "id": "toolu_2", "name": "read", "input": {}}
			]},
			{"role": "user", "content": [
				{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
					{"type": "text", "text": "package a"},
					{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
				]},
				{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true, "content": [{"type": "text", "text": "no path"}]}
			]}
		]
	}`
	require.JSONEq(t, want, string(got.Body), "thinking dropped, the empty text dropped, the thinking-only message dropped")
}

func TestNoSystemNoTools(t *testing.T) {
	t.Parallel()
	s := newSetup(t, llmtest.Sequence(llmtest.Text("ok")), anthropic.Config{})
	_, err := s.p.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: turn.Content{text("hi")}}}})
	require.NoError(t, err)
	b := s.body(t, 0)
	require.NotContains(t, b, "system")
	require.NotContains(t, b, "tools")
	require.NotContains(t, b, "tool_choice")
	require.EqualValues(t, anthropic.DefaultMaxTokens, b["max_tokens"])
}

func TestModelChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  anthropic.Config
		req  llm.Request
		want string
	}{
		{"default", anthropic.Config{}, llm.Request{Task: llm.TaskRecall}, anthropic.DefaultModel},
		{"configured default", anthropic.Config{Model: "claude-haiku-4-5"}, llm.Request{Task: llm.TaskRecall}, "claude-haiku-4-5"},
		{"task model", anthropic.Config{Model: "claude-haiku-4-5", Models: llm.Models{llm.TaskDreaming: "claude-opus-5"}},
			llm.Request{Task: llm.TaskDreaming}, "claude-opus-5"},
		{"request model", anthropic.Config{Models: llm.Models{llm.TaskDreaming: "claude-opus-5"}},
			llm.Request{Task: llm.TaskDreaming, Model: "claude-sonnet-5"}, "claude-sonnet-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, llmtest.Sequence(llmtest.Text("ok")), tc.cfg)
			tc.req.Messages = []llm.Message{{Role: "user", Content: turn.Content{text("hi")}}}
			resp, err := s.p.Complete(context.Background(), tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.want, s.srv.Requests()[0].Model)
			require.Equal(t, tc.want, resp.Model, "the fake answers with the model asked for")
		})
	}
}

func TestJSONIsACallOfTheAnswerTool(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		model  string
		forced bool
	}{
		{"claude-sonnet-4-5", true},
		// Sonnet 5.5, the default, refuses a forced tool (the fake does too):
		// the call offers the answer tool and asks for it in words.
		{"", false},
	} {
		t.Run(fmt.Sprintf("model %q", tc.model), func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, llmtest.Sequence(llmtest.Reply{Text: `{"facts":["a","b"]}`,
				Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}}), anthropic.Config{Model: tc.model})
			schema := `{"type":"object","properties":{"facts":{"type":"array","items":{"type":"string"}}},"required":["facts"],"additionalProperties":false}`
			resp, err := s.p.Complete(context.Background(), llm.Request{
				Messages:   []llm.Message{{Role: "user", Content: turn.Content{text("List the facts.")}}},
				Tools:      []llm.Tool{{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`)}},
				JSONSchema: json.RawMessage(schema),
			})
			require.NoError(t, err)
			require.JSONEq(t, `{"facts":["a","b"]}`, resp.Text)
			require.Empty(t, resp.ToolCalls, "the answer tool's call is the text, not a tool call")
			require.Equal(t, llm.Usage{InputTokens: 10, OutputTokens: 5}, resp.Usage)

			b := s.body(t, 0)
			msgs := b["messages"].([]any)
			last := msgs[len(msgs)-1].(map[string]any)["content"].([]any)
			asked := last[len(last)-1].(map[string]any)["text"]
			if tc.forced {
				require.Equal(t, map[string]any{"type": "tool", "name": anthropic.AnswerTool}, b["tool_choice"])
				require.Equal(t, "List the facts.", asked)
			} else {
				require.NotContains(t, b, "tool_choice")
				require.Contains(t, asked, "calling the answer tool")
			}
			tools := b["tools"].([]any)
			require.Len(t, tools, 2)
			answer := tools[1].(map[string]any)
			require.Equal(t, anthropic.AnswerTool, answer["name"])
			require.Equal(t, map[string]any{"type": "ephemeral"}, answer["cache_control"])
			gotSchema, err := json.Marshal(answer["input_schema"])
			require.NoError(t, err)
			require.JSONEq(t, schema, string(gotSchema))
			require.NotContains(t, tools[0].(map[string]any), "cache_control")
		})
	}
}

func TestForcesTools(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]bool{
		"claude-sonnet-4-5": true, "claude-sonnet-5": true, "claude-haiku-4-5": true,
		"claude-sonnet-5-5": false, "claude-sonnet-5-5-20260929": false, "us.anthropic.claude-opus-5-5-v1:0": false,
	} {
		require.Equal(t, want, anthropic.ForcesTools(model), model)
	}
}

func TestBadRequestsAreRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  llm.Request
	}{
		{"system role", llm.Request{Messages: []llm.Message{{Role: "system", Content: turn.Content{text("x")}}}}},
		{"schema not an object", llm.Request{Messages: []llm.Message{{Role: "user", Content: turn.Content{text("x")}}},
			JSONSchema: json.RawMessage(`{"type":"array"}`)}},
		{"schema not JSON", llm.Request{Messages: []llm.Message{{Role: "user", Content: turn.Content{text("x")}}},
			JSONSchema: json.RawMessage(`nope`)}},
		{"image without source", llm.Request{Messages: []llm.Message{{Role: "user", Content: turn.Content{{Type: turn.BlockImage}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, llmtest.Sequence(llmtest.Text("ok")), anthropic.Config{})
			_, err := s.p.Complete(context.Background(), tc.req)
			require.Equal(t, llm.KindRequest, llm.KindOf(err), "%v", err)
			require.Zero(t, s.srv.Calls())
		})
	}
}

// rawServer answers every call with one status, header and body.
func rawServer(t *testing.T, status int, header map[string]string, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestErrors(t *testing.T) {
	t.Parallel()
	apiErr := func(typ, msg string) string {
		return `{"type":"error","error":{"type":"` + typ + `","message":"` + msg + `"},"request_id":"req_1"}`
	}
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		kind       llm.ErrorKind
		gap        int64
		retryAfter time.Duration
	}{
		{"prompt too long", 400, nil, apiErr("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
			llm.KindPromptTooLong, 10_000, 0},
		{"prompt too long, no numbers", 400, nil, apiErr("invalid_request_error", "Prompt is too long"), llm.KindPromptTooLong, 0, 0},
		{"input and max_tokens over the window", 400, nil,
			apiErr("invalid_request_error", "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again"),
			llm.KindPromptTooLong, 9573, 0},
		{"request too large", 413, nil, apiErr("request_too_large", "Request exceeds the maximum allowed number of bytes."), llm.KindPromptTooLong, 0, 0},
		{"other bad request", 400, nil, apiErr("invalid_request_error", "messages: roles must alternate"), llm.KindRequest, 0, 0},
		{"not found", 404, nil, apiErr("not_found_error", "model: claude-x"), llm.KindRequest, 0, 0},
		{"rate limited, seconds", 429, map[string]string{"Retry-After": "7"}, apiErr("rate_limit_error", "slow down"), llm.KindRateLimited, 0, 7 * time.Second},
		{"rate limited, no hint", 429, nil, apiErr("rate_limit_error", "slow down"), llm.KindRateLimited, 0, 0},
		{"server", 500, nil, apiErr("api_error", "Internal server error"), llm.KindServer, 0, 0},
		{"overloaded", 529, map[string]string{"Retry-After-Ms": "250"}, apiErr("overloaded_error", "Overloaded"), llm.KindServer, 0, 250 * time.Millisecond},
		{"bad gateway, not JSON", 502, nil, `<html>bad gateway</html>`, llm.KindServer, 0, 0},
		{"unauthorized", 401, nil, apiErr("authentication_error", "invalid x-api-key"), llm.KindAuth, 0, 0},
		{"forbidden", 403, nil, apiErr("permission_error", "no access"), llm.KindAuth, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: rawServer(t, tc.status, tc.header, tc.body)})
			require.NoError(t, err)
			_, err = p.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: turn.Content{text("hi")}}}})
			var e *llm.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.kind, e.Kind, "%v", err)
			require.Equal(t, tc.status, e.Status)
			require.Equal(t, tc.gap, e.Gap)
			require.Equal(t, tc.retryAfter, e.RetryAfter)
		})
	}
}

func TestTransportErrors(t *testing.T) {
	t.Parallel()
	// A server that is gone: a connection failure, retryable.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	p, err := anthropic.New(anthropic.Config{APIKey: "k", BaseURL: url})
	require.NoError(t, err)
	req := llm.Request{Messages: []llm.Message{{Role: "user", Content: turn.Content{text("hi")}}}}
	_, err = p.Complete(context.Background(), req)
	require.Equal(t, llm.KindServer, llm.KindOf(err), "%v", err)

	// A cancelled call is no kind: nobody retries it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.Complete(ctx, req)
	require.ErrorIs(t, err, context.Canceled)
	require.Empty(t, llm.KindOf(err))
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	s := newSetup(t, llmtest.Sequence(llmtest.Hang()), anthropic.Config{Timeout: 30 * time.Millisecond})
	_, err := s.p.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: turn.Content{text("hi")}}}})
	require.Equal(t, llm.KindTimeout, llm.KindOf(err), "%v", err)
}

func TestMissingAnswerIsABadResponse(t *testing.T) {
	t.Parallel()
	s := newSetup(t, llmtest.Sequence(llmtest.Reply{Text: "I'd rather talk.", Usage: llm.Usage{InputTokens: 9, OutputTokens: 4}}), anthropic.Config{})
	resp, err := s.p.Complete(context.Background(), llm.Request{
		Messages:   []llm.Message{{Role: "user", Content: turn.Content{text("JSON please")}}},
		JSONSchema: json.RawMessage(`{"type":"object"}`),
	})
	require.Equal(t, llm.KindBadResponse, llm.KindOf(err), "%v", err)
	require.Equal(t, llm.Usage{InputTokens: 9, OutputTokens: 4}, resp.Usage, "a bad answer still cost tokens")
}

// Real conversations, as the importer reads them, translate to requests
// the API accepts: every tool_use answered by the next message.
func TestFixtureConversations(t *testing.T) {
	t.Parallel()
	for _, name := range claudecodetest.Names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for session, msgs := range conversations(t, name) {
				s := newSetup(t, llmtest.Sequence(llmtest.Text("summary")), anthropic.Config{})
				_, err := s.p.Complete(context.Background(), llm.Request{System: "Summarize.", Messages: msgs})
				require.NoError(t, err, "session %s", session)
				got := s.srv.Requests()[0]
				require.NotEmpty(t, got.Messages)
				for i, m := range got.Messages {
					require.Equal(t, []string{"user", "assistant"}[i%2], m.Role, "roles alternate once merged (message %d)", i)
				}
			}
		})
	}
}

// conversations reads a fixture into each session's messages, in order.
func conversations(t *testing.T, name string) map[string][]llm.Message {
	t.Helper()
	f, err := os.Open(claudecodetest.Path(t, name))
	require.NoError(t, err)
	defer f.Close()
	recs, err := claudecode.Parse(f)
	require.NoError(t, err)
	out := map[string][]llm.Message{}
	for _, ev := range claudecode.Events(claudecode.Group(recs, claudecode.GroupOptions{}), claudecode.EventOptions{}) {
		for _, m := range ev.Messages() {
			out[ev.SessionID] = append(out[ev.SessionID], llm.Message{Role: m.Role, Content: m.Content})
		}
	}
	require.NotEmpty(t, out)
	return out
}

func TestBlankTextDroppedAndPrefillTrimmed(t *testing.T) {
	t.Parallel()
	s := newSetup(t, llmtest.Sequence(llmtest.Text("ok")), anthropic.Config{})
	_, err := s.p.Complete(context.Background(), llm.Request{Messages: []llm.Message{
		{Role: "user", Content: turn.Content{text("\n\n"), text("Start the answer for me.")}},
		{Role: "assistant", Content: turn.Content{text(" \t"), text("The answer is \n")}},
	}})
	require.NoError(t, err, "the fake refuses blank text and a prefill ending in whitespace, as the API does")
	require.JSONEq(t, `[
		{"role": "user", "content": [{"type": "text", "text": "Start the answer for me."}]},
		{"role": "assistant", "content": [{"type": "text", "text": "The answer is"}]}
	]`, mustJSON(t, s.body(t, 0)["messages"]))
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
