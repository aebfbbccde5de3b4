package tokenaccounting_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
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
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

const tenant = "acme"

type harness struct {
	store   *store.Store
	bus     *bus.Bus
	svc     *tokenaccounting.Service
	metrics *telemetrytest.Reader
}

// setup runs the accountant and the outbox relay against a real Postgres and
// a real JetStream until the test ends.
func setup(t *testing.T, mutate ...func(*tokenaccounting.Config)) *harness {
	t.Helper()
	st := pgtest.New(t)
	metrics := telemetrytest.New(t)
	bcfg := bustest.Config(t)
	bcfg.Meter = metrics.Meter() // the bus counts the deliveries
	b := bustest.Connect(t, bcfg)
	apitest.CheckBusEvents(t, b)
	log := bustest.Logger(t)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, st.EnsureTenant(ctx, tenant, "Acme"))
	// No limits unless a test sets a tenant's: the tests here send bursts.
	defaults := tenantcfg.Defaults()
	defaults.Limits = limits.Config{}
	settings, err := tenantcfg.NewCache(defaults, st.TenantSettings, time.Second)
	require.NoError(t, err)
	cfg := tokenaccounting.DefaultConfig()
	cfg.Workers = 8
	cfg.Limits, err = limits.New(st, func(ctx context.Context, tenant string) (limits.Config, error) {
		s, err := settings.For(ctx, tenant)
		return s.Limits, err
	}, metrics.Meter(), limits.Options{})
	require.NoError(t, err)
	for _, m := range mutate {
		m(&cfg)
	}
	svc, err := tokenaccounting.New(cfg, st, b, settings, log, metrics.Meter())
	require.NoError(t, err)
	relay := outbox.New(outbox.Config{Batch: 128, Poll: 50 * time.Millisecond}, st, b, log)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := svc.Run(ctx); err != nil {
			t.Errorf("service: %v", err)
		}
	})
	wg.Go(func() { _ = relay.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &harness{store: st, bus: b, svc: svc, metrics: metrics}
}

func (h *harness) publish(t *testing.T, ev turn.Event, msgID string) {
	t.Helper()
	data, err := json.Marshal(ev)
	require.NoError(t, err)
	h.publishRaw(t, ev.TenantID, ev.SessionID, data, msgID)
}

func (h *harness) publishRaw(t *testing.T, tenantID, session string, data []byte, msgID string) {
	t.Helper()
	_, err := h.bus.Publish(context.Background(), h.bus.Subject(bus.KindTurnCompleted, tenantID, session), msgID, data, nil)
	require.NoError(t, err)
}

// waitApplied waits until every session has applied (or rejected) its last seq.
func (h *harness) waitApplied(t *testing.T, want map[string]int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		for id, seq := range want {
			s, err := h.store.GetSession(context.Background(), tenant, id)
			if err != nil || s.AppliedSeq < seq {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond)
}

func (h *harness) waitOutboxEmpty(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, err := h.store.OutboxBacklog(context.Background())
		return err == nil && n == 0
	}, 30*time.Second, 20*time.Millisecond)
}

// collect reads every message of a stream on subjects matching filter.
func (h *harness) collect(t *testing.T, stream, filter string) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := h.bus.JetStream().OrderedConsumer(ctx, h.bus.StreamName(stream), jetstream.OrderedConsumerConfig{FilterSubjects: []string{h.bus.Prefix(filter)}})
	require.NoError(t, err)
	info, err := c.Info(ctx)
	require.NoError(t, err)
	var out []jetstream.Msg
	for range info.NumPending {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		require.NoError(t, err)
		out = append(out, m)
	}
	return out
}

