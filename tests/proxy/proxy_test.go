// Package proxy_test runs the Messages API proxy (POST /v1/messages) with
// the official Anthropic Go SDK in front of it and a scripted Anthropic
// upstream behind it, with the accountant, the outbox relay and the
// compactor on a real NATS and Postgres: what a client sends through Mnemos
// reaches the upstream managed, and every round is recorded as a turn.
package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

const (
	tenant      = "acme"
	key         = "mnm_proxy_test_key"
	upstreamKey = "upstream-secret-key"
	model       = "claude-sonnet-4-5"
)

type system struct {
	*mnemos
	upstream *llmtest.Server
}

// setup runs Mnemos in front of an upstream answering with script until
// the test ends.
func setup(t *testing.T, script llmtest.Script) *system {
	t.Helper()
	up := llmtest.NewAnthropicServer(t, script)
	return &system{mnemos: startMnemos(t, up.URL, key), upstream: up}
}

// client is the official SDK pointed at Mnemos with the tenant's key and,
// when session is set, the session header.
func (s *system) client(session string) sdk.Client {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(), option.WithBaseURL(s.api.URL), option.WithAPIKey(key), option.WithMaxRetries(0),
	}
	if session != "" {
		opts = append(opts, option.WithHeader("X-Mnemos-Session", session))
	}
	return sdk.NewClient(opts...)
}

// applied waits until the session has applied seq.
func (s *system) applied(t *testing.T, session string, seq int64) sessionstate.Session {
	t.Helper()
	return waitApplied(t, s.store, session, seq)
}

func userText(text string) sdk.MessageParam { return sdk.NewUserMessage(sdk.NewTextBlock(text)) }

func TestRoundsThroughTheProxyAreRecordedAsTurns(t *testing.T) {
	t.Parallel()
	s := setup(t, func(req llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "answer to message " + string(rune('0'+len(req.Messages))), Usage: llm.Usage{InputTokens: 1_000 * int64(len(req.Messages)), OutputTokens: 20}}
	})
	ctx := context.Background()
	c := s.client("s1")

	msgs := []sdk.MessageParam{userText("hello")}
	first, err := c.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 256, Messages: msgs})
	require.NoError(t, err)
	require.Equal(t, "answer to message 1", first.Content[0].Text)
	require.EqualValues(t, 1_000, first.Usage.InputTokens, "the usage is the upstream's")
	sess := s.applied(t, "s1", 1)
	require.EqualValues(t, 2, sess.MessageCount, "the user message and the answer")

	msgs = append(msgs, first.ToParam(), userText("and then?"))
	second, err := c.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 256, Messages: msgs})
	require.NoError(t, err)
	require.Equal(t, "answer to message 3", second.Content[0].Text)
	sess = s.applied(t, "s1", 2)
	require.EqualValues(t, 4, sess.MessageCount, "each message stored once: the second round added two")
	require.EqualValues(t, 2, sess.ProxySeq)
	require.EqualValues(t, 3_000+20, sess.TokenCount, "counted from the upstream's usage")

	calls := s.upstream.Requests()
	require.Len(t, calls, 2, "one upstream call per round")
	for _, call := range calls {
		require.Equal(t, upstreamKey, call.Header.Get("X-Api-Key"), "the upstream gets Mnemos's key for it, never the client's")
	}
	require.Len(t, calls[1].Messages, 3, "the stored messages and the new one")
}

func TestARequestWithoutASessionGoesThroughAsSent(t *testing.T) {
	t.Parallel()
	s := setup(t, func(llmtest.Request) llmtest.Reply { return llmtest.Text("plain") })
	c := s.client("")
	got, err := c.Messages.New(context.Background(), sdk.MessageNewParams{
		Model: model, MaxTokens: 64, Messages: []sdk.MessageParam{userText("no session here")},
	})
	require.NoError(t, err)
	require.Equal(t, "plain", got.Content[0].Text)
	require.Len(t, s.upstream.Requests(), 1)
	var n int
	require.NoError(t, pgtest.Admin(t, s.store).QueryRow(context.Background(), "SELECT count(*) FROM sessions").Scan(&n))
	require.Zero(t, n, "nothing recorded")
}

