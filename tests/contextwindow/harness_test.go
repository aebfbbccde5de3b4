// Package contextwindow_test runs the services that keep a session under its
// window together, against a real Postgres and a real JetStream: the
// accountant, the outbox relay, the compactor and the gateway's context API.
package contextwindow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/recallprefetch"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

const tenant = "acme"

type harness struct {
	store      *store.Store
	admin      *pgxpool.Pool // the database's administrator, for rows no service may write
	bus        *bus.Bus
	accountant *tokenaccounting.Service
	compactor  *compactor.Service
	settings   *tenantcfg.Cache
	metrics    *telemetrytest.Reader
	api        *httptest.Server
	key        string
	// clock is the gateway's time (unix nanoseconds); zero means the wall clock.
	clock atomic.Int64
	// client validates every answer against api/openapi.yaml.
	client *http.Client
	// selector answers recall's selections (recall.Builtin unless a test
	// sets another).
	selector atomic.Pointer[builtin.Handler]
}

// at sets the gateway's clock.
func (h *harness) at(t time.Time) { h.clock.Store(t.UnixNano()) }

// setup runs the relay, the compactor and the recall prefetch (on the bus)
// and the gateway (on a local HTTP server) until the test ends. Turn events are applied with the
// accountant directly, so a test knows when each one is in.
func setup(t *testing.T, provider llm.Provider) *harness {
	t.Helper()
	st := pgtest.New(t)
	b := bustest.New(t)
	apitest.CheckBusEvents(t, b)
	log := bustest.Logger(t)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, st.EnsureTenant(ctx, tenant, "Acme"))
	key := "mnm_test_" + strings.ReplaceAll(t.Name(), "/", "_")
	require.NoError(t, st.AddAPIKey(ctx, tenant, "test", key))
	if provider == nil {
		provider = builtin.New(map[llm.Task]builtin.Handler{llm.TaskCompaction: compaction.BuiltinSummarizer})
	}
	metrics := telemetrytest.New(t)
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, b, settings, log, metrics.Meter())
	require.NoError(t, err)
	ccfg := compactor.DefaultConfig()
	ccfg.Workers = 2
	comp, err := compactor.New(ccfg, st, b, settings, provider, log, metrics.Meter())
	require.NoError(t, err)
	gcfg := gateway.DefaultConfig()
	gcfg.PollInterval = 20 * time.Millisecond
	gcfg.LLMProvider = provider.Name()
	h := &harness{client: apitest.Client(t)}
	gcfg.Now = func() time.Time {
		if n := h.clock.Load(); n != 0 {
			return time.Unix(0, n)
		}
		return time.Now()
	}
	gw, err := gateway.New(gcfg, st, b, settings, log, metrics.Meter())
	require.NoError(t, err)
	memories, err := memory.NewStore(st, nil, memory.Options{Now: gcfg.Now})
	require.NoError(t, err)
	selector := builtin.Handler(recall.Builtin)
	h.selector.Store(&selector)
	selectors := builtin.New(map[llm.Task]builtin.Handler{llm.TaskRecall: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		return (*h.selector.Load())(ctx, req)
	}})
	recaller, err := recall.New(st, memories, selectors, func(ctx context.Context, tenant string) (recall.Settings, error) {
		set, err := settings.For(ctx, tenant)
		return set.Recall, err
	}, metrics.Meter(), recall.Options{Now: gcfg.Now})
	require.NoError(t, err)
	gw.UseRecall(recaller)
	prefetch, err := recallprefetch.New(recallprefetch.DefaultConfig(), b, recaller, log)
	require.NoError(t, err)
	mux := http.NewServeMux()
	gw.Register(mux)
	api := httptest.NewServer(mux)

	relay := outbox.New(outbox.Config{Batch: 128, Poll: 20 * time.Millisecond}, st, b, log)
	var wg sync.WaitGroup
	wg.Go(func() { _ = relay.Run(ctx) })
	wg.Go(func() {
		if err := comp.Run(ctx); err != nil {
			t.Errorf("compactor: %v", err)
		}
	})
	wg.Go(func() {
		if err := prefetch.Run(ctx); err != nil {
			t.Errorf("recall prefetch: %v", err)
		}
	})
	t.Cleanup(func() { api.Close(); gw.Drain(); cancel(); wg.Wait() })
	h.admin = pgtest.Admin(t, st)
	h.store, h.bus, h.accountant, h.compactor, h.settings, h.metrics, h.api, h.key = st, b, acc, comp, settings, metrics, api, key
	return h
}

func (h *harness) session(t *testing.T, id string) sessionstate.Session {
	t.Helper()
	s, err := h.store.GetSession(context.Background(), tenant, id)
	require.NoError(t, err)
	return s
}

// settle waits until the session has no compaction in flight.
func (h *harness) settle(t *testing.T, id string) sessionstate.Session {
	t.Helper()
	var s sessionstate.Session
	require.Eventually(t, func() bool {
		s = h.session(t, id)
		return !s.CompactionInFlight
	}, 30*time.Second, 10*time.Millisecond, "the compaction of %s did not finish", id)
	return s
}

