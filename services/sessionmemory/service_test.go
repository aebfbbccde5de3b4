package sessionmemory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/sessionmemory"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

const tenant = "acme"

// harness is a real Postgres and a real JetStream namespace with the
// accountant (applied directly, so a test knows when each turn is in).
// Session-memory services and the outbox relay start when a test asks.
type harness struct {
	t          *testing.T
	store      *store.Store
	busCfg     bus.Config
	bus        *bus.Bus
	accountant *tokenaccounting.Service
	settings   *tenantcfg.Cache
	metrics    *telemetrytest.Reader
	ctx        context.Context
	wg         sync.WaitGroup
}

func setup(t *testing.T) *harness {
	t.Helper()
	st := pgtest.New(t)
	metrics := telemetrytest.New(t)
	cfg := bustest.Config(t)
	cfg.Meter = metrics.Meter() // the bus counts every consumer's deliveries
	b := bustest.Connect(t, cfg)
	apitest.CheckBusEvents(t, b, bus.KindSessionMemoryUpdated) // the tests publish the turns it reads, bad ones too
	require.NoError(t, st.EnsureTenant(context.Background(), tenant, "Acme"))
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, b, settings, bustest.Logger(t), metrics.Meter())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, store: st, busCfg: cfg, bus: b, accountant: acc, settings: settings, metrics: metrics, ctx: ctx}
	t.Cleanup(func() { cancel(); h.wg.Wait() })
	return h
}

// service starts a session-memory service, on a bus connection of its own
// (a replica), until the test ends.
func (h *harness) service(provider llm.Provider) *sessionmemory.Service {
	h.t.Helper()
	b := bustest.Connect(h.t, h.busCfg)
	cfg := sessionmemory.DefaultConfig()
	svc, err := sessionmemory.New(cfg, h.store, b, h.settings, provider, bustest.Logger(h.t), h.metrics.Meter())
	require.NoError(h.t, err)
	// Stopped before its bus connection closes (cleanups run last first).
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := svc.Run(ctx); err != nil {
			h.t.Errorf("session-memory: %v", err)
		}
	})
	h.t.Cleanup(func() { cancel(); wg.Wait() })
	return svc
}

// relay publishes the outbox (turn.accounted, session_memory.updated, …).
func (h *harness) relay() {
	r := outbox.New(outbox.Config{Batch: 128, Poll: 20 * time.Millisecond}, h.store, h.bus, bustest.Logger(h.t))
	h.wg.Go(func() { _ = r.Run(h.ctx) })
}

func (h *harness) notes(session string) store.Notes {
	h.t.Helper()
	var n store.Notes
	err := h.store.InTx(context.Background(), tenant, func(tx *store.Tx) error {
		var err error
		n, err = tx.Notes(context.Background(), session)
		return err
	})
	if err != nil {
		require.ErrorIs(h.t, err, store.ErrNotFound)
	}
	return n
}

// settled waits until the service has looked at turn seq of the session
// and no update of it runs or waits.
func (h *harness) settled(session string, seq int64) store.Notes {
	h.t.Helper()
	var n store.Notes
	require.Eventually(h.t, func() bool {
		n = h.notes(session)
		return n.SeenSeq >= seq && n.UpdateOwner == "" && !n.Pending
	}, 60*time.Second, 10*time.Millisecond, "session %s did not settle at seq %d", session, seq)
	return n
}

// conversation makes one session's turn events: each round a user request,
// a Read call with a result of resultBytes, and an answer.
type conversation struct {
	h      *harness
	id     string
	seq    int64
	n      int
	at     time.Time
	before int64
	uuids  []string
}

func (h *harness) conversation(id string) *conversation {
	return &conversation{h: h, id: id, at: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
}

func (c *conversation) uuid(kind string) string {
	c.n++
	id := fmt.Sprintf("%s-%s-%d", c.id, kind, c.n)
	if kind != "e" {
		c.uuids = append(c.uuids, id)
	}
	return id
}

// apply sends one API round through the accountant.
func (c *conversation) apply(input []turn.Message, resp turn.Message) {
	c.h.t.Helper()
	c.seq++
	c.at = c.at.Add(time.Minute)
	var added int64
	for _, m := range input {
		added += tokens.EstimateMessage(m)
	}
	out := tokens.EstimateMessage(resp)
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: c.uuid("e"), TenantID: tenant, SessionID: c.id, Seq: c.seq,
		Model: "claude-sonnet-4-5", ContextWindow: 200_000, MaxOutputTokens: 32_000,
		InputMessages: input, Response: &resp,
		Usage:      &turn.Usage{InputTokens: c.before + added, OutputTokens: out},
		OccurredAt: c.at,
	}
	c.before += added + out
	require.NoError(c.h.t, c.h.accountant.Apply(context.Background(), ev))
}