func TestUpstreamErrorsReachTheClientAsSent(t *testing.T) {
	t.Parallel()
	s := setup(t, func(llmtest.Request) llmtest.Reply {
		r := llmtest.RateLimited()
		r.RetryAfter = 7 * time.Second
		return r
	})
	c := s.client("s1")
	_, err := c.Messages.New(context.Background(), sdk.MessageNewParams{
		Model: model, MaxTokens: 64, Messages: []sdk.MessageParam{userText("hi")},
	})
	var apiErr *sdk.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Equal(t, "7000", apiErr.Response.Header.Get("Retry-After-Ms"), "the upstream's retry hint is passed on")
	require.Contains(t, apiErr.RawJSON(), "rate_limit_error")
	_, err = s.store.GetSession(context.Background(), tenant, "s1")
	require.ErrorIs(t, err, store.ErrNotFound, "a failed round is not recorded: the session was never made")
}

func TestBadInputGetsAnAnthropicError(t *testing.T) {
	t.Parallel()
	s := setup(t, func(llmtest.Request) llmtest.Reply { return llmtest.Text("never") })
	post := func(body string, header map[string]string) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, s.api.URL+"/v1/messages", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("x-api-key", key)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	kind := func(out map[string]any) string {
		require.Equal(t, "error", out["type"])
		return out["error"].(map[string]any)["type"].(string)
	}

	code, out := post(`{"model":`, nil)
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "invalid_request_error", kind(out))

	code, out = post(`{}`, map[string]string{"x-api-key": "wrong"})
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, "authentication_error", kind(out))

	code, out = post(`{"model":"m","messages":[]}`, map[string]string{"X-Mnemos-Session": "bad/session"})
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "invalid_request_error", kind(out))

	huge := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"` + strings.Repeat("x", 50<<20) + `"}]}`
	code, out = post(huge, nil)
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.Equal(t, "request_too_large", kind(out))

	require.Zero(t, s.upstream.Calls(), "nothing reached the upstream")
}

// TestACompactedSessionReachesTheUpstreamCompacted: once the session is
// compacted, the next request the client sends whole reaches the upstream
// with the compaction's summary in place of what it replaced, the
// reminders at the front of the client's first message still at the front,
// and the client's new message last.
func TestACompactedSessionReachesTheUpstreamCompacted(t *testing.T) {
	t.Parallel()
	s := setup(t, func(req llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: strings.Repeat("a long answer about the build. ", 40), Usage: llm.Usage{InputTokens: 500 * int64(len(req.Messages)), OutputTokens: 300}}
	})
	ctx := context.Background()
	c := s.client("s2")
	const reminder = "<system-reminder>The project's CLAUDE.md says: run make test before committing.</system-reminder>"
	msgs := []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(reminder), sdk.NewTextBlock("question 0"))}
	for i := 1; i <= 6; i++ {
		answer, err := c.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 512, Messages: msgs})
		require.NoError(t, err)
		msgs = append(msgs, answer.ToParam(), userText("question "+string(rune('0'+i))))
		s.applied(t, "s2", int64(i))
	}

	req, err := http.NewRequest(http.MethodPost, s.api.URL+"/v1/sessions/s2/compact", strings.NewReader(`{"wait": true, "timeout_seconds": 30}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	_, err = c.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 512, Messages: msgs})
	require.NoError(t, err)
	calls := s.upstream.Requests()
	last := calls[len(calls)-1]
	require.Less(t, len(last.Messages), len(msgs), "the compacted history reached the upstream shorter than the client sent it")
	first := last.Messages[0]
	require.Equal(t, "user", first.Role)
	require.True(t, strings.HasPrefix(first.Text, reminder), "the client's reminders stay at the front: %.200q", first.Text)
	require.Contains(t, first.Text, "summary", "the compaction's summary follows them")
	require.Contains(t, last.Messages[len(last.Messages)-1].Text, "question 6", "the client's new message is last")
	s.applied(t, "s2", 7)
}