// genSession writes n rounds of a session whose context grows by a random
// step each round, with tool calls, tool results and the odd round without usage.
func genSession(r *rand.Rand, id string, n int, step int64) []turn.Event {
	evs := make([]turn.Event, 0, n)
	input := int64(8_000)
	for seq := 1; seq <= n; seq++ {
		toolID := fmt.Sprintf("%s-tool-%d", id, seq)
		var inputs []turn.Message
		if seq == 1 {
			inputs = append(inputs, turn.Message{UUID: fmt.Sprintf("%s-u%d", id, seq), Role: "user", Content: turn.Content{{Type: "text", Text: "please fix the failing build"}}})
		} else {
			result := turn.Content{{Type: "text", Text: strings.Repeat("log line ", 50+r.IntN(400))}}
			inputs = append(inputs, turn.Message{UUID: fmt.Sprintf("%s-u%d", id, seq), Role: "user", Content: turn.Content{
				{Type: "tool_result", ToolUseID: fmt.Sprintf("%s-tool-%d", id, seq-1), Content: &result},
			}})
		}
		resp := &turn.Message{UUID: fmt.Sprintf("%s-a%d", id, seq), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
			{Type: "text", Text: "running the next step"},
			{Type: "tool_use", ID: toolID, Name: "Bash", Input: json.RawMessage(`{"command":"make test"}`)},
		}}
		ev := turn.Event{
			Schema: turn.SchemaV1, EventID: fmt.Sprintf("ev-%s-%d", id, seq), TenantID: tenant, SessionID: id, Seq: int64(seq),
			Model: "claude-sonnet-4-5", ContextWindow: 200_000, MaxOutputTokens: 32_000,
			InputMessages: inputs, Response: resp, OccurredAt: time.Date(2026, 11, 22, 10, 0, seq, 0, time.UTC),
		}
		if seq%7 != 0 { // every seventh round arrives without usage: estimated instead
			input += step/2 + r.Int64N(step)
			ev.Usage = &turn.Usage{InputTokens: 3, CacheCreationInputTokens: 500, CacheReadInputTokens: input, OutputTokens: 1 + r.Int64N(400)}
		}
		evs = append(evs, ev)
	}
	return evs
}

// reference applies a session's events in order in memory: the count rule,
// and auto-compaction requested once per crossing while none is in flight.
type reference struct {
	count    int64
	state    tokens.State
	compacts int
}

func referenceOf(cfg tokens.Config, evs []turn.Event) reference {
	var tally tokens.Tally
	var ref reference
	inFlight := false
	for _, ev := range evs {
		l := cfg.Limits(ev.Model, ev.ContextWindow, ev.MaxOutputTokens)
		for _, m := range ev.InputMessages {
			tally.Add(tokens.EstimateMessage(m))
		}
		if ev.Usage != nil {
			tally.SetResponse(*ev.Usage, ev.Response.Content)
		} else {
			tally.Add(tokens.EstimateMessage(*ev.Response))
		}
		ref.count = tally.Count()
		ref.state = l.State(ref.count)
		if l.AboveAutoCompact(ref.count) && !inFlight {
			inFlight = true
			ref.compacts++
		}
	}
	return ref
}

// patient waits as long as a test may run for a missing seq: tests that
// shuffle a large backlog are not about the gap timeout, and on a busy
// machine an event may wait behind the backlog longer than the default.
func patient(c *tokenaccounting.Config) { c.GapTimeout = 10 * time.Minute }

