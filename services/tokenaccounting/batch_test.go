package tokenaccounting

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// batchEvent is a turn of session sid: a user message (uuid u, text) and an
// answer calling a tool when tool is set, or the tool's result (output)
// when result is.
func batchEvent(sid string, seq int64, u, text string) turn.Event {
	return turn.Event{
		Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", sid, seq), SessionID: sid, Seq: seq, Model: "claude-sonnet-4-5",
		InputMessages: []turn.Message{{UUID: u, Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}}},
		Response: &turn.Message{UUID: fmt.Sprintf("%s-a%d", sid, seq), Role: "assistant", StopReason: "tool_use", Content: turn.Content{
			{Type: turn.BlockToolUse, ID: fmt.Sprintf("%s-t%d", sid, seq), Name: "Bash", Input: []byte(`{"command":"make"}`)},
		}},
		Usage:      &turn.Usage{InputTokens: 1000 * seq, OutputTokens: 20},
		OccurredAt: time.Date(2026, 11, 28, 9, 0, int(seq), 0, time.UTC),
	}
}

func withResult(ev turn.Event, toolUseID, output string) turn.Event {
	c := turn.Content{{Type: turn.BlockText, Text: output}}
	ev.InputMessages = append(ev.InputMessages, turn.Message{UUID: ev.EventID + "-r", Role: "user",
		Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: toolUseID, Content: &c}}})
	return ev
}

// TestABatchEndsWhereOneByOneEnds applies the same turns, a mix of every
// case the accountant tells apart, to two tenants: one event at a time,
// and in batches as the group commit makes them (what a batch leaves out
// applied on its own afterwards, as its handler does). Every session, message,
// turn and outbox row ends the same, and the plain turns did go in batches.
func TestABatchEndsWhereOneByOneEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.New(t)
	settings := `{"limits": {"turn_messages": 3}, "offload": {"threshold_chars": 2000, "preview_bytes": 200, "turn_cap_chars": 1000000}}`
	for _, id := range []string{"one", "batched"} {
		require.NoError(t, st.EnsureTenant(ctx, id, id))
		require.NoError(t, st.SetTenantSettings(ctx, id, []byte(settings)))
	}
	defaults := tenantcfg.Defaults()
	defaults.Limits = limits.Config{}
	cache, err := tenantcfg.NewCache(defaults, st.TenantSettings, time.Minute)
	require.NoError(t, err)
	svc, err := New(DefaultConfig(), st, nil, cache, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)

	big := strings.Repeat("FAIL pkg/store TestSomething: want 3, got 4\n", 100) // offloaded: over 2,000 characters
	plain := func(sid string, seq int64) turn.Event {
		return batchEvent(sid, seq, fmt.Sprintf("%s-u%d", sid, seq), fmt.Sprintf("step %d of %s", seq, sid))
	}
	resend := plain("a", 2)
	resend.InputMessages = append([]turn.Message{plain("a", 1).InputMessages[0]}, resend.InputMessages...) // a's first message again, unchanged
	changed := plain("e", 2)
	changed.InputMessages[0].UUID = "e-u1" // e's first message again, with other content
	tooMany := plain("c", 1)
	for i := range 3 {
		tooMany.InputMessages = append(tooMany.InputMessages, turn.Message{UUID: fmt.Sprintf("c-x%d", i), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "more"}}})
	}
	offloaded := withResult(plain("f", 2), "f-t1", big)
	resentResult := plain("f", 3)
	resentResult.InputMessages = append([]turn.Message{offloaded.InputMessages[1]}, resentResult.InputMessages...)
	otherModel := plain("g", 2)
	otherModel.Model = "claude-opus-4-1"

	first := []turn.Event{
		plain("a", 1), resend, plain("a", 3), // in order, one resending a stored message
		plain("b", 1), plain("b", 3), // a gap: 3 waits
		tooMany, plain("c", 2), // refused, then the session goes on
		plain("d", 1), plain("d", 1), // the same event twice
		plain("e", 1), changed, // a stored uuid with other content: refused
		plain("f", 1), offloaded, resentResult, // a result offloaded, then sent again
		plain("g", 1), otherModel, // the model changes
	}
	second := []turn.Event{plain("b", 2), plain("a", 4), plain("d", 2), plain("a", 3)} // the gap closes; a duplicate of an applied turn
	for _, ev := range append(append([]turn.Event{}, first...), second...) {
		ev.TenantID = "one"
		require.NoError(t, ignoreRefusal(svc.Apply(ctx, ev)), ev.EventID)
	}
	batchedOf := func(evs []turn.Event) (alone []turn.Event) {
		for _, ev := range applyAsBatch(t, svc, "batched", evs) {
			alone = append(alone, ev)
			require.NoError(t, ignoreRefusal(svc.apply(ctx, ev, 1000, nil)), ev.EventID)
		}
		return alone
	}
	// The batch holds every session of its events (each has its first turn
	// in the first batch), so it decides every event itself: the resent
	// message, the wait behind b's gap, c's refusal, d's duplicate, e's
	// changed uuid, f's offload and g's new model; then the gap closing, b-3
	// applied behind b-2, and a duplicate of a turn the session applied.
	require.Empty(t, batchedOf(first), "events of sessions the batch holds are decided in it")
	require.Empty(t, batchedOf(second), "events of sessions the batch holds are decided in it")

	for _, sid := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		want, got := sessionState(t, st, "one", sid), sessionState(t, st, "batched", sid)
		want = bytes.ReplaceAll(want, []byte(toolResultID("one", sid, "f-t1")), []byte(toolResultID("batched", sid, "f-t1")))
		require.Equal(t, string(want), string(got), "session %s", sid)
	}
	admin := pgtest.Admin(t, st)
	outbox := func(tenant string) []string {
		rows, err := admin.Query(ctx, "SELECT replace(subject, $1, 'T') || ' ' || msg_id FROM outbox WHERE tenant_id = $2 ORDER BY 1", "."+tenant+".", tenant)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	require.Equal(t, outbox("one"), outbox("batched"))
	require.NotEmpty(t, outbox("one"))
}