// TestAStreamedRoundIsRelayedAndRecorded: the official SDK streams a
// round through Mnemos from the cache-modelling upstream; the client
// accumulates the same message the upstream sent (text and a tool call with
// its input), and the round is recorded with that tool call and the
// upstream's usage.
func TestAStreamedRoundIsRelayedAndRecorded(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens})
	up.SetScript(func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Say(upstream.Text("Looking."), upstream.ToolUse("Bash", map[string]any{"command": "make test", "description": "run the tests"})), nil
	})
	m := startMnemos(t, up.URL, key)
	c := (&system{mnemos: m}).client("streamed")
	stream := c.Messages.NewStreaming(context.Background(), sdk.MessageNewParams{
		Model: model, MaxTokens: 256, Messages: []sdk.MessageParam{userText("run the tests")},
	})
	var msg sdk.Message
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.Len(t, msg.Content, 2)
	require.Equal(t, "Looking.", msg.Content[0].Text)
	require.Equal(t, "Bash", msg.Content[1].Name)
	require.JSONEq(t, `{"command":"make test","description":"run the tests"}`, string(msg.Content[1].Input))

	calls := up.Messages()
	require.Len(t, calls, 1)
	sent := calls[0].Usage
	require.Equal(t, sent.InputTokens, msg.Usage.InputTokens, "the client gets the upstream's usage")
	sess := waitApplied(t, m.store, "streamed", 1)
	require.EqualValues(t, 2, sess.MessageCount, "the user message and the streamed answer")
	require.Equal(t, sent.InputSide()+sent.OutputTokens, sess.TokenCount, "counted from the usage the stream reported")
	var input string
	require.NoError(t, pgtest.Admin(t, m.store).QueryRow(context.Background(),
		`SELECT content->1->>'input' FROM messages WHERE session_id = 'streamed' AND position = 1`).Scan(&input))
	require.JSONEq(t, `{"command":"make test","description":"run the tests"}`, input, "the recorded answer holds the tool call the stream spelled")
}

// TestAnotherTenantsSessionIDChangesNothing: a tenant naming a session id
// another tenant uses gets a session of its own; the other tenant's
// session and what reaches the upstream for it are untouched.
func TestAnotherTenantsSessionIDChangesNothing(t *testing.T) {
	t.Parallel()
	s := setup(t, func(req llmtest.Request) llmtest.Reply {
		return llmtest.Text(fmt.Sprintf("%d messages", len(req.Messages)))
	})
	ctx := context.Background()
	const otherKey = "mnm_proxy_other_tenant"
	require.NoError(t, s.store.EnsureTenant(ctx, "globex", "Globex"))
	require.NoError(t, s.store.AddAPIKey(ctx, "globex", "test", otherKey))

	c := s.client("shared-id")
	msgs := []sdk.MessageParam{userText("acme's secret plan")}
	first, err := c.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 64, Messages: msgs})
	require.NoError(t, err)
	before := s.applied(t, "shared-id", 1)

	other := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(s.api.URL), option.WithAPIKey(otherKey),
		option.WithMaxRetries(0), option.WithHeader(httpapi.HeaderAgentSession, "shared-id"))
	_, err = other.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 64, Messages: []sdk.MessageParam{userText("globex asks")}})
	require.NoError(t, err)
	calls := s.upstream.Requests()
	require.Len(t, calls[1].Messages, 1, "globex's request went up as globex sent it, nothing of acme's session in it")
	require.NotContains(t, calls[1].Messages[0].Text, "secret plan")
	require.Eventually(t, func() bool {
		g, err := s.store.GetSession(ctx, "globex", "shared-id")
		return err == nil && g.AppliedSeq == 1 && g.MessageCount == 2
	}, 30*time.Second, 20*time.Millisecond, "globex has a session of its own")
	after, err := s.store.GetSession(ctx, tenant, "shared-id")
	require.NoError(t, err)
	require.Equal(t, before.MessageCount, after.MessageCount)
	require.Equal(t, before.AppliedSeq, after.AppliedSeq, "acme's session is untouched")

	// acme carries on where it was.
	msgs = append(msgs, first.ToParam(), userText("and next"))
	_, err = c.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 64, Messages: msgs})
	require.NoError(t, err)
	require.EqualValues(t, 4, s.applied(t, "shared-id", 2).MessageCount)
}
