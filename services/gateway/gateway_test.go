package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway"
)

type harness struct {
	gw      *gateway.Gateway
	srv     *httptest.Server
	store   *store.Store
	bus     *bus.Bus
	metrics *telemetrytest.Reader
	// client validates every answer against api/openapi.yaml.
	client *http.Client
}

func setup(t *testing.T) *harness {
	t.Helper()
	return setupWith(t, nil)
}

// setupWith is setup with the gateway's config changed by change (nil: none).
func setupWith(t *testing.T, change func(*gateway.Config)) *harness {
	t.Helper()
	st := pgtest.New(t)
	b := bustest.New(t)
	ctx := context.Background()
	for _, tn := range []string{"acme", "globex"} {
		require.NoError(t, st.EnsureTenant(ctx, tn, tn))
		require.NoError(t, st.AddAPIKey(ctx, tn, "test", "key-"+tn))
	}
	cfg := gateway.DefaultConfig()
	cfg.MaxEventBytes = 256 << 10
	metrics := telemetrytest.New(t)
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	cfg.Limits, err = limits.New(st, func(ctx context.Context, tenant string) (limits.Config, error) {
		s, err := settings.For(ctx, tenant)
		return s.Limits, err
	}, metrics.Meter(), limits.Options{})
	require.NoError(t, err)
	if change != nil {
		change(&cfg)
	}
	gw, err := gateway.New(cfg, st, b, settings, bustest.Logger(t), metrics.Meter())
	require.NoError(t, err)
	mux := http.NewServeMux()
	gw.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.Close(); gw.Drain() })
	return &harness{gw: gw, srv: srv, store: st, bus: b, metrics: metrics, client: apitest.Client(t)}
}