// round adds a request, a Read call and its result (two API rounds).
func (c *conversation) round(k, resultBytes int) {
	c.h.t.Helper()
	call := fmt.Sprintf("%s-call-%d", c.id, k)
	raw, _ := json.Marshal(map[string]any{"file_path": fmt.Sprintf("/src/file%d.go", k)})
	c.apply([]turn.Message{{UUID: c.uuid("u"), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: fmt.Sprintf("Request %d: read file %d.", k, k)}}}},
		turn.Message{UUID: c.uuid("a"), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
			{Type: turn.BlockText, Text: "Reading."}, {Type: turn.BlockToolUse, ID: call, Name: "Read", Input: raw}}})
	inner := turn.Content{{Type: turn.BlockText, Text: strings.Repeat("x", resultBytes)}}
	c.apply([]turn.Message{{UUID: c.uuid("r"), Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: call, Content: &inner}}}},
		turn.Message{UUID: c.uuid("a"), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: fmt.Sprintf("File %d is fine.", k)}}})
}

func (c *conversation) last() string { return c.uuids[len(c.uuids)-1] }

// publish sends a turn.accounted event for the session as the accountant
// would, with the numbers the gate reads.
func (h *harness) publish(session string, seq, count, toolCallsTotal int64, toolCalls int) {
	h.t.Helper()
	data, err := json.Marshal(events.TurnAccounted{
		Schema: events.SchemaTurnAccounted, EventID: fmt.Sprintf("%s-%d", session, seq), TenantID: tenant, SessionID: session,
		Seq: seq, AgentID: "main", Tokens: events.Tokens{Count: count}, ToolCalls: toolCalls, ToolCallsTotal: toolCallsTotal,
		MessageUUIDs: []string{}, AccountedAt: time.Now(),
	})
	require.NoError(h.t, err)
	_, err = h.bus.Publish(context.Background(), h.bus.Subject(bus.KindTurnAccounted, tenant, session), fmt.Sprintf("test:%s:%d:%d", session, seq, time.Now().UnixNano()), data, nil)
	require.NoError(h.t, err)
}

// setMark puts the update gate's mark where a test wants it.
func (h *harness) setMark(session string, m store.NotesMark) {
	h.t.Helper()
	_, err := pgtest.Admin(h.t, h.store).Exec(context.Background(), `
		INSERT INTO session_notes (tenant_id, session_id, mark_attempted, mark_seq, mark_tokens, mark_tool_calls)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (tenant_id, session_id) DO UPDATE SET mark_attempted = $3, mark_seq = $4, mark_tokens = $5, mark_tool_calls = $6`,
		tenant, session, m.Attempted, m.Seq, m.Tokens, m.ToolCalls)
	require.NoError(h.t, err)
}

// counting is a builtin provider whose notes handler counts its calls and
// how many run at once, and waits for pause before answering.
type counting struct {
	calls, active, maxActive atomic.Int64
	pause                    func(call int64)
}

func (c *counting) provider() llm.Provider {
	return builtin.New(map[llm.Task]builtin.Handler{llm.TaskNotes: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		n := c.calls.Add(1)
		a := c.active.Add(1)
		defer c.active.Add(-1)
		for {
			m := c.maxActive.Load()
			if a <= m || c.maxActive.CompareAndSwap(m, a) {
				break
			}
		}
		if c.pause != nil {
			c.pause(n)
		}
		return sessionnotes.Builtin(ctx, req)
	}})
}