func TestShuffledDuplicatedDeliveryMatchesInOrderReference(t *testing.T) {
	t.Parallel()
	h := setup(t, patient)
	r := rand.New(rand.NewPCG(7, 11))

	const sessions, rounds = 50, 20
	want := map[string]int64{}
	refs := map[string]reference{}
	var all []turn.Event
	for i := range sessions {
		id := fmt.Sprintf("s%02d", i)
		step := int64(2_000 + 800*i) // later sessions grow fast enough to cross 167,000
		evs := genSession(r, id, rounds, step)
		refs[id] = referenceOf(tenantcfg.Defaults().Tokens, evs)
		want[id] = rounds
		all = append(all, evs...)
	}
	crossing := 0
	for _, ref := range refs {
		crossing += ref.compacts
	}
	require.Greater(t, crossing, 5, "the generated sessions must exercise threshold crossings")
	require.Less(t, crossing, sessions, "and some sessions must stay below the threshold")

	// 10% duplicates: half redelivered under their own id (the stream drops
	// them), half under a new id (the accountant must see through them).
	type delivery struct {
		ev    turn.Event
		msgID string
	}
	var deliveries []delivery
	for _, ev := range all {
		deliveries = append(deliveries, delivery{ev, ev.EventID})
	}
	for i, ev := range all {
		if i%10 == 0 {
			id := ev.EventID
			if i%20 == 0 {
				id += "-redelivered"
			}
			deliveries = append(deliveries, delivery{ev, id})
		}
	}
	r.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })
	for _, d := range deliveries {
		h.publish(t, d.ev, d.msgID)
	}

	h.waitApplied(t, want)
	h.waitOutboxEmpty(t)
	ctx := context.Background()
	for id, ref := range refs {
		s, err := h.store.GetSession(ctx, tenant, id)
		require.NoError(t, err)
		require.Equal(t, ref.count, s.TokenCount, "session %s count", id)
		require.Equal(t, string(ref.state), s.State, "session %s state", id)
		require.EqualValues(t, 2*rounds, s.MessageCount, "session %s: each message stored once", id)
	}
	var dupRows int
	require.NoError(t, pgtest.Admin(t, h.store).QueryRow(ctx,
		"SELECT count(*) FROM (SELECT session_id, uuid FROM messages GROUP BY 1, 2 HAVING count(*) > 1) d").Scan(&dupRows))
	require.Zero(t, dupRows, "no duplicate message rows")

	// Each message carries the running total of the session's message sizes
	// (what sizing a context reads): every step is the message's own size,
	// counted once, and the session holds the last total.
	var badSteps, badTotals int
	require.NoError(t, pgtest.Admin(t, h.store).QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE step <> greatest(4 * estimate_tokens, step) OR step < octet_length(content::text) / 2)
		FROM (SELECT estimate_tokens, content,
		             bytes_through - lag(bytes_through, 1, 0::bigint) OVER (PARTITION BY session_id ORDER BY position) AS step
		      FROM messages) m`).Scan(&badSteps))
	require.Zero(t, badSteps, "each message's bytes_through steps by its own size")
	require.NoError(t, pgtest.Admin(t, h.store).QueryRow(ctx, `
		SELECT count(*) FROM sessions s
		WHERE s.message_bytes <> (SELECT coalesce(max(bytes_through), 0) FROM messages m
		                          WHERE m.tenant_id = s.tenant_id AND m.session_id = s.session_id)
		   OR s.message_bytes = 0`).Scan(&badTotals))
	require.Zero(t, badTotals, "each session's message_bytes is its last message's bytes_through")

	compacts := map[string]int{}
	for _, m := range h.collect(t, bus.StreamEvents, "compact.requested.>") {
		_, _, session, err := h.bus.ParseSubject(m.Subject())
		require.NoError(t, err)
		compacts[session]++
	}
	for id, ref := range refs {
		require.Equal(t, ref.compacts, compacts[id], "session %s: compact.requested per threshold crossing", id)
	}
	accounted := h.collect(t, bus.StreamEvents, "turn.accounted.>")
	require.Len(t, accounted, sessions*rounds, "one turn.accounted per applied event")
}

func TestGapTimeoutMovesPastMissingSeq(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *tokenaccounting.Config) { c.GapTimeout = 300 * time.Millisecond })
	evs := genSession(rand.New(rand.NewPCG(1, 2)), "gappy", 4, 1000)
	for _, ev := range []turn.Event{evs[0], evs[2], evs[3]} { // seq 2 never arrives
		h.publish(t, ev, ev.EventID)
	}
	h.waitApplied(t, map[string]int64{"gappy": 4})
	s, err := h.store.GetSession(context.Background(), tenant, "gappy")
	require.NoError(t, err)
	require.EqualValues(t, 6, s.MessageCount, "seq 1, 3 and 4 applied")
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.turns.gap_skipped", "", ""))

	// Seq 2 turns up after all: refused as late, the session untouched.
	h.publish(t, evs[1], evs[1].EventID)
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.turns.rejected", "reason", string(turn.ReasonLate)) == 1
	}, 10*time.Second, 20*time.Millisecond)
	after, err := h.store.GetSession(context.Background(), tenant, "gappy")
	require.NoError(t, err)
	require.Equal(t, s.TokenCount, after.TokenCount)
	require.Equal(t, s.MessageCount, after.MessageCount)
}

// TestATurnThatWaitedIsCountedAppliedWhenApplied: a turn kept waiting for
// its predecessor counts once as waiting, when it arrives, and once as
// applied, when the predecessor lets it apply, whether that is the
// predecessor's transaction or the gap sweep's: applied counts every turn
// applied, once.
func TestATurnThatWaitedIsCountedAppliedWhenApplied(t *testing.T) {
	t.Parallel()
	outcome := func(h *harness, o tokenaccounting.Outcome) func() int64 {
		return func() int64 { return h.metrics.Sum("mnemos.turns.accounted", "outcome", string(o)) }
	}
	await := func(t *testing.T, got func() int64, want int64) {
		t.Helper()
		require.Eventually(t, func() bool { return got() == want }, 10*time.Second, 10*time.Millisecond)
	}

	// Seq 2 first: it waits; seq 1 applies, and seq 2 with it.
	h := setup(t, patient)
	evs := genSession(rand.New(rand.NewPCG(5, 6)), "late-first", 2, 1000)
	h.publish(t, evs[1], evs[1].EventID)
	await(t, outcome(h, tokenaccounting.OutcomeWaiting), 1)
	h.publish(t, evs[0], evs[0].EventID)
	h.waitApplied(t, map[string]int64{"late-first": 2})
	await(t, outcome(h, tokenaccounting.OutcomeApplied), 2)

	// Seq 2 never comes: the gap sweep applies seq 3 and 4, which waited.
	// The gap timeout leaves room for both to arrive on a loaded machine
	// before the sweep gives up on seq 2: one that came after it would
	// apply without waiting.
	h = setup(t, func(c *tokenaccounting.Config) { c.GapTimeout = 3 * time.Second })
	evs = genSession(rand.New(rand.NewPCG(7, 8)), "swept", 4, 1000)
	h.publish(t, evs[0], evs[0].EventID)
	await(t, outcome(h, tokenaccounting.OutcomeApplied), 1)
	h.publish(t, evs[2], evs[2].EventID)
	h.publish(t, evs[3], evs[3].EventID)
	await(t, outcome(h, tokenaccounting.OutcomeWaiting), 2)
	h.waitApplied(t, map[string]int64{"swept": 4})
	await(t, outcome(h, tokenaccounting.OutcomeApplied), 3)
	require.Equal(t, int64(2), outcome(h, tokenaccounting.OutcomeWaiting)())
}

func TestFarFutureSeqCostsOneRow(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *tokenaccounting.Config) { c.GapTimeout = 200 * time.Millisecond })
	evs := genSession(rand.New(rand.NewPCG(3, 4)), "far", 1, 1000)
	ev := evs[0]
	ev.Seq, ev.EventID = 1_000_000_000, "far-future"
	h.publish(t, ev, ev.EventID)
	h.waitApplied(t, map[string]int64{"far": 1_000_000_000})
	var rows int
	require.NoError(t, pgtest.Admin(t, h.store).QueryRow(context.Background(), "SELECT count(*) FROM turns WHERE session_id = 'far'").Scan(&rows))
	require.Equal(t, 1, rows, "giving up on a gap stores nothing per missing seq")
}

func TestOffloadsLargeToolResultsOnceAndForever(t *testing.T) {
	t.Parallel()
	h := setup(t)
	big := strings.Repeat("0123456789", 6_000) // 60,000 characters
	result := turn.Content{{Type: "text", Text: big}}
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: "big-1", TenantID: tenant, SessionID: "big", Seq: 1, OccurredAt: time.Now().UTC(),
		InputMessages: []turn.Message{{UUID: "u1", Role: "user", Content: turn.Content{{Type: "tool_result", ToolUseID: "t1", Content: &result}}}},
		Response:      &turn.Message{UUID: "a1", Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: "text", Text: "done"}}},
	}
	h.publish(t, ev, ev.EventID)
	h.waitApplied(t, map[string]int64{"big": 1})

	ctx := context.Background()
	var msgs []store.Message
	var repl []store.Replacement
	require.NoError(t, h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		if msgs, err = tx.Messages(ctx, "big"); err != nil {
			return err
		}
		repl, err = tx.Replacements(ctx, "big")
		return err
	}))
	require.Len(t, repl, 1)
	require.Contains(t, string(msgs[0].Content), "<persisted-output>")
	require.Contains(t, string(msgs[0].Content), repl[0].ToolResultID)
	require.Less(t, len(msgs[0].Content), 3_000, "only the preview stays in context")
	var whole store.ToolResult
	require.NoError(t, h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		whole, err = tx.ToolResult(ctx, repl[0].ToolResultID)
		return err
	}))
	require.Equal(t, big, whole.Content)
	require.EqualValues(t, 1, whole.SizeChars/60_000)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *tokenaccounting.Config) { c.MaxEventBytes = 64 << 10 })
	good := func(seq int64) turn.Event {
		return turn.Event{
			Schema: turn.SchemaV1, EventID: fmt.Sprintf("bad-%d", seq), TenantID: tenant, SessionID: "victim", Seq: seq,
			OccurredAt:    time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
			InputMessages: []turn.Message{{UUID: fmt.Sprintf("u%d", seq), Role: "user", Content: turn.Content{{Type: "text", Text: "hello"}}}},
			Response:      &turn.Message{UUID: fmt.Sprintf("a%d", seq), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: "text", Text: "hi"}}},
			Usage:         &turn.Usage{InputTokens: 10, OutputTokens: 5},
		}
	}
	enc := func(ev turn.Event) []byte {
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		return b
	}
	h.publish(t, good(1), "bad-1")
	h.waitApplied(t, map[string]int64{"victim": 1})

	conflict := good(2)
	conflict.InputMessages[0].UUID = "u1" // u1 was stored with other content
	conflict.InputMessages[0].Content = turn.Content{{Type: "text", Text: "something else"}}
	negative := good(3)
	negative.Usage.OutputTokens = -5
	otherTenant := good(3)
	otherTenant.TenantID = "intruder"
	huge := good(3)
	huge.InputMessages[0].Content = turn.Content{{Type: "text", Text: strings.Repeat("x", 100<<10)}}
	cases := []struct {
		name   string
		data   []byte
		reason turn.Reason
	}{
		{"bad json", []byte(`{"schema": "mnemos.turn.v1", "event_id": `), turn.ReasonBadJSON},
		{"unknown schema", []byte(`{"schema": "mnemos.turn.v9", "event_id": "x"}`), turn.ReasonUnknownSchema},
		{"tenant mismatch", enc(otherTenant), turn.ReasonTenantMismatch},
		{"negative usage", enc(negative), turn.ReasonNegativeUsage},
		{"oversized", enc(huge), turn.ReasonTooLarge},
		{"invalid utf-8", append([]byte(`{"schema": "mnemos.turn.v1", "note": "`), 0xff, '"', '}'), turn.ReasonInvalidUTF8},
		{"duplicate uuid with different content", enc(conflict), turn.ReasonDuplicateUUID},
		{"duplicate key", bytes.Replace(enc(good(3)), []byte(`"seq":3`), []byte(`"seq":3,"seq":4`), 1), turn.ReasonDuplicateKey},
	}
	for i, c := range cases {
		h.publishRaw(t, tenant, "victim", c.data, fmt.Sprintf("bad-case-%d", i))
	}
	// The later good events of the same session still apply.
	next := good(3) // seq 2 went to the rejected conflicting event
	next.EventID = "good-3"
	h.publish(t, next, "good-3")
	h.waitApplied(t, map[string]int64{"victim": 3})
	h.waitOutboxEmpty(t)

	s, err := h.store.GetSession(context.Background(), tenant, "victim")
	require.NoError(t, err)
	require.EqualValues(t, 1, s.RejectedTurns)
	require.EqualValues(t, 4, s.MessageCount, "seq 1 and 3 stored, the rejected seq 2 left nothing")
	require.EqualValues(t, 10+5, s.TokenCount)

	letters := h.collect(t, bus.StreamDeadLetter, "deadletter.>")
	reasons := map[string]bool{}
	for _, m := range letters {
		reasons[m.Headers().Get(bus.HeaderDeadLetterReason)] = true
	}
	for _, c := range cases {
		found := false
		for r := range reasons {
			found = found || strings.HasPrefix(r, string(c.reason)+":")
		}
		require.True(t, found, "%s: a dead letter with reason %s; got %v", c.name, c.reason, reasons)
		require.EqualValues(t, 1, h.metrics.Sum("mnemos.turns.rejected", "reason", string(c.reason)), "%s: counted once", c.name)
	}
	// Every refused event but the one rejected while applying (dead-lettered
	// through the outbox) ends in the runner's dead letters.
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.bus.deliveries", "result", "dead_lettered") == int64(len(cases)-1)
	}, 10*time.Second, 20*time.Millisecond)
}