func (h *harness) do(t *testing.T, method, path, key string, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func event(session string, seq int64) turn.Event {
	return turn.Event{
		Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", session, seq), SessionID: session, Seq: seq,
		OccurredAt:    time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		InputMessages: []turn.Message{{UUID: fmt.Sprintf("u%d", seq), Role: "user", Content: turn.Content{{Type: "text", Text: "hello there"}}}},
		Response:      &turn.Message{UUID: fmt.Sprintf("a%d", seq), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: "text", Text: "hi"}}},
		Usage:         &turn.Usage{InputTokens: 12, OutputTokens: 3},
	}
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestPostTurnPublishesWithTenantFromKey(t *testing.T) {
	t.Parallel()
	h := setup(t)
	status, body := h.do(t, "POST", "/v1/turns", "key-acme", encode(t, event("s1", 1)))
	require.Equal(t, http.StatusAccepted, status, body)
	require.Equal(t, "s1-1", body["event_id"])

	ctx := context.Background()
	c, err := h.bus.JetStream().OrderedConsumer(ctx, h.bus.StreamName(bus.StreamTurns), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.Equal(t, h.bus.Subject(bus.KindTurnCompleted, "acme", "s1"), m.Subject())
	require.Equal(t, "acme:s1-1", m.Headers().Get(jetstream.MsgIDHeader), "the message id is scoped to the tenant")
	ev, err := turn.Decode(m.Data(), turn.DecodeOptions{Tenant: "acme", Session: "s1"})
	require.NoError(t, err)
	require.Equal(t, "acme", ev.TenantID, "the published event carries the key's tenant")

	status, body = h.do(t, "POST", "/v1/turns", "key-acme", encode(t, event("s1", 1)))
	require.Equal(t, http.StatusAccepted, status)
	require.Equal(t, true, body["duplicate"], "the same event_id again is deduplicated")

	// Another tenant's event with the same id is its own, not a duplicate:
	// JetStream deduplicates message ids across the whole stream.
	status, body = h.do(t, "POST", "/v1/turns", "key-globex", encode(t, event("s1", 1)))
	require.Equal(t, http.StatusAccepted, status)
	require.Equal(t, false, body["duplicate"], "another tenant's event with the same event_id is not dropped")
}

func TestPostTurnBadInput(t *testing.T) {
	t.Parallel()
	h := setup(t)
	withTenant := event("s1", 1)
	withTenant.TenantID = "globex"
	negative := event("s1", 1)
	negative.Usage.InputTokens = -1
	dupUUID := event("s1", 1)
	dupUUID.InputMessages = append(dupUUID.InputMessages, turn.Message{UUID: "u1", Role: "user", Content: turn.Content{{Type: "text", Text: "different"}}})
	huge := event("s1", 1)
	huge.InputMessages[0].Content[0].Text = strings.Repeat("x", 300<<10)
	badBlock := encode(t, event("s1", 1))
	badBlock = bytes.Replace(badBlock, []byte(`"type":"text"`), []byte(`"type":"Holo Gram"`), 1) // other types are kept; this is no type name

	cases := []struct {
		name   string
		key    string
		body   []byte
		status int
		code   string
	}{
		{"no key", "", encode(t, event("s1", 1)), http.StatusUnauthorized, "unauthorized"},
		{"wrong key", "nope", encode(t, event("s1", 1)), http.StatusUnauthorized, "unauthorized"},
		{"bad json", "key-acme", []byte(`{"schema":`), http.StatusBadRequest, string(turn.ReasonBadJSON)},
		{"unknown schema", "key-acme", []byte(`{"schema":"mnemos.turn.v0"}`), http.StatusBadRequest, string(turn.ReasonUnknownSchema)},
		{"missing schema", "key-acme", []byte(`{"event_id":"x"}`), http.StatusBadRequest, string(turn.ReasonUnknownSchema)},
		{"another tenant in the body", "key-acme", encode(t, withTenant), http.StatusForbidden, string(turn.ReasonTenantMismatch)},
		{"negative usage", "key-acme", encode(t, negative), http.StatusBadRequest, string(turn.ReasonNegativeUsage)},
		{"oversized", "key-acme", encode(t, huge), http.StatusRequestEntityTooLarge, string(turn.ReasonTooLarge)},
		{"invalid utf-8", "key-acme", append([]byte(`{"schema":"mnemos.turn.v1","x":"`), 0xc3, 0x28, '"', '}'), http.StatusBadRequest, string(turn.ReasonInvalidUTF8)},
		{"duplicate uuid with different content", "key-acme", encode(t, dupUUID), http.StatusBadRequest, string(turn.ReasonDuplicateUUID)},
		{"block type that is no type name", "key-acme", badBlock, http.StatusBadRequest, string(turn.ReasonSchemaViolation)},
	}
	for _, c := range cases {
		status, body := h.do(t, "POST", "/v1/turns", c.key, c.body)
		require.Equal(t, c.status, status, "%s: %v", c.name, body)
		errBody, _ := body["error"].(map[string]any)
		require.Equal(t, c.code, errBody["code"], c.name)
		require.NotEmpty(t, errBody["message"], "%s: the error says why", c.name)
	}
	for _, c := range cases {
		if c.status == http.StatusUnauthorized {
			continue
		}
		want := int64(0)
		for _, d := range cases {
			if d.code == c.code {
				want++
			}
		}
		require.Equal(t, want, h.metrics.Sum("mnemos.turns.refused", "reason", c.code), "%s: counted by reason", c.name)
	}
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitEventBytes), "the size limit is counted with the other limits")
	// Nothing bad reached the bus; the next good event goes through.
	info, err := h.bus.JetStream().Stream(context.Background(), h.bus.StreamName(bus.StreamTurns))
	require.NoError(t, err)
	require.Zero(t, info.CachedInfo().State.Msgs)
	status, _ := h.do(t, "POST", "/v1/turns", "key-acme", encode(t, event("s1", 1)))
	require.Equal(t, http.StatusAccepted, status)
}

func TestSessionReadsAreTenantScoped(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.store.InTx(ctx, "acme", func(tx *store.Tx) error {
		s, err := tx.LockSession(ctx, "shared-name", "main")
		if err != nil {
			return err
		}
		s.TokenCount, s.State = 150_000, "error"
		return tx.SaveSessions(ctx, s)
	}))
	status, body := h.do(t, "GET", "/v1/sessions/shared-name", "key-acme", nil)
	require.Equal(t, http.StatusOK, status, body)
	tokens := body["tokens"].(map[string]any)
	require.EqualValues(t, 150_000, tokens["count"])
	require.Equal(t, "error", tokens["state"])
	require.EqualValues(t, 167_000, tokens["autocompact_threshold"])
	require.InDelta(t, 100*17_000/167_000.0, tokens["percent_left"], 1e-9, "a percentage of the auto-compact threshold, 0 to 100")

	status, _ = h.do(t, "GET", "/v1/sessions/shared-name", "key-globex", nil)
	require.Equal(t, http.StatusNotFound, status, "another tenant's key never sees the session")
}

