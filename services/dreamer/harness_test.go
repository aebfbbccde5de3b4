package dreamer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/dreamer"
	"github.com/mnemos-ai/mnemos/services/gateway"
)

const (
	tenant = "acme"
	apiKey = "key-acme"
)

var scope = memory.Scope{Kind: memory.KindUser, ID: "u-42"}

// harness is a real Postgres and a real JetStream namespace with the
// outbox relayed, a memory store to seed with, and the gateway's API.
type harness struct {
	t        *testing.T
	dbURL    string
	store    *store.Store
	busCfg   bus.Config
	bus      *bus.Bus
	settings *tenantcfg.Cache
	metrics  *telemetrytest.Reader
	memories *memory.Store
	clock    *clock
	api      *httptest.Server
	ctx      context.Context
	wg       sync.WaitGroup
}

// clock is a settable clock for the memories a test seeds.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func setup(t *testing.T, settings string) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, dbURL: pgtest.URL(t), ctx: ctx, clock: &clock{t: time.Now().UTC()}}
	st, err := store.Open(ctx, store.Config{URL: h.dbURL, MaxConns: 16})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	h.store = st
	h.busCfg = bustest.Config(t)
	h.bus = bustest.Connect(t, h.busCfg)
	apitest.CheckBusEvents(t, h.bus)
	require.NoError(t, st.EnsureTenant(ctx, tenant, "Acme"))
	require.NoError(t, st.AddAPIKey(ctx, tenant, "test", apiKey))
	if settings != "" {
		require.NoError(t, st.SetTenantSettings(ctx, tenant, []byte(settings)))
	}
	h.settings, err = tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, 100*time.Millisecond)
	require.NoError(t, err)
	h.metrics = telemetrytest.New(t)
	h.memories, err = memory.NewStore(st, nil, memory.Options{Now: h.clock.now})
	require.NoError(t, err)

	relay := outbox.New(outbox.Config{Batch: 128, Poll: 20 * time.Millisecond}, st, h.bus, bustest.Logger(t))
	h.wg.Go(func() { _ = relay.Run(ctx) })

	gcfg := gateway.DefaultConfig()
	gw, err := gateway.New(gcfg, st, h.bus, h.settings, bustest.Logger(t), nil)
	require.NoError(t, err)
	mux := http.NewServeMux()
	gw.Register(mux)
	h.api = httptest.NewServer(mux)
	t.Cleanup(func() { h.api.Close(); gw.Drain() })
	t.Cleanup(func() { cancel(); h.wg.Wait() })
	return h
}

// service starts a dreamer on a bus connection of its own (a replica)
// until the test ends.
func (h *harness) service(cfg dreamer.Config, provider llm.Provider, opts dreamer.Options) *dreamer.Service {
	h.t.Helper()
	svc := h.newService(cfg, provider, opts)
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := svc.Run(ctx); err != nil {
			h.t.Errorf("dreamer: %v", err)
		}
	})
	h.t.Cleanup(func() { cancel(); wg.Wait() })
	return svc
}

// newService builds a dreamer without running it.
func (h *harness) newService(cfg dreamer.Config, provider llm.Provider, opts dreamer.Options) *dreamer.Service {
	h.t.Helper()
	b := bustest.Connect(h.t, h.busCfg)
	svc, err := dreamer.New(cfg, h.store, b, h.settings, provider, bustest.Logger(h.t), h.metrics.Meter(), opts)
	require.NoError(h.t, err)
	return svc
}

// fast is a dreamer configuration for tests: quick scans and heartbeats.
func fast(holder string) dreamer.Config {
	cfg := dreamer.DefaultConfig()
	cfg.ScanEvery, cfg.Heartbeat, cfg.Holder = 100*time.Millisecond, 100*time.Millisecond, holder
	return cfg
}

// scripted is the real Anthropic SDK provider against a local server
// answering as script says.
func scripted(t *testing.T, script llmtest.Script) (llm.Provider, *llmtest.Server) {
	t.Helper()
	srv := llmtest.NewAnthropicServer(t, script)
	p, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: srv.URL})
	require.NoError(t, err)
	return p, srv
}

func toolCall(name string, input any) llm.ToolCall {
	raw, _ := json.Marshal(input)
	return llm.ToolCall{Name: name, Input: raw}
}