func TestTenantSettingsOverrideThresholds(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	// Half the effective window: 200,000 − 20,000 reserve = 180,000 → 90,000.
	require.NoError(t, h.store.SetTenantSettings(ctx, tenant, []byte(`{"tokens": {"auto_compact_percent": 50}}`)))
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: "pct-1", TenantID: tenant, SessionID: "pct", Seq: 1, OccurredAt: time.Now().UTC(),
		Model:         "claude-sonnet-4-5",
		InputMessages: []turn.Message{{UUID: "u1", Role: "user", Content: turn.Content{{Type: "text", Text: "go on"}}}},
		Response:      &turn.Message{UUID: "a1", Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: "text", Text: "ok"}}},
		Usage:         &turn.Usage{InputTokens: 1, CacheReadInputTokens: 95_000, OutputTokens: 10},
	}
	h.publish(t, ev, ev.EventID)
	h.waitApplied(t, map[string]int64{"pct": 1})
	h.waitOutboxEmpty(t)
	s, err := h.store.GetSession(ctx, tenant, "pct")
	require.NoError(t, err)
	require.Equal(t, "autocompact", s.State, "95,011 tokens is past this tenant's 90,000 threshold")
	require.Len(t, h.collect(t, bus.StreamEvents, "compact.requested.>"), 1)
}