// ignoreRefusal is err unless it refuses the event (the dead letter's case).
func ignoreRefusal(err error) error {
	if _, ok := turn.AsInputError(err); ok {
		return nil
	}
	return err
}

// sessionState prints what a session holds: its row's accounting, its
// messages, its turns and its tool results, without times.
func sessionState(t *testing.T, st *store.Store, tenant, sid string) []byte {
	t.Helper()
	ctx := context.Background()
	var b bytes.Buffer
	s, err := st.GetSession(ctx, tenant, sid)
	require.NoError(t, err)
	s.TenantID, s.CreatedAt, s.UpdatedAt = "", time.Time{}, time.Time{}
	fmt.Fprintf(&b, "%+v\n", s)
	require.NoError(t, st.InTx(ctx, tenant, func(tx *store.Tx) error {
		msgs, err := tx.Messages(ctx, sid)
		if err != nil {
			return err
		}
		for _, m := range msgs {
			content := m.Content
			m.CreatedAt, m.Content = time.Time{}, nil
			fmt.Fprintf(&b, "message %+v %s\n", m, content)
		}
		for seq := int64(1); seq <= s.AppliedSeq; seq++ {
			tr, err := tx.TurnBySeq(ctx, sid, seq)
			if err != nil {
				return fmt.Errorf("turn %d: %w", seq, err)
			}
			fmt.Fprintf(&b, "turn %d %s %s %q %d %s\n", tr.Seq, tr.EventID, tr.Status, tr.Reason, tr.TokenCount, tr.State)
		}
		return nil
	}))
	return b.Bytes()
}

// TestABatchCreatesOnlySessionsItApplies: a batch creates a new session
// only for the session's first turn, and keeps none it applies nothing to;
// a turn it leaves out is decided on its own, as if it had come alone.
func TestABatchCreatesOnlySessionsItApplies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, svc := acmeAccountant(t)

	batch := func(evs ...turn.Event) (alone []string) {
		for _, ev := range applyAsBatch(t, svc, "acme", evs) {
			alone = append(alone, ev.EventID)
		}
		return alone
	}
	exists := func(id string) bool {
		_, err := st.GetSession(ctx, "acme", id)
		if errors.Is(err, store.ErrNotFound) {
			return false
		}
		require.NoError(t, err)
		return true
	}

	// A new session's first turn goes in; another new session's twelfth
	// turn does not, and leaves no session behind.
	require.Equal(t, []string{"late-12"}, batch(batchEvent("fresh", 1, "fresh-u1", "hello"), batchEvent("late", 12, "late-u12", "hi")))
	require.True(t, exists("fresh"))
	require.False(t, exists("late"), "a session is not created for a turn the batch leaves out")

	// A batch that applies nothing keeps nothing.
	require.ElementsMatch(t, []string{"x-3", "y-5"}, batch(batchEvent("x", 3, "x-u3", "a"), batchEvent("y", 5, "y-u5", "b")))
	require.False(t, exists("x"))
	require.False(t, exists("y"))
}

// acmeAccountant is an accountant without a bus on a store of its own
// holding the tenant acme, with the default settings.
func acmeAccountant(t *testing.T) (*store.Store, *Service) {
	t.Helper()
	st := pgtest.New(t)
	require.NoError(t, st.EnsureTenant(context.Background(), "acme", "Acme"))
	cache, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Minute)
	require.NoError(t, err)
	svc, err := New(DefaultConfig(), st, nil, cache, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	return st, svc
}

