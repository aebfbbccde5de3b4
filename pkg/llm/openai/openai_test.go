package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/openai"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

type setup struct {
	srv *llmtest.Server
	p   *openai.Provider
}

func newSetup(t *testing.T, script llmtest.Script, cfg openai.Config) setup {
	t.Helper()
	srv := llmtest.NewOpenAIServer(t, script)
	cfg.BaseURL = srv.URL
	p, err := openai.New(cfg)
	require.NoError(t, err)
	return setup{srv: srv, p: p}
}

func text(s string) turn.Block { return turn.Block{Type: turn.BlockText, Text: s} }

func hi() []llm.Message { return []llm.Message{{Role: "user", Content: turn.Content{text("hi")}}} }

func TestNewRefusesARelativeBaseURL(t *testing.T) {
	t.Parallel()
	_, err := openai.New(openai.Config{BaseURL: "localhost:11434"})
	require.Error(t, err)
}

func TestRequestTranslation(t *testing.T) {
	t.Parallel()
	s := newSetup(t, llmtest.Sequence(llmtest.Text("ok")), openai.Config{APIKey: "sk-secret"})
	req := llm.Request{
		System:    "Keep notes.",
		MaxTokens: 1000,
		Tools: []llm.Tool{{Name: "read", Description: "Read a file.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)}},
		Messages: []llm.Message{
			{Role: "user", Content: turn.Content{text("Look at this."),
				{Type: turn.BlockImage, Source: json.RawMessage(`{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}`)},
				{Type: turn.BlockImage, Source: json.RawMessage(`{"type":"url","url":"https://example.com/a.png"}`)}}},
			{Role: "assistant", Content: turn.Content{
				{Type: turn.BlockThinking, Thinking: "hmm"},
				text("Reading it."),
				{Type: turn.BlockToolUse, ID: "toolu_1", Name: "read", Input: json.RawMessage(`{"path":"a.go"}`)},
				{Type: turn.BlockToolUse, ID: "toolu_2", Name: "read"},
			}},
			// Recorded one message per result, with text between: merged,
			// the results first.
			{Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: "toolu_2", IsError: true,
				Content: &turn.Content{text("no path")}}}},
			{Role: "user", Content: turn.Content{text("Also this.")}},
			{Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: "toolu_1",
				Content: &turn.Content{text("package a"), {Type: turn.BlockImage, Source: json.RawMessage(`{}`)}}}}},
			{Role: "assistant", Content: turn.Content{text("Done.")}},
			{Role: "user", Content: turn.Content{text("Thanks."), text("Bye.")}},
		},
	}
	_, err := s.p.Complete(context.Background(), req)
	require.NoError(t, err)

	got := s.srv.Requests()[0]
	require.Equal(t, "Bearer sk-secret", got.Header.Get("Authorization"))
	require.Equal(t, "/v1/chat/completions", got.Path)
	want := `{
		"model": "` + openai.DefaultModel + `",
		"max_tokens": 1000,
		"tools": [{"type": "function", "function": {"name": "read", "description": "Read a file.",
			"parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
		"messages": [
			{"role": "system", "content": "Keep notes."},
			{"role": "user", "content": [
				{"type": "text", "text": "Look at this."},
				{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
				{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}
			]},
			{"role": "assistant", "content": "Reading it.", "tool_calls": [
				{"id": "toolu_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.go\"}"}},
				{"id": "toolu_2", "type": "function", "function": {"name": "read", "arguments": "{}"}}
			]},
			{"role": "tool", "tool_call_id": "toolu_2", "content": "Error:\nno path"},
			{"role": "tool", "tool_call_id": "toolu_1", "content": "package a\n[image]"},
			{"role": "user", "content": "Also this."},
			{"role": "assistant", "content": "Done."},
			{"role": "user", "content": "Thanks.\n\nBye."}
		]
	}`
	require.JSONEq(t, want, string(got.Body))
}

func TestNoKeyNoAuthorization(t *testing.T) {
	t.Parallel()
	s := newSetup(t, llmtest.Sequence(llmtest.Text("ok")), openai.Config{})
	_, err := s.p.Complete(context.Background(), llm.Request{Messages: hi()})
	require.NoError(t, err)
	require.Empty(t, s.srv.Requests()[0].Header.Get("Authorization"))
}