func TestPostgresBackendsKilledUnderLoadLoseNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, patient)
	ctx := context.Background()
	var db string
	require.NoError(t, h.store.Pool().QueryRow(ctx, "SELECT current_database()").Scan(&db))

	r := rand.New(rand.NewPCG(5, 6))
	want := map[string]int64{}
	refs := map[string]reference{}
	var all []turn.Event
	for i := range 10 {
		id := fmt.Sprintf("k%d", i)
		evs := genSession(r, id, 15, 3_000)
		refs[id], want[id] = referenceOf(tenantcfg.Defaults().Tokens, evs), 15
		all = append(all, evs...)
	}
	// Terminate every connection of the test database, again and again,
	// while the events arrive: the pool reconnects and the work resumes.
	stop := make(chan struct{})
	killed := make(chan int)
	go func() {
		n := 0
		defer func() { killed <- n }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(40 * time.Millisecond):
			}
			var k int
			_ = h.store.Pool().QueryRow(ctx,
				"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", db).Scan(&k)
			n += k
		}
	}()
	for _, ev := range all {
		h.publish(t, ev, ev.EventID)
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	require.Positive(t, <-killed, "the test must actually have killed connections")

	h.waitApplied(t, want)
	for id, ref := range refs {
		s, err := h.store.GetSession(ctx, tenant, id)
		require.NoError(t, err)
		require.Equal(t, ref.count, s.TokenCount, id)
		require.EqualValues(t, 30, s.MessageCount, "%s: nothing applied twice", id)
	}
	require.Zero(t, h.metrics.Sum("mnemos.bus.deliveries", "result", "dead_lettered"), "an outage dead-letters nothing")
}