func TestDecide(t *testing.T) {
	t.Parallel()
	set := tenantcfg.DefaultSessionMemory()
	none := store.NotesMark{}
	mark := store.NotesMark{Attempted: true, Seq: 5, Tokens: 10_000, ToolCalls: 4}
	turnOf := func(seq, count, total int64, calls int) store.NotesTurn {
		return store.NotesTurn{Seq: seq, Tokens: count, ToolCallsTotal: total, ToolCalls: calls}
	}
	for _, tt := range []struct {
		name string
		mark store.NotesMark
		turn store.NotesTurn
		want sessionmemory.Decision
	}{
		{"first: below 10,000 tokens", none, turnOf(3, 9_999, 30, 0), sessionmemory.Decision{}},
		{"first: at 10,000 tokens", none, turnOf(3, 10_000, 1, 1), sessionmemory.Decision{Due: true}},
		{"tool calls enough but tokens not", mark, turnOf(6, 14_999, 20, 1), sessionmemory.Decision{}},
		{"5,000 more tokens and 3 tool calls", mark, turnOf(6, 15_000, 7, 1), sessionmemory.Decision{Due: true}},
		{"5,000 more tokens, 2 tool calls", mark, turnOf(6, 15_000, 6, 1), sessionmemory.Decision{}},
		{"5,000 more tokens, the last response made no tool call", mark, turnOf(6, 15_000, 6, 0), sessionmemory.Decision{Due: true}},
		{"no tool call in the last response but tokens not", mark, turnOf(6, 14_999, 4, 0), sessionmemory.Decision{}},
		{"a turn the last update read", mark, turnOf(5, 50_000, 40, 0), sessionmemory.Decision{}},
		{"a compaction lowered the count", store.NotesMark{Attempted: true, Seq: 5, Tokens: 150_000, ToolCalls: 4}, turnOf(6, 40_000, 9, 0), sessionmemory.Decision{Rebase: true}},
	} {
		require.Equal(t, tt.want, sessionmemory.Decide(tt.mark, tt.turn, set), tt.name)
	}
	own := set
	own.InitTokens, own.UpdateTokens, own.UpdateToolCalls = 2_000, 1_000, 1
	require.True(t, sessionmemory.Decide(none, turnOf(1, 2_000, 0, 0), own).Due, "a tenant's own numbers")
	require.True(t, sessionmemory.Decide(mark, turnOf(6, 11_000, 5, 1), own).Due)
}

// TestGatesOverTheBus runs the gate's cases through the service: a
// turn.accounted event on JetStream, the notes row in Postgres, and whether
// the notes were written (their version).
func TestGatesOverTheBus(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var prov counting
	h.service(prov.provider())
	mark := store.NotesMark{Attempted: true, Seq: 5, Tokens: 10_000, ToolCalls: 4}
	type event struct {
		seq, count, total int64
		calls             int
	}
	for i, tt := range []struct {
		name    string
		mark    *store.NotesMark
		events  []event
		updated bool
		// markTokens is the mark's count afterwards (0: not checked).
		markTokens int64
	}{
		{name: "first: below 10,000 tokens", events: []event{{6, 9_999, 30, 0}}},
		{name: "first: at 10,000 tokens", events: []event{{6, 10_000, 1, 1}}, updated: true},
		{name: "tool calls enough but tokens not", mark: &mark, events: []event{{6, 14_999, 20, 1}}},
		{name: "5,000 more tokens and 3 tool calls", mark: &mark, events: []event{{6, 15_000, 7, 1}}, updated: true},
		{name: "5,000 more tokens, 2 tool calls", mark: &mark, events: []event{{6, 15_000, 6, 1}}},
		{name: "5,000 more tokens, no tool call in the last response", mark: &mark, events: []event{{6, 15_000, 6, 0}}, updated: true},
		{name: "no tool call in the last response but tokens not", mark: &mark, events: []event{{6, 14_999, 4, 0}}},
		{name: "a turn the last update read", mark: &mark, events: []event{{5, 50_000, 40, 0}}},
		{name: "a compaction lowered the count", mark: &store.NotesMark{Attempted: true, Seq: 5, Tokens: 150_000, ToolCalls: 4},
			events: []event{{6, 40_000, 9, 0}}, markTokens: 40_000},
		{name: "growth counts from where a compaction left the count", mark: &store.NotesMark{Attempted: true, Seq: 5, Tokens: 150_000, ToolCalls: 4},
			events: []event{{6, 40_000, 9, 0}, {7, 45_000, 12, 1}}, updated: true},
	} {
		session := fmt.Sprintf("gate-%d", i)
		c := h.conversation(session)
		c.round(1, 400)
		if tt.mark != nil {
			h.setMark(session, *tt.mark)
		}
		var last int64
		for _, e := range tt.events {
			h.publish(session, e.seq, e.count, e.total, e.calls)
			last = e.seq
			h.settled(session, e.seq)
		}
		n := h.settled(session, last)
		if tt.updated {
			require.EqualValues(t, 1, n.Version, tt.name)
			require.Equal(t, c.last(), n.LastSummarizedUUID, tt.name)
			require.Contains(t, n.Content, "Request 1: read file 1.", tt.name)
		} else {
			require.Zero(t, n.Version, tt.name)
			require.Empty(t, n.Content, tt.name)
		}
		if tt.markTokens != 0 {
			require.Equal(t, tt.markTokens, n.Mark.Tokens, tt.name)
		}
	}
	require.EqualValues(t, 4, prov.calls.Load(), "one model call per update")
	require.EqualValues(t, 4, h.metrics.Sum("mnemos.session_notes.updates", "outcome", sessionmemory.OutcomeUpdated))
}