// get calls the API and decodes a JSON answer into out (when not nil).
func (h *harness) get(t *testing.T, path string, out any) (int, []byte) {
	t.Helper()
	return h.call(t, http.MethodGet, path, "", out)
}

func (h *harness) call(t *testing.T, method, path, body string, out any) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.api.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.key)
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && resp.StatusCode < 300 {
		require.NoError(t, json.Unmarshal(raw, out), string(raw))
	}
	return resp.StatusCode, raw
}

// contextBody is the part of GET …/context the tests read.
type contextBody struct {
	Messages []struct {
		Role    string       `json:"role"`
		Content turn.Content `json:"content"`
	} `json:"messages"`
	MessageUUIDs []string `json:"message_uuids"`
	Tokens       struct {
		Count       int64  `json:"count"`
		State       string `json:"state"`
		AutoCompact int64  `json:"autocompact_threshold"`
		Blocking    int64  `json:"blocking_threshold"`
	} `json:"tokens"`
	ContextTokens int64 `json:"context_tokens"`
	Compaction    *struct {
		ID     string `json:"id"`
		Method string `json:"method"`
	} `json:"compaction"`
	CompactionInFlight bool   `json:"compaction_in_flight"`
	Epoch              int64  `json:"epoch"`
	LLMProvider        string `json:"llm_provider"`
}

// conversation makes a session's turn events, one API round each, with
// usage that reports what the context holds, as a backend that sends the
// context Mnemos returns would see it.
type conversation struct {
	h       *harness
	id      string
	seq     int64
	n       int
	at      time.Time
	pending []turn.Message
	// window and maxOutput are what the events report (200,000 and 32,000).
	window, maxOutput int64
	// scope is the events' memory_scope.
	scope map[string]string
	// input, when above zero, is the input tokens the next response's
	// usage reports instead of what the context holds (then back to zero).
	input int64
}

func (h *harness) conversation(id string) *conversation {
	return &conversation{h: h, id: id, at: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC), window: 200_000, maxOutput: 32_000}
}

func (c *conversation) uuid(kind string) string {
	c.n++
	return fmt.Sprintf("%s-%s-%d", c.id, kind, c.n)
}

// user adds a user message to the next round.
func (c *conversation) user(text string) string {
	id := c.uuid("u")
	c.pending = append(c.pending, turn.Message{UUID: id, Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}})
	return id
}

// toolResult adds a tool result to the next round.
func (c *conversation) toolResult(toolUseID, text string) {
	inner := turn.Content{{Type: turn.BlockText, Text: text}}
	c.pending = append(c.pending, turn.Message{UUID: c.uuid("r"), Role: "user", Content: turn.Content{
		{Type: turn.BlockToolResult, ToolUseID: toolUseID, Content: &inner},
	}})
}

// respond closes the round with a response and applies it. idle is the time
// since the previous round.
func (c *conversation) respond(t *testing.T, idle time.Duration, blocks ...turn.Block) string {
	t.Helper()
	c.seq++
	c.at = c.at.Add(idle)
	stop := "end_turn"
	for _, b := range blocks {
		if b.Type == turn.BlockToolUse {
			stop = "tool_use"
		}
	}
	resp := turn.Message{UUID: c.uuid("a"), Role: "assistant", Content: blocks, StopReason: stop}
	sess, err := c.h.store.GetSession(context.Background(), tenant, c.id)
	var before int64
	if err == nil {
		before = sess.TokenCount
	}
	var added int64
	for _, m := range c.pending {
		added += tokens.EstimateMessage(m)
	}
	if c.input > 0 {
		before, added, c.input = c.input, 0, 0
	}
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: c.uuid("e"), TenantID: tenant, SessionID: c.id, Seq: c.seq,
		Model: "claude-sonnet-4-5", ContextWindow: c.window, MaxOutputTokens: c.maxOutput, MemoryScope: c.scope,
		InputMessages: c.pending, Response: &resp,
		Usage:      &turn.Usage{InputTokens: before + added, OutputTokens: tokens.EstimateMessage(resp)},
		OccurredAt: c.at,
	}
	c.pending = nil
	require.NoError(t, c.h.accountant.Apply(context.Background(), ev))
	return resp.UUID
}

// send applies the next round's input alone, before its model call: a turn
// without a response, counted by the estimate of what it adds.
func (c *conversation) send(t *testing.T) {
	t.Helper()
	c.seq++
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: c.uuid("e"), TenantID: tenant, SessionID: c.id, Seq: c.seq,
		Model: "claude-sonnet-4-5", ContextWindow: c.window, MaxOutputTokens: c.maxOutput, MemoryScope: c.scope,
		InputMessages: c.pending, OccurredAt: c.at,
	}
	c.pending = nil
	require.NoError(t, c.h.accountant.Apply(context.Background(), ev))
}

func text(s string) turn.Block { return turn.Block{Type: turn.BlockText, Text: s} }

func toolUse(id, name string, input map[string]any) turn.Block {
	raw, _ := json.Marshal(input)
	return turn.Block{Type: turn.BlockToolUse, ID: id, Name: name, Input: raw}
}

// filler is n bytes of readable text (n/4 tokens by the estimate).
func filler(seed string, n int) string {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%s line %d of the output. ", seed, b.Len())
	}
	return b.String()[:n]
}
