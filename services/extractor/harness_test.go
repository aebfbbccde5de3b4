package extractor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/extraction"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/extractor"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

const tenant = "acme"

// project is the write scope of the sessions of these tests.
var project = memory.Scope{Kind: memory.KindProject, ID: "repo-x"}

// harness is a real Postgres and a real JetStream namespace with the
// accountant (applied directly, so a test knows when each turn is in) and
// the outbox relay, which publishes turn.accounted. Extractor services
// start when a test asks.
type harness struct {
	t          *testing.T
	url        string
	store      *store.Store
	busCfg     bus.Config
	bus        *bus.Bus
	accountant *tokenaccounting.Service
	settings   *tenantcfg.Cache
	memories   *memory.Store
	metrics    *telemetrytest.Reader
	ctx        context.Context
	wg         sync.WaitGroup
}

// setup starts the harness; settings, when not "", are the tenant's.
func setup(t *testing.T, settings string) *harness {
	t.Helper()
	url := pgtest.URL(t)
	st, err := store.Open(context.Background(), store.Config{URL: url, MaxConns: 10})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	metrics := telemetrytest.New(t)
	cfg := bustest.Config(t)
	cfg.Meter = metrics.Meter() // the bus counts every consumer's deliveries
	b := bustest.Connect(t, cfg)
	apitest.CheckBusEvents(t, b, bus.KindMemorySaved) // the tests publish the turns it reads
	ctx := context.Background()
	require.NoError(t, st.EnsureTenant(ctx, tenant, "Acme"))
	if settings != "" {
		require.NoError(t, st.SetTenantSettings(ctx, tenant, []byte(settings)))
	}
	cache, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, b, cache, bustest.Logger(t), nil)
	require.NoError(t, err)
	mem, err := memory.NewStore(st, nil, memory.Options{})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, url: url, store: st, busCfg: cfg, bus: b, accountant: acc, settings: cache, memories: mem, metrics: metrics, ctx: runCtx}
	t.Cleanup(func() { cancel(); h.wg.Wait() })
	return h
}

// service starts an extractor on a bus connection and a store pool of its
// own (a replica) until the test ends, and returns a stop function that
// ends its Run and waits for it.
func (h *harness) service(provider llm.Provider) (*extractor.Service, func() error) {
	h.t.Helper()
	b := bustest.Connect(h.t, h.busCfg)
	st, err := store.Open(context.Background(), store.Config{URL: h.url, MaxConns: 10})
	require.NoError(h.t, err)
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(h.t, err)
	svc, err := extractor.New(extractor.DefaultConfig(), st, b, settings, provider, bustest.Logger(h.t), h.metrics.Meter())
	require.NoError(h.t, err)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	// Stopped before its bus connection and pool close (cleanups run last first).
	h.t.Cleanup(func() {
		if err := stop(); err != nil {
			h.t.Errorf("extractor: %v", err)
		}
		st.Close()
	})
	return svc, stop
}

// relay publishes the outbox (turn.accounted, memory.saved, …).
func (h *harness) relay() {
	r := outbox.New(outbox.Config{Batch: 128, Poll: 20 * time.Millisecond}, h.store, h.bus, bustest.Logger(h.t))
	h.wg.Go(func() { _ = r.Run(h.ctx) })
}

// subscribe collects the memory.saved events of the tenant.
func (h *harness) subscribe() *nats.Subscription {
	h.t.Helper()
	sub, err := h.bus.Conn().SubscribeSync(h.bus.Prefix(bus.KindMemorySaved + "." + tenant + ".>"))
	require.NoError(h.t, err)
	return sub
}

func (h *harness) nextSaved(sub *nats.Subscription) events.MemorySaved {
	h.t.Helper()
	msg, err := sub.NextMsg(30 * time.Second)
	require.NoError(h.t, err, "a memory.saved event was published")
	var ev events.MemorySaved
	require.NoError(h.t, json.Unmarshal(msg.Data, &ev))
	return ev
}

func (h *harness) cursor(session string) store.ExtractorCursor {
	h.t.Helper()
	var c store.ExtractorCursor
	err := h.store.InTx(context.Background(), tenant, func(tx *store.Tx) error {
		var err error
		c, err = tx.ExtractorCursor(context.Background(), session)
		return err
	})
	if err != nil {
		require.ErrorIs(h.t, err, store.ErrNotFound)
	}
	return c
}

// idle reports whether no run holds the scope and none is pending.
func (h *harness) idle(scope memory.Scope) bool {
	h.t.Helper()
	var l store.RunLease
	err := h.store.InTx(context.Background(), tenant, func(tx *store.Tx) error {
		var err error
		l, err = tx.RunLease(context.Background(), extractor.Kind, scope.String())
		return err
	})
	if err != nil {
		require.ErrorIs(h.t, err, store.ErrNotFound)
		return true
	}
	return l.Owner == "" && !l.Pending
}

// settled waits until the extractor has looked at turn seq of the session
// and no run is owed to it or holds its scope.
func (h *harness) settled(session string, seq int64) store.ExtractorCursor {
	h.t.Helper()
	var c store.ExtractorCursor
	require.Eventually(h.t, func() bool {
		c = h.cursor(session)
		return c.SeenSeq >= seq && !c.Due() && h.idle(project)
	}, 60*time.Second, 10*time.Millisecond, "session %s did not settle at seq %d", session, seq)
	return c
}