// TestAnUpdateCoversTheTurnsItsMarkRecords: the session is read first,
// then its messages; a turn the accountant applies in between is left to
// the next update, so the notes never cover turns the gate's mark does not
// count (which would make the next due turn find nothing new to write).
func TestAnUpdateCoversTheTurnsItsMarkRecords(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var prov counting
	h.service(prov.provider())
	c := h.conversation("skew")
	c.round(1, 400)
	through := c.last()
	c.round(2, 400)
	// The session as read before round 2 was applied: its messages are
	// there already, its row does not count them yet.
	_, err := pgtest.Admin(t, h.store).Exec(context.Background(),
		"UPDATE sessions SET applied_seq = 2, message_count = 4, token_count = 12000, tool_calls_total = 1 WHERE session_id = 'skew'")
	require.NoError(t, err)
	h.publish("skew", 2, 12_000, 1, 0)
	n := h.settled("skew", 2)
	require.EqualValues(t, 1, n.Version)
	require.Equal(t, store.NotesMark{Attempted: true, Seq: 2, Tokens: 12_000, ToolCalls: 1}, n.Mark)
	require.Equal(t, through, n.LastSummarizedUUID, "the notes cover what the mark records, no more")
	require.Contains(t, n.Content, "Request 1: read file 1.")
	require.NotContains(t, n.Content, "Request 2: read file 2.")
}

// TestOneUpdateAtATimeAcrossReplicas: twenty turn.accounted events of one
// session reach two replicas at once; at most one update runs at any time,
// and the notes end up covering the newest turn.
func TestOneUpdateAtATimeAcrossReplicas(t *testing.T) {
	t.Parallel()
	h := setup(t)
	c := h.conversation("burst")
	for k := 1; k <= 10; k++ {
		c.round(k, 6_000) // two turns, about 1,530 tokens
	}
	require.EqualValues(t, 20, c.seq)
	prov := counting{pause: func(int64) { time.Sleep(200 * time.Millisecond) }}
	h.service(prov.provider())
	h.service(prov.provider())
	h.relay() // publishes the twenty turn.accounted events at once

	n := h.settled("burst", 20)
	require.EqualValues(t, 1, prov.maxActive.Load(), "never two updates of one session at once")
	require.EqualValues(t, 1, prov.calls.Load(), "the update read every turn, so the coalesced requests were no longer due")
	require.EqualValues(t, 1, n.Version)
	require.Equal(t, c.last(), n.LastSummarizedUUID, "the notes cover the newest turn")
	require.Contains(t, n.Content, "> File 10 is fine.")
	require.Contains(t, n.Content, "/src/file10.go (read)")
	require.EqualValues(t, 20, n.Mark.Seq)
}