// seed writes a memory at the harness clock's time.
func (h *harness) seed(name, description, body string) {
	h.t.Helper()
	_, err := h.memories.Write(context.Background(), tenant, scope, memory.Document{
		Name: memory.Name(name), Description: description, Type: memory.TypeProject, Body: body,
	}, memory.Change{Actor: memory.ActorAPI, Reason: "seed"}, memory.Expect{})
	require.NoError(h.t, err)
}

// session records a session naming memoryScope, active now, with messages
// of the given texts.
func (h *harness) session(id string, memoryScope map[string]string, texts ...string) {
	h.t.Helper()
	ctx := context.Background()
	require.NoError(h.t, h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		s, err := tx.LockSession(ctx, id, "main")
		if err != nil {
			return err
		}
		for i, text := range texts {
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			content, _ := json.Marshal([]map[string]any{{"type": "text", "text": text}})
			if _, err := tx.InsertMessage(ctx, store.Message{
				SessionID: id, UUID: fmt.Sprintf("%s-%d", id, i), Position: int64(i), Seq: int64(i/2 + 1), Role: role,
				Content: content, ContentHash: []byte{byte(i)}, EstimateTokens: int64(len(text) / 4),
			}); err != nil {
				return err
			}
		}
		s.MemoryScope, s.MessageCount = memoryScope, int64(len(texts))
		return tx.SaveSessions(ctx, s)
	}))
}

// consolidatedAt sets the scope's last consolidation time.
func (h *harness) consolidatedAt(at time.Time) {
	h.t.Helper()
	ctx := context.Background()
	require.NoError(h.t, h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		if _, err := tx.LockDreamScope(ctx, scope.String()); err != nil {
			return err
		}
		return tx.SetDreamConsolidated(ctx, scope.String(), at)
	}))
}

// scopeState reads the scope's dream state.
func (h *harness) scopeState() store.DreamScope {
	h.t.Helper()
	var s store.DreamScope
	ctx := context.Background()
	require.NoError(h.t, h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		s, err = tx.DreamScope(ctx, scope.String())
		return err
	}))
	return s
}

// dreams lists the scope's dreams, newest first.
func (h *harness) dreams() []store.Dream {
	h.t.Helper()
	var out []store.Dream
	ctx := context.Background()
	require.NoError(h.t, h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		out, err = tx.Dreams(ctx, scope.String(), 100)
		return err
	}))
	return out
}

// dream waits until the dream id is in status and returns it.
func (h *harness) dream(id, status string) store.Dream {
	h.t.Helper()
	var d store.Dream
	ctx := context.Background()
	require.Eventually(h.t, func() bool {
		err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			var err error
			d, err = tx.Dream(ctx, id)
			return err
		})
		return err == nil && d.Status == status
	}, 60*time.Second, 20*time.Millisecond, "dream %s never became %s (it is %s: %s)", id, status, d.Status, d.Error)
	return d
}

// events collects the dream events published in the harness's namespace.
type eventLog struct {
	mu  sync.Mutex
	evs []events.Dream
}

func (h *harness) watch() *eventLog {
	h.t.Helper()
	l := &eventLog{}
	sub, err := h.bus.Conn().Subscribe(h.bus.Prefix("dream.>"), func(m *nats.Msg) {
		var ev events.Dream
		if json.Unmarshal(m.Data, &ev) == nil {
			l.mu.Lock()
			l.evs = append(l.evs, ev)
			l.mu.Unlock()
		}
	})
	require.NoError(h.t, err)
	h.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return l
}

// of returns the events of a dream, in order, once one of them is in state last.
func (l *eventLog) of(t *testing.T, id, last string) []events.Dream {
	t.Helper()
	var out []events.Dream
	require.Eventually(t, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		out = nil
		done := false
		for _, ev := range l.evs {
			if ev.DreamID == id {
				out = append(out, ev)
				done = done || ev.State == last
			}
		}
		return done
	}, 30*time.Second, 20*time.Millisecond, "no %s event for dream %s", last, id)
	return out
}

func states(evs []events.Dream) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.State
	}
	return out
}

// call makes an API request and decodes the answer into out.
func (h *harness) call(method, path string, out any) int {
	h.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, h.api.URL+path, nil)
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	if out != nil {
		require.NoError(h.t, json.Unmarshal(body, out), "%s %s: %s", method, path, body)
	}
	return resp.StatusCode
}

// lastUserText is the text of the last message of a request the model got.
func lastUserText(r llmtest.Request) string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Text
}