func (h *harness) memory(scope memory.Scope, name string) (memory.Memory, bool) {
	h.t.Helper()
	m, err := h.memories.Get(context.Background(), tenant, scope, memory.Name(name))
	if err != nil {
		require.ErrorIs(h.t, err, memory.ErrNotFound)
		return memory.Memory{}, false
	}
	return m, true
}

func (h *harness) names(scope memory.Scope) []string {
	h.t.Helper()
	heads, err := h.memories.Headers(context.Background(), tenant, scope, 0)
	require.NoError(h.t, err)
	var out []string
	for _, hd := range heads {
		out = append(out, string(hd.Name))
	}
	return out
}

// session makes one session's turn events.
type session struct {
	h      *harness
	id     string
	agent  string
	scope  map[string]string
	seq    int64
	n      int
	at     time.Time
	before int64
	events []string
}

func (h *harness) session(id string) *session {
	return &session{h: h, id: id, agent: "main", scope: map[string]string{"project": project.ID, "user": "u-42"}, at: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
}

func (s *session) uuid(kind string) string {
	s.n++
	return fmt.Sprintf("%s-%s-%d", s.id, kind, s.n)
}

// apply sends one API round through the accountant.
func (s *session) apply(input []turn.Message, resp turn.Message) {
	s.h.t.Helper()
	s.seq++
	s.at = s.at.Add(time.Minute)
	var added int64
	for _, m := range input {
		added += tokens.EstimateMessage(m)
	}
	out := tokens.EstimateMessage(resp)
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: s.uuid("e"), TenantID: tenant, SessionID: s.id, Seq: s.seq,
		AgentID: s.agent, MemoryScope: s.scope,
		Model: "claude-sonnet-4-5", ContextWindow: 200_000, MaxOutputTokens: 32_000,
		InputMessages: input, Response: &resp,
		Usage:      &turn.Usage{InputTokens: s.before + added, OutputTokens: out},
		OccurredAt: s.at,
	}
	s.before += added + out
	s.events = append(s.events, ev.EventID)
	require.NoError(s.h.t, s.h.accountant.Apply(context.Background(), ev))
}

// say is one user turn closed by the agent's answer in one round.
func (s *session) say(text, answer string) {
	s.h.t.Helper()
	s.apply([]turn.Message{{UUID: s.uuid("u"), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}}},
		turn.Message{UUID: s.uuid("a"), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: answer}}})
}

// work is a user turn with a tool call: a round that does not close the
// turn, then one that does.
func (s *session) work(text string) {
	s.h.t.Helper()
	call := s.uuid("call")
	s.apply([]turn.Message{{UUID: s.uuid("u"), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}}},
		turn.Message{UUID: s.uuid("a"), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
			{Type: turn.BlockToolUse, ID: call, Name: "Bash", Input: json.RawMessage(`{"command": "make test"}`)}}})
	inner := turn.Content{{Type: turn.BlockText, Text: "ok " + strings.Repeat("x", 5_000)}}
	s.apply([]turn.Message{{UUID: s.uuid("r"), Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: call, Content: &inner}}}},
		turn.Message{UUID: s.uuid("a"), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: "The tests pass."}}})
}

func (s *session) lastEvent() string { return s.events[len(s.events)-1] }

// recorder is a builtin provider whose extraction handler is the builtin
// extractor, recording the first request of every run (the user texts it
// saw) and how many runs are under way at once per scope, and pausing as
// pause says before answering a run's first turn.
type recorder struct {
	mu     sync.Mutex
	runs   []string // the conversation of each run's first request, flattened
	active map[string]int
	most   map[string]int
	calls  atomic.Int64
	pause  func(run int)
}

func (r *recorder) provider() llm.Provider {
	r.active, r.most = map[string]int{}, map[string]int{}
	return builtin.New(map[llm.Task]builtin.Handler{llm.TaskExtraction: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		r.calls.Add(1)
		last := req.Messages[len(req.Messages)-1].Content
		first := strings.HasPrefix(last[len(last)-1].Text, "Extract long-term memories")
		scope := scopeOf(req)
		r.mu.Lock()
		r.active[scope]++
		r.most[scope] = max(r.most[scope], r.active[scope])
		n := len(r.runs)
		if first {
			var b strings.Builder
			for _, m := range req.Messages {
				b.WriteString(llmtest.Flatten(m.Content) + "\n")
			}
			conv, _, _ := strings.Cut(b.String(), "<memory-manifest")
			r.runs = append(r.runs, conv)
		}
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			r.active[scope]--
			r.mu.Unlock()
		}()
		if first && r.pause != nil {
			r.pause(n + 1)
		}
		return extraction.Builtin(ctx, req)
	}})
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.runs...)
}

// scopeOf reads the scope a request is for out of its manifest.
func scopeOf(req llm.Request) string {
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if rest, ok := strings.CutPrefix(b.Text, `<memory-manifest scope="`); ok {
				scope, _, _ := strings.Cut(rest, `"`)
				return scope
			}
		}
	}
	return ""
}

// anthropicProvider is the real Anthropic SDK provider against a local
// server answering as script says.
func anthropicProvider(t *testing.T, script llmtest.Script) (llm.Provider, *llmtest.Server) {
	t.Helper()
	srv := llmtest.NewAnthropicServer(t, script)
	p, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: srv.URL})
	require.NoError(t, err)
	return p, srv
}

func call(name string, input any) llm.ToolCall {
	raw, _ := json.Marshal(input)
	return llm.ToolCall{Name: name, Input: raw}
}