// TestRequestsDuringAnUpdateCoalesceIntoOneTrailingRun: while an update
// runs, ten more turns arrive; they become one trailing run, which reads
// the newest state.
func TestRequestsDuringAnUpdateCoalesceIntoOneTrailingRun(t *testing.T) {
	t.Parallel()
	h := setup(t)
	started := make(chan struct{})
	release := make(chan struct{})
	prov := counting{pause: func(call int64) {
		if call == 1 {
			close(started)
			<-release
		}
	}}
	sub, err := h.bus.Conn().SubscribeSync(h.bus.Subject(bus.KindSessionMemoryUpdated, tenant, "trail"))
	require.NoError(t, err)
	h.service(prov.provider())
	h.service(prov.provider())
	h.relay()

	c := h.conversation("trail")
	for k := 1; k <= 4; k++ {
		c.round(k, 10_000) // 2,530 tokens a round: the first update is due at turn 8
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the first update did not start")
	}
	for k := 5; k <= 9; k++ {
		c.round(k, 10_000)
	}
	require.Eventually(t, func() bool { return h.notes("trail").SeenSeq == c.seq }, 30*time.Second, 10*time.Millisecond)
	require.True(t, h.notes("trail").Pending, "the requests wait as one trailing run")
	close(release)

	n := h.settled("trail", c.seq)
	require.EqualValues(t, 2, prov.calls.Load(), "the first update, then one trailing run")
	require.EqualValues(t, 1, prov.maxActive.Load())
	require.EqualValues(t, 2, n.Version)
	require.Equal(t, c.last(), n.LastSummarizedUUID, "the trailing run read the newest state")
	require.Contains(t, n.Content, "> File 9 is fine.")
	require.GreaterOrEqual(t, h.metrics.Sum("mnemos.session_notes.updates", "outcome", sessionmemory.OutcomeCoalesced), int64(10))

	for v := int64(1); v <= 2; v++ {
		msg, err := sub.NextMsg(10 * time.Second)
		require.NoError(t, err, "session_memory.updated %d was published", v)
		var ev events.SessionMemoryUpdated
		require.NoError(t, json.Unmarshal(msg.Data, &ev))
		require.Equal(t, events.SchemaSessionMemoryUpdated, ev.Schema)
		require.Equal(t, v, ev.Version)
		require.Equal(t, "builtin", ev.LLMProvider)
		require.Contains(t, ev.Sections, sessionnotes.HeadingWorklog)
	}
	require.Equal(t, c.last(), n.LastSummarizedUUID)
}

// TestSweepRunsATrailingRunLeftBehind: a worker stopped while it held the
// claim with a trailing run waiting; once the claim runs out, the sweep
// runs it.
func TestSweepRunsATrailingRunLeftBehind(t *testing.T) {
	t.Parallel()
	h := setup(t)
	c := h.conversation("orphan")
	for k := 1; k <= 5; k++ {
		c.round(k, 6_000)
	}
	_, err := pgtest.Admin(t, h.store).Exec(context.Background(), `
		INSERT INTO session_notes (tenant_id, session_id, update_owner, update_lease_until, pending, pending_seq, pending_tokens, pending_tool_calls_total)
		VALUES ($1, 'orphan', 'a-stopped-worker', now() - interval '1 second', true, 10, 12000, 5)`, tenant)
	require.NoError(t, err)
	var prov counting
	b := bustest.Connect(t, h.busCfg)
	svc, err := sessionmemory.New(sessionmemory.DefaultConfig(), h.store, b, h.settings, prov.provider(), bustest.Logger(t), h.metrics.Meter())
	require.NoError(t, err)

	require.NoError(t, svc.Sweep(context.Background()))
	n := h.notes("orphan")
	require.EqualValues(t, 1, n.Version)
	require.False(t, n.Pending)
	require.Empty(t, n.UpdateOwner, "the claim is released")
	require.Equal(t, c.last(), n.LastSummarizedUUID)

	require.NoError(t, svc.Sweep(context.Background()), "nothing left to sweep")
	require.EqualValues(t, 1, prov.calls.Load())
}