// The OpenAI API itself gets max_completion_tokens (other servers
// max_tokens); the test reaches it through a transport that sends every
// request to the fake server instead.
func TestOpenAIGetsMaxCompletionTokens(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewOpenAIServer(t, llmtest.Sequence(llmtest.Text("ok")))
	target, err := url.Parse(srv.URL)
	require.NoError(t, err)
	client := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host = target.Scheme, target.Host
		return http.DefaultTransport.RoundTrip(r)
	})}
	p, err := openai.New(openai.Config{APIKey: "sk", HTTPClient: client})
	require.NoError(t, err)
	_, err = p.Complete(context.Background(), llm.Request{Messages: hi(), MaxTokens: 77})
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(srv.Requests()[0].Body, &body))
	require.EqualValues(t, 77, body["max_completion_tokens"])
	require.NotContains(t, body, "max_tokens")
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestModelChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  openai.Config
		req  llm.Request
		want string
	}{
		{"default", openai.Config{}, llm.Request{Task: llm.TaskNotes}, openai.DefaultModel},
		{"configured default", openai.Config{Model: "qwen3:8b"}, llm.Request{Task: llm.TaskNotes}, "qwen3:8b"},
		{"task model", openai.Config{Model: "qwen3:8b", Models: llm.Models{llm.TaskNotes: "llama3.3"}}, llm.Request{Task: llm.TaskNotes}, "llama3.3"},
		{"request model", openai.Config{Models: llm.Models{llm.TaskNotes: "llama3.3"}}, llm.Request{Task: llm.TaskNotes, Model: "gpt-5"}, "gpt-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, llmtest.Sequence(llmtest.Text("ok")), tc.cfg)
			tc.req.Messages = hi()
			_, err := s.p.Complete(context.Background(), tc.req)
			require.NoError(t, err)
			require.Equal(t, tc.want, s.srv.Requests()[0].Model)
		})
	}
}

func TestJSONSchemaIsAResponseFormat(t *testing.T) {
	t.Parallel()
	s := newSetup(t, llmtest.Sequence(llmtest.Text("```json\n{\"facts\":[\"a\"]}\n```")), openai.Config{})
	schema := `{"type":"object","properties":{"facts":{"type":"array","items":{"type":"string"}}},"required":["facts"]}`
	resp, err := s.p.Complete(context.Background(), llm.Request{Messages: hi(), JSONSchema: json.RawMessage(schema)})
	require.NoError(t, err)
	require.JSONEq(t, `{"facts":["a"]}`, resp.Text, "a fenced answer is unwrapped")

	var body struct {
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	require.NoError(t, json.Unmarshal(s.srv.Requests()[0].Body, &body))
	require.Equal(t, "json_schema", body.ResponseFormat.Type)
	require.Equal(t, openai.AnswerSchema, body.ResponseFormat.JSONSchema.Name)
	require.JSONEq(t, schema, string(body.ResponseFormat.JSONSchema.Schema))
}

func TestResponse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		reply llmtest.Reply
		json  bool
		kind  llm.ErrorKind
		check func(t *testing.T, resp llm.Response)
	}{
		{"usage counts cached tokens once", llmtest.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 400, OutputTokens: 9, CacheReadTokens: 600}}, false, "",
			func(t *testing.T, resp llm.Response) {
				require.Equal(t, llm.Usage{InputTokens: 400, OutputTokens: 9, CacheReadTokens: 600}, resp.Usage)
			}},
		{"length is max_tokens", llmtest.Reply{Text: "cut", StopReason: "max_tokens"}, false, "",
			func(t *testing.T, resp llm.Response) { require.Equal(t, "max_tokens", resp.StopReason) }},
		{"tool call without arguments", llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "list", Input: json.RawMessage(`{}`)}}}, false, "",
			func(t *testing.T, resp llm.Response) {
				require.Equal(t, []llm.ToolCall{{ID: "c1", Name: "list", Input: json.RawMessage(`{}`)}}, resp.ToolCalls)
				require.Equal(t, "tool_use", resp.StopReason)
			}},
		{"tool call arguments not JSON", llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "list", Input: json.RawMessage(`{"a":`)}}}, false,
			llm.KindBadResponse, nil},
		{"prose for JSON", llmtest.Text("Here you go: facts."), true, llm.KindBadResponse, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, llmtest.Sequence(tc.reply), openai.Config{})
			req := llm.Request{Messages: hi()}
			if tc.json {
				req.JSONSchema = json.RawMessage(`{"type":"object"}`)
			}
			resp, err := s.p.Complete(context.Background(), req)
			require.Equal(t, tc.kind, llm.KindOf(err), "%v", err)
			if tc.check != nil {
				tc.check(t, resp)
			}
		})
	}
}

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
	return srv.URL + "/v1"
}

func TestErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		kind       llm.ErrorKind
		gap        int64
		retryAfter time.Duration
	}{
		{"context length exceeded", 400, nil, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			llm.KindPromptTooLong, 2000, 0},
		{"context length exceeded, no numbers", 400, nil, `{"error":{"message":"Input is too long.","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}`,
			llm.KindPromptTooLong, 0, 0},
		{"vllm, nested", 400, nil, `{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}}`,
			llm.KindPromptTooLong, 904, 0},
		{"vllm, top level", 400, nil, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 4200 tokens in the messages, Please reduce the length of the messages.","type":"BadRequestError","param":null,"code":400}`,
			llm.KindPromptTooLong, 104, 0},
		{"llama.cpp", 400, nil, `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}`,
			llm.KindPromptTooLong, 808, 0},
		{"other bad request", 400, nil, `{"error":{"message":"Invalid value for 'role'.","type":"invalid_request_error","param":"messages","code":null}}`, llm.KindRequest, 0, 0},
		{"unknown model", 404, nil, `{"error":{"message":"The model 'x' does not exist","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, llm.KindRequest, 0, 0},
		{"rate limited", 429, map[string]string{"Retry-After-Ms": "1200"}, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			llm.KindRateLimited, 0, 1200 * time.Millisecond},
		{"server", 500, nil, `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`, llm.KindServer, 0, 0},
		{"unavailable", 503, map[string]string{"Retry-After": "2"}, `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`, llm.KindServer, 0, 2 * time.Second},
		{"unauthorized", 401, nil, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, llm.KindAuth, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := openai.New(openai.Config{BaseURL: rawServer(t, tc.status, tc.header, tc.body)})
			require.NoError(t, err)
			_, err = p.Complete(context.Background(), llm.Request{Messages: hi()})
			var e *llm.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.kind, e.Kind, "%v", err)
			require.Equal(t, tc.status, e.Status)
			require.Equal(t, tc.gap, e.Gap)
			require.Equal(t, tc.retryAfter, e.RetryAfter)
		})
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	s := newSetup(t, llmtest.Sequence(llmtest.Hang()), openai.Config{Timeout: 30 * time.Millisecond})
	_, err := s.p.Complete(context.Background(), llm.Request{Messages: hi()})
	require.Equal(t, llm.KindTimeout, llm.KindOf(err), "%v", err)
}

func TestBadRequestsAreRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		req  llm.Request
	}{
		{"system role", llm.Request{Messages: []llm.Message{{Role: "system", Content: turn.Content{text("x")}}}}},
		{"schema not JSON", llm.Request{Messages: hi(), JSONSchema: json.RawMessage(`nope`)}},
		{"tool schema not an object", llm.Request{Messages: hi(), Tools: []llm.Tool{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}}},
		{"image without source", llm.Request{Messages: []llm.Message{{Role: "user", Content: turn.Content{{Type: turn.BlockImage, Source: json.RawMessage(`{}`)}}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, llmtest.Sequence(llmtest.Text("ok")), openai.Config{})
			_, err := s.p.Complete(context.Background(), tc.req)
			require.Equal(t, llm.KindRequest, llm.KindOf(err), "%v", err)
			require.Zero(t, s.srv.Calls())
		})
	}
}

// Real conversations translate to requests a Chat Completions server
// accepts: every tool call answered by a tool message right after it.
func TestFixtureConversations(t *testing.T) {
	t.Parallel()
	for _, name := range claudecodetest.Names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, err := os.Open(claudecodetest.Path(t, name))
			require.NoError(t, err)
			defer f.Close()
			recs, err := claudecode.Parse(f)
			require.NoError(t, err)
			sessions := map[string][]llm.Message{}
			for _, ev := range claudecode.Events(claudecode.Group(recs, claudecode.GroupOptions{}), claudecode.EventOptions{}) {
				for _, m := range ev.Messages() {
					sessions[ev.SessionID] = append(sessions[ev.SessionID], llm.Message{Role: m.Role, Content: m.Content})
				}
			}
			for session, msgs := range sessions {
				calls := 0 // the calls that have a result; the others become text
				for _, m := range llm.Normalize(msgs) {
					calls += turn.Message{Content: m.Content}.ToolUseCount()
				}
				s := newSetup(t, llmtest.Sequence(llmtest.Text("summary")), openai.Config{})
				_, err := s.p.Complete(context.Background(), llm.Request{System: "Summarize.", Messages: msgs})
				require.NoError(t, err, "session %s", session)
				tools := 0
				for _, m := range s.srv.Requests()[0].Messages {
					if m.Role == "tool" {
						tools++
					}
				}
				require.Equal(t, calls, tools, "one tool message per tool call")
			}
		})
	}
}