func TestPreflight(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.store.InTx(ctx, "acme", func(tx *store.Tx) error {
		s, err := tx.LockSession(ctx, "s1", "main")
		if err != nil {
			return err
		}
		s.BaselineTokens, s.HasUsage, s.TokenCount, s.State = 160_000, true, 160_000, "error"
		return tx.SaveSessions(ctx, s)
	}))
	small := map[string]any{"input_messages": []turn.Message{{UUID: "p1", Role: "user", Content: turn.Content{{Type: "text", Text: strings.Repeat("a", 4_000)}}}}}
	status, body := h.do(t, "POST", "/v1/sessions/s1/preflight", "key-acme", encode(t, small))
	require.Equal(t, http.StatusOK, status, body)
	require.EqualValues(t, 161_000, body["count"])
	require.Equal(t, false, body["compact_first"])
	require.InDelta(t, 100*6_000/167_000.0, body["percent_left"], 1e-9, "a percentage, 0 to 100")

	big := map[string]any{"input_messages": []turn.Message{{UUID: "p1", Role: "user", Content: turn.Content{{Type: "text", Text: strings.Repeat("a", 40_000)}}}}}
	status, body = h.do(t, "POST", "/v1/sessions/s1/preflight", "key-acme", encode(t, big))
	require.Equal(t, http.StatusOK, status, body)
	require.EqualValues(t, 170_000, body["count"])
	require.Equal(t, "autocompact", body["state"])
	require.Equal(t, true, body["compact_first"], "past 167,000 the next call must compact first")

	status, body = h.do(t, "POST", "/v1/sessions/new-one/preflight", "key-acme", encode(t, small))
	require.Equal(t, http.StatusOK, status, body)
	require.EqualValues(t, 1_334, body["count"], "no usage yet: the estimate times 4/3")
}

func TestToolResultIsTenantScoped(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.store.InTx(ctx, "acme", func(tx *store.Tx) error {
		if _, err := tx.LockSession(ctx, "s1", "main"); err != nil {
			return err
		}
		return tx.InsertToolResult(ctx, store.ToolResult{ID: "tr-1", SessionID: "s1", MessageUUID: "u1", ToolUseID: "t1", Content: "whole output", SizeChars: 12})
	}))
	status, body := h.do(t, "GET", "/v1/tool-results/tr-1", "key-acme", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "whole output", body["content"])
	status, _ = h.do(t, "GET", "/v1/tool-results/tr-1", "key-globex", nil)
	require.Equal(t, http.StatusNotFound, status)
}

// TestPreflightRequestPrefix: a preflight naming the request's system prompt
// and tools counts them before any usage; the hash alone reuses the
// session's; a hash the session does not hold, or a prefix of the wrong
// shape, is refused with a clear error and counted.
func TestPreflightRequestPrefix(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	prefix := turn.RequestPrefix{System: json.RawMessage(`"` + strings.Repeat("Be careful. ", 500) + `"`), Hash: "p1"}
	prefixTokens, _, err := tokens.EstimatePrefix(prefix)
	require.NoError(t, err)
	msg := turn.Message{UUID: "p1", Role: "user", Content: turn.Content{{Type: "text", Text: strings.Repeat("a", 4_000)}}}
	body := func(p any) []byte {
		return encode(t, map[string]any{"input_messages": []turn.Message{msg}, "request_prefix": p})
	}

	status, got := h.do(t, "POST", "/v1/sessions/fresh/preflight", "key-acme", body(prefix))
	require.Equal(t, http.StatusOK, status, got)
	require.EqualValues(t, prefixTokens+tokens.EstimateMessage(msg), got["count"], "the prefix, not 4/3 of the message")

	require.NoError(t, h.store.InTx(ctx, "acme", func(tx *store.Tx) error {
		s, err := tx.LockSession(ctx, "known", "main")
		if err != nil {
			return err
		}
		s.PrefixTokens, s.PrefixHash = prefixTokens, "p1"
		return tx.SaveSessions(ctx, s)
	}))
	status, got = h.do(t, "POST", "/v1/sessions/known/preflight", "key-acme", body(map[string]any{"hash": "p1"}))
	require.Equal(t, http.StatusOK, status, got)
	require.EqualValues(t, prefixTokens+tokens.EstimateMessage(msg), got["count"], "the hash alone")

	status, got = h.do(t, "POST", "/v1/sessions/known/preflight", "key-acme", body(map[string]any{"hash": "p2"}))
	require.Equal(t, http.StatusBadRequest, status, got)
	code, message := errorOf(t, got)
	require.Equal(t, "unknown_prefix_hash", code)
	require.Contains(t, message, `"p2"`)
	status, got = h.do(t, "POST", "/v1/sessions/known/preflight", "key-acme", body(map[string]any{"system": []any{map[string]any{"type": "image"}}}))
	require.Equal(t, http.StatusBadRequest, status, got)
	code, message = errorOf(t, got)
	require.Equal(t, "bad_request_prefix", code)
	require.Contains(t, message, "system")
}