// applyAsBatch applies evs as one of tenant's batches, as the group commit
// does, and returns those it left to be applied on their own.
func applyAsBatch(t *testing.T, svc *Service, tenant string, evs []turn.Event) (alone []turn.Event) {
	t.Helper()
	qs := make([]*queued, len(evs))
	for i, ev := range evs {
		ev.TenantID = tenant
		qs[i] = &queued{ctx: context.Background(), ev: ev, size: 1000, at: time.Now(), done: make(chan error, 1)}
	}
	svc.applyBatch(laneKey{tenant: tenant}, qs, false)
	for _, q := range qs {
		if err := <-q.done; err != nil {
			require.ErrorIs(t, err, errAlone)
			alone = append(alone, q.ev)
		}
	}
	return alone
}

// TestAnEventAheadOfItsSessionWaitsForTheNextBatch: a session's seq 2 that
// reaches its tenant's batch before seq 1 is held back for the next batch,
// where seq 1 has come, and both go in batches; one whose predecessor never
// comes is kept waiting by the batch after batchTries batches.
func TestAnEventAheadOfItsSessionWaitsForTheNextBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, svc := acmeAccountant(t)
	acme := laneKey{tenant: "acme"}

	enqueue := func(ev turn.Event) *queued {
		ev.TenantID = "acme"
		q := &queued{ctx: ctx, ev: ev, size: 1000, at: time.Now(), done: make(chan error, 1)}
		svc.batches.mu.Lock()
		if svc.batches.waiting == nil {
			svc.batches.waiting = map[laneKey][]*queued{}
		}
		svc.batches.waiting[acme] = append(svc.batches.waiting[acme], q)
		svc.batches.mu.Unlock()
		return q
	}
	// One batch, as the drain takes it, then what it left waiting.
	oneBatch := func() []*queued {
		svc.batches.mu.Lock()
		batch := svc.batches.waiting[acme]
		svc.batches.waiting[acme] = nil
		svc.batches.mu.Unlock()
		svc.applyBatch(acme, batch, true)
		svc.batches.mu.Lock()
		defer svc.batches.mu.Unlock()
		return svc.batches.waiting[acme]
	}
	answered := func(q *queued) (error, bool) {
		select {
		case err := <-q.done:
			return err, true
		default:
			return nil, false
		}
	}

	second := enqueue(batchEvent("s", 2, "s-u2", "then this"))
	require.Equal(t, []*queued{second}, oneBatch(), "seq 2 waits for the next batch")
	_, ok := answered(second)
	require.False(t, ok, "a held-back event is not answered")
	require.Equal(t, 1, second.tries)

	first := enqueue(batchEvent("s", 1, "s-u1", "first this"))
	require.Empty(t, oneBatch())
	for _, q := range []*queued{first, second} {
		err, ok := answered(q)
		require.True(t, ok)
		require.NoError(t, err, "seq %d applied in the batch", q.ev.Seq)
	}
	sess, err := st.GetSession(ctx, "acme", "s")
	require.NoError(t, err)
	require.Equal(t, int64(2), sess.AppliedSeq)

	// Seq 5 of a session at 2: its predecessors never come.
	lone := enqueue(batchEvent("s", 5, "s-u5", "too far"))
	for range batchTries - 1 {
		require.Equal(t, []*queued{lone}, oneBatch())
	}
	require.Empty(t, oneBatch())
	err, ok = answered(lone)
	require.True(t, ok)
	require.NoError(t, err, "after %d batches the batch decides it as it stands", batchTries)
	sess, err = st.GetSession(ctx, "acme", "s")
	require.NoError(t, err)
	require.Equal(t, int64(2), sess.AppliedSeq)
	require.Equal(t, int64(1), sess.WaitingTurns, "seq 5 waits for its predecessors")
}

// TestASessionKeepsItsLane: a session's events always go in the same lane
// of its tenant's batches, the sessions spread over all the lanes, and one
// lane holds them all when there is one.
func TestASessionKeepsItsLane(t *testing.T) {
	t.Parallel()
	const lanes = 3
	count := make([]int, lanes)
	for i := range 300 {
		id := fmt.Sprintf("session-%d", i)
		l := lane(id, lanes)
		require.Less(t, l, uint32(lanes))
		require.Equal(t, l, lane(id, lanes), "the same lane every time")
		require.Zero(t, lane(id, 1))
		require.Zero(t, lane(id, 0))
		count[l]++
	}
	for l, n := range count {
		require.Greater(t, n, 50, "lane %d of %d holds a fair share of 300 sessions", l, lanes)
	}
}