// TestATrailingRunCutShortIsLeftToTheSweep: the worker running a session's
// trailing run stops before it stores anything (the turn that asked for it
// was acknowledged when it was coalesced); the run stays owed, and the
// sweep makes it.
func TestATrailingRunCutShortIsLeftToTheSweep(t *testing.T) {
	t.Parallel()
	h := setup(t)
	started, release, trailing := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	provider := builtin.New(map[llm.Task]builtin.Handler{llm.TaskNotes: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		switch calls.Add(1) {
		case 1:
			close(started)
			<-release
		case 2:
			close(trailing)
			<-ctx.Done() // the worker stops
			return llm.Response{}, ctx.Err()
		}
		return sessionnotes.Builtin(ctx, req)
	}})
	b := bustest.Connect(t, h.busCfg)
	svc, err := sessionmemory.New(sessionmemory.DefaultConfig(), h.store, b, h.settings, provider, bustest.Logger(t), h.metrics.Meter())
	require.NoError(t, err)
	handle := func(ctx context.Context, seq, count, total int64) error {
		data, err := json.Marshal(events.TurnAccounted{
			Schema: events.SchemaTurnAccounted, EventID: fmt.Sprintf("cut-%d", seq), TenantID: tenant, SessionID: "cut",
			Seq: seq, AgentID: "main", Tokens: events.Tokens{Count: count}, ToolCalls: 1, ToolCallsTotal: total,
			MessageUUIDs: []string{}, AccountedAt: time.Now(),
		})
		require.NoError(t, err)
		return svc.Handle(ctx, bus.Message{Subject: b.Subject(bus.KindTurnAccounted, tenant, "cut"), Data: data})
	}

	c := h.conversation("cut")
	for k := 1; k <= 2; k++ {
		c.round(k, 400)
	}
	ctx, stop := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- handle(ctx, 2, 10_000, 2) }()
	<-started
	c.round(3, 400)
	require.NoError(t, handle(context.Background(), 6, 16_000, 6), "coalesced into the trailing run")
	require.True(t, h.notes("cut").Pending)
	close(release)
	<-trailing
	stop()
	require.ErrorIs(t, <-first, context.Canceled)
	n := h.notes("cut")
	require.EqualValues(t, 1, n.Version)
	require.True(t, n.Pending, "the trailing run is still owed")

	require.NoError(t, svc.Sweep(context.Background()))
	n = h.notes("cut")
	require.EqualValues(t, 2, n.Version, "the sweep made the trailing run")
	require.Equal(t, c.last(), n.LastSummarizedUUID)
	require.False(t, n.Pending)
	require.Empty(t, n.UpdateOwner)
	require.EqualValues(t, 3, calls.Load())
}

// TestBadEventsAreDeadLettered: an event that cannot be read is refused with
// its reason, counted, and changes nothing.
func TestBadEventsAreDeadLettered(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var prov counting
	h.service(prov.provider())
	sub, err := h.bus.Conn().SubscribeSync(h.bus.Prefix("deadletter." + bus.KindTurnAccounted + ".>"))
	require.NoError(t, err)
	other, err := json.Marshal(events.TurnAccounted{Schema: events.SchemaTurnAccounted, TenantID: "someone-else", SessionID: "bad", Seq: 1})
	require.NoError(t, err)
	negative, err := json.Marshal(events.TurnAccounted{Schema: events.SchemaTurnAccounted, TenantID: tenant, SessionID: "bad", Seq: 2, Tokens: events.Tokens{Count: -5}})
	require.NoError(t, err)
	for i, data := range [][]byte{[]byte("{not json"), other, negative} {
		_, err := h.bus.Publish(context.Background(), h.bus.Subject(bus.KindTurnAccounted, tenant, "bad"), fmt.Sprintf("bad-%d", i), data, nil)
		require.NoError(t, err)
	}
	var reasons []string
	for range 3 {
		msg, err := sub.NextMsg(30 * time.Second)
		require.NoError(t, err)
		reasons = append(reasons, msg.Header.Get(bus.HeaderDeadLetterReason))
	}
	all := strings.Join(reasons, "\n") // workers settle them in any order
	require.Contains(t, all, "turn.accounted: invalid character")
	require.Contains(t, all, "arrived on the subject of acme/bad")
	require.Contains(t, all, "no negative number")
	require.Eventually(t, func() bool {
		return h.metrics.SumAll("mnemos.bus.deliveries", "consumer", "session-memory", "result", string(bus.DeadLettered)) == 3
	}, 10*time.Second, 10*time.Millisecond)
	require.Zero(t, prov.calls.Load())
	require.Empty(t, h.notes("bad").Content)
}
