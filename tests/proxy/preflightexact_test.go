package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// TestPreflightCountsItsEstimatedPartExactly: with
// proxy.preflight_exact_percent, a preflight whose count is mostly
// estimated asks the tenant's upstream's count_tokens, and answers its
// figure:
//   - the first request, system and tools whole: the upstream's count of
//     all of it (and, in a second call, of the messages alone, which keeps
//     the prefix's exact size by its hash);
//   - after the client's compaction, the prefix named by its hash: that
//     exact size plus the upstream's count of the new messages;
//   - after a response, with a little new: the estimate, no call;
//   - the upstream down: the estimate, counted as failed.
//
// The new messages are log lines, which the estimate takes at 3 bytes per
// token and this upstream counts at 4: the estimate is a third over.
func TestPreflightCountsItsEstimatedPartExactly(t *testing.T) {
	t.Parallel()
	up := upstream.New(upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Final("Noted."), nil
	}})
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, `{"type":"error","error":{"type":"overloaded_error","message":"down"}}`, http.StatusServiceUnavailable)
			return
		}
		up.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	st := pgtest.New(t)
	m := startMnemosOn(t, st, bustest.New(t), srv.URL, key)
	ctx := context.Background()
	require.NoError(t, st.SetTenantSettings(ctx, tenant, []byte(`{"proxy":{"preflight_exact_percent":5}}`)))
	c := client.New(m.api.URL, key)

	logs := func(uuid string, n int) turn.Message {
		var b strings.Builder
		for i := range n {
			b.WriteString("2026-11-28T10:15:03.123Z INFO [worker-3] GET /v1/items/")
			b.WriteString(strings.Repeat("7", i%5+1))
			b.WriteString(" 200 12ms\n")
		}
		return turn.Message{UUID: uuid, Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: b.String()}}}
	}
	system := json.RawMessage(`"You are a careful assistant who reads logs and explains what went wrong."`)
	tools := json.RawMessage(`[{"name":"read","description":"Read a file from the work directory.","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]`)
	prefix := &turn.RequestPrefix{System: system, Tools: tools, Hash: "prefix-1"}
	counts := func() []upstream.Call {
		var out []upstream.Call
		for _, call := range up.Calls() {
			if call.Path == "/v1/messages/count_tokens" {
				out = append(out, call)
			}
		}
		return out
	}
	first := logs("u1", 200)
	p, err := c.Preflight(ctx, "pf", api.PreflightRequest{InputMessages: []turn.Message{first}, Model: model, RequestPrefix: prefix})
	require.NoError(t, err)
	calls := counts()
	require.Len(t, calls, 2, "the whole request, then its messages alone")
	whole, alone := calls[0].Usage.InputTokens, calls[1].Usage.InputTokens
	require.Equal(t, whole, p.Count, "the first request is the upstream's count")
	require.NotEmpty(t, calls[0].Request.Tools, "system and tools are counted with the messages")

	// The turn goes through, with its usage: the session knows the prefix's hash.
	ev := turn.Event{
		Schema: turn.SchemaV1_1, EventID: "pf-1", SessionID: "pf", Seq: 1, Model: model, InputMessages: []turn.Message{first},
		RequestPrefix: prefix, OccurredAt: time.Now().UTC(),
		Response: &turn.Message{UUID: "a1", Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: "The logs are fine."}}},
		Usage:    &turn.Usage{InputTokens: whole, OutputTokens: 6},
	}
	_, err = c.PostTurn(ctx, ev)
	require.NoError(t, err)
	waitApplied(t, st, "pf", 1)

	// A little new after the response: the estimate, no call.
	small := turn.Message{UUID: "u2", Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "Thanks."}}}
	p, err = c.Preflight(ctx, "pf", api.PreflightRequest{InputMessages: []turn.Message{small}, Model: model})
	require.NoError(t, err)
	require.Len(t, counts(), 2, "no call for a count that is nearly all measured")
	require.Greater(t, p.Count, whole)

	// After the client's compaction, the prefix by its hash only.
	summary := logs("u3", 120)
	p, err = c.Preflight(ctx, "pf", api.PreflightRequest{InputMessages: []turn.Message{summary}, Model: model,
		RequestPrefix: &turn.RequestPrefix{Hash: "prefix-1"}, ClientCompaction: &turn.ClientCompaction{Trigger: "manual", PreTokens: whole}})
	require.NoError(t, err)
	calls = counts()
	require.Len(t, calls, 3, "one call: the new messages")
	require.Empty(t, calls[2].Request.Tools, "the prefix is not sent again")
	require.Equal(t, whole-alone+calls[2].Usage.InputTokens, p.Count, "the prefix's exact size, then the new messages'")

	// The upstream down: the estimate, counted as failed.
	down.Store(true)
	p, err = c.Preflight(ctx, "pf", api.PreflightRequest{InputMessages: []turn.Message{logs("u4", 150)}, Model: model})
	require.NoError(t, err)
	require.EqualValues(t, 1, m.metrics.Sum("mnemos.preflight.exact_counts", "outcome", "failed"))
	require.Greater(t, p.Count, whole, "the estimate is answered")
	require.EqualValues(t, 1, m.metrics.Sum("mnemos.preflight.exact_counts", "outcome", "under"), "the first request, before any calibration, counted under its estimate")
	require.EqualValues(t, 2, m.metrics.Sum("mnemos.preflight.exact_counts", "outcome", "under")+m.metrics.Sum("mnemos.preflight.exact_counts", "outcome", "over"))
}