// TestAHeavyEventIsAppliedPacedAndWhole: an event of at least HeavyBytes
// is applied with its messages inserted a page at a time, resting between
// pages; it still lands whole, in order, in one transaction, and its
// redelivery changes nothing.
func TestAHeavyEventIsAppliedPacedAndWhole(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *tokenaccounting.Config) {
		c.HeavyBytes = 16 << 10
		c.HeavyWork, c.HeavyRest = time.Millisecond, time.Millisecond
	})
	const n = 1_001 // five pages and a last one that is not full
	inputs := make([]turn.Message, n-1)
	for i := range inputs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		inputs[i] = turn.Message{UUID: fmt.Sprintf("heavy-m%04d", i), Role: role, Content: turn.Content{{Type: "text", Text: fmt.Sprintf("message %d of a long pasted history", i)}}}
	}
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: "ev-heavy-1", TenantID: tenant, SessionID: "heavy", Seq: 1,
		Model: "claude-sonnet-4-5", ContextWindow: 200_000, MaxOutputTokens: 32_000,
		InputMessages: inputs, Response: &turn.Message{UUID: "heavy-r", Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: "text", Text: "read it all"}}},
		Usage:      &turn.Usage{InputTokens: 9_000, OutputTokens: 4},
		OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
	}
	data, err := json.Marshal(ev)
	require.NoError(t, err)
	require.Greater(t, len(data), 16<<10, "the event is heavy")
	h.publish(t, ev, ev.EventID)
	h.publish(t, ev, ev.EventID+"-again") // a redelivery under another id
	h.waitApplied(t, map[string]int64{"heavy": 1})
	h.waitOutboxEmpty(t)

	ctx := context.Background()
	s, err := h.store.GetSession(ctx, tenant, "heavy")
	require.NoError(t, err)
	require.EqualValues(t, n, s.MessageCount)
	var rows, firstPos, lastPos int64
	var lastUUID string
	require.NoError(t, pgtest.Admin(t, h.store).QueryRow(ctx,
		`SELECT count(*), min(position), max(position), (SELECT uuid FROM messages WHERE session_id = 'heavy' ORDER BY position DESC LIMIT 1)
		 FROM messages WHERE session_id = 'heavy'`).Scan(&rows, &firstPos, &lastPos, &lastUUID))
	require.EqualValues(t, n, rows, "every message stored once")
	require.Zero(t, firstPos)
	require.EqualValues(t, n-1, lastPos, "positions without a gap")
	require.Equal(t, "heavy-r", lastUUID, "the response last")
	var total int64
	require.NoError(t, pgtest.Admin(t, h.store).QueryRow(ctx,
		`SELECT max(bytes_through) FROM messages WHERE session_id = 'heavy'`).Scan(&total))
	require.Equal(t, s.MessageBytes, total, "the session's size is its last message's running total")
	require.Len(t, h.collect(t, bus.StreamEvents, "turn.accounted.>"), 1, "one turn.accounted")
}
