package tokenaccounting_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// withInputs is limitedEvent with n input messages.
func withInputs(session string, seq int64, n int) turn.Event {
	ev := limitedEvent(tenant, session, seq)
	ev.InputMessages = nil
	for i := range n {
		ev.InputMessages = append(ev.InputMessages, turn.Message{UUID: fmt.Sprintf("%s-u%d-%d", session, seq, i), Role: "user", Content: turn.Content{{Type: "text", Text: "go on"}}})
	}
	return ev
}

func TestTurnsOverTheSessionBoundsAreRejectedAndTheSessionGoesOn(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.store.SetTenantSettings(ctx, tenant, []byte(
		`{"limits": {"turn_messages": 3, "turn_bytes": 4096, "session_messages": 6}}`)))

	large := withInputs("b", 3, 1)
	large.InputMessages[0].Content[0].Text = strings.Repeat("x", 5000)
	evs := []turn.Event{
		withInputs("b", 1, 1), // 2 messages
		withInputs("b", 2, 3), // 4 messages: over turn_messages
		large,                 // over turn_bytes
		withInputs("b", 4, 1), // 4 messages in the session
		withInputs("b", 5, 1), // 6
		withInputs("b", 6, 1), // 8: over session_messages
	}
	// Seq 6 arrives first and waits: the limits hold for a waiting event too.
	h.publish(t, evs[5], evs[5].EventID)
	for _, ev := range evs[:5] {
		h.publish(t, ev, ev.EventID)
	}
	h.waitApplied(t, map[string]int64{"b": 6})
	h.waitOutboxEmpty(t)

	s, err := h.store.GetSession(ctx, tenant, "b")
	require.NoError(t, err)
	require.EqualValues(t, 6, s.MessageCount, "seq 1, 4 and 5 stored")
	require.EqualValues(t, 3, s.RejectedTurns)

	reasons := h.deadLetterReasons(t, 3)
	for seq, reason := range map[int64]turn.Reason{2: turn.ReasonTooManyMessages, 3: turn.ReasonTooLarge, 6: turn.ReasonSessionFull} {
		id := evs[seq-1].EventID
		require.True(t, strings.HasPrefix(reasons[id], string(reason)+": "), "seq %d: %v", seq, reasons)
		require.EqualValues(t, 1, h.metrics.Sum("mnemos.turns.rejected", "reason", string(reason)))
	}
	require.Contains(t, reasons[evs[1].EventID], "turn_messages limit is 3")
	require.Contains(t, reasons[evs[2].EventID], "turn_bytes limit is 4096")
	require.Contains(t, reasons[evs[5].EventID], "session_messages limit of 6")
	for _, l := range []string{limits.LimitTurnMessages, limits.LimitEventBytes, limits.LimitSessionMessages} {
		require.EqualValues(t, 1, h.metrics.Sum("mnemos.limits.exceeded", "limit", l), l)
	}

	// A turn that adds nothing new (its messages re-sent) still fits.
	resent := withInputs("b", 7, 1)
	resent.InputMessages, resent.Response = evs[4].InputMessages, evs[4].Response
	h.publish(t, resent, resent.EventID)
	h.waitApplied(t, map[string]int64{"b": 7})
	s, err = h.store.GetSession(ctx, tenant, "b")
	require.NoError(t, err)
	require.EqualValues(t, 3, s.RejectedTurns)
	require.EqualValues(t, 6, s.MessageCount)
}

func TestSeqFarAheadIsRefusedAndLaterTurnsApply(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *tokenaccounting.Config) { c.GapTimeout = 200 * time.Millisecond })
	ctx := context.Background()
	require.NoError(t, h.store.SetTenantSettings(ctx, tenant, []byte(`{"limits": {"seq_window": 10}}`)))

	first := limitedEvent(tenant, "w", 1)
	h.publish(t, first, first.EventID)
	h.waitApplied(t, map[string]int64{"w": 1})
	far := limitedEvent(tenant, "w", 999_999_999_999)
	far.OccurredAt, far.Usage = first.OccurredAt, first.Usage
	h.publish(t, far, far.EventID)
	fresh := limitedEvent(tenant, "new", 12) // a new session starts at 0
	h.publish(t, fresh, fresh.EventID)
	reasons := h.deadLetterReasons(t, 2)
	require.True(t, strings.HasPrefix(reasons[far.EventID], string(turn.ReasonSeqTooFar)+": "), reasons)
	require.Contains(t, reasons[far.EventID], "seq_window of 10")
	require.True(t, strings.HasPrefix(reasons[fresh.EventID], string(turn.ReasonSeqTooFar)+": "), reasons)

	// Well past the gap timeout, the session has not moved, and its next
	// turns apply; the far seq's new session was never created.
	time.Sleep(time.Second)
	for seq := int64(2); seq <= 11; seq++ { // one at a time: the gap timeout is short
		ev := limitedEvent(tenant, "w", seq)
		h.publish(t, ev, ev.EventID)
		h.waitApplied(t, map[string]int64{"w": seq})
	}
	s, err := h.store.GetSession(ctx, tenant, "w")
	require.NoError(t, err)
	require.EqualValues(t, 11, s.AppliedSeq)
	require.Zero(t, s.RejectedTurns)
	require.EqualValues(t, 22, s.MessageCount)
	require.Zero(t, s.RejectedTurns)
	_, err = h.store.GetSession(ctx, tenant, "new")
	require.Error(t, err)
	require.EqualValues(t, 2, h.metrics.Sum("mnemos.turns.rejected", "reason", string(turn.ReasonSeqTooFar)))
	require.EqualValues(t, 2, h.metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitSeqWindow))
}

func TestGivenUpSeqsAreRecordedAndLateTurnsCounted(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *tokenaccounting.Config) { c.GapTimeout = 300 * time.Millisecond })
	ctx := context.Background()
	evs := make([]turn.Event, 6)
	for i := range evs {
		evs[i] = limitedEvent(tenant, "gap", int64(i+1))
	}
	for _, i := range []int{0, 4} { // seq 2, 3 and 4 are missing
		h.publish(t, evs[i], evs[i].EventID)
	}
	h.waitApplied(t, map[string]int64{"gap": 5})
	s, err := h.store.GetSession(ctx, tenant, "gap")
	require.NoError(t, err)
	require.EqualValues(t, 3, s.SkippedSeqs)
	require.EqualValues(t, 2, s.LastSkippedFrom)
	require.EqualValues(t, 4, s.LastSkippedTo)
	require.EqualValues(t, 3, h.metrics.Sum("mnemos.turns.gap_skipped", "", ""))

	// Seq 3 turns up: refused as late, counted on the session and
	// dead-lettered; a redelivery under another message id is the same
	// refusal, not a second one. The next turn applies.
	h.publish(t, evs[2], evs[2].EventID)
	h.publish(t, evs[2], evs[2].EventID+"-again")
	h.publish(t, evs[5], evs[5].EventID)
	h.waitApplied(t, map[string]int64{"gap": 6})
	reasons := h.deadLetterReasons(t, 1)
	require.True(t, strings.HasPrefix(reasons[evs[2].EventID], string(turn.ReasonLate)+": "), reasons)
	require.Eventually(t, func() bool {
		s, err = h.store.GetSession(ctx, tenant, "gap")
		return err == nil && s.RejectedTurns == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 6, s.MessageCount, "seq 1, 5 and 6; nothing of the late one")
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.turns.accounted", "outcome", "duplicate") == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.turns.rejected", "reason", string(turn.ReasonLate)))
	require.Len(t, h.collect(t, bus.StreamDeadLetter, "deadletter.>"), 1)
}

func TestRedeliveriesDoNotQueueOnABusySessionsLock(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	first := limitedEvent(tenant, "busy", 1)
	h.publish(t, first, first.EventID)
	h.waitApplied(t, map[string]int64{"busy": 1})
	var db string
	require.NoError(t, h.store.Pool().QueryRow(ctx, "SELECT current_database()").Scan(&db))

	// Another transaction holds the session's row, as a long apply would.
	admin := pgtest.Admin(t, h.store)
	holder, err := admin.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // committed below
	_, err = holder.Exec(ctx, "SELECT 1 FROM sessions WHERE tenant_id = $1 AND session_id = 'busy' FOR UPDATE", tenant)
	require.NoError(t, err)

	second := limitedEvent(tenant, "busy", 2)
	h.publish(t, second, second.EventID)
	h.publish(t, second, second.EventID+"-redelivered")
	other := limitedEvent(tenant, "other", 1)
	h.publish(t, other, other.EventID)
	h.waitApplied(t, map[string]int64{"other": 1})

	// While the lock is held no connection waits in its queue for long:
	// the busy session's events wait for it outside Postgres.
	time.Sleep(1500 * time.Millisecond)
	var queued int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = $1 AND wait_event_type = 'Lock' AND now() - query_start > interval '1 second'`, db).Scan(&queued))
	require.Zero(t, queued, "connections queued on the session's lock")
	s, err := h.store.GetSession(ctx, tenant, "busy")
	require.NoError(t, err)
	require.EqualValues(t, 1, s.AppliedSeq)

	require.NoError(t, holder.Commit(ctx))
	h.waitApplied(t, map[string]int64{"busy": 2})
	h.waitOutboxEmpty(t)
	s, err = h.store.GetSession(ctx, tenant, "busy")
	require.NoError(t, err)
	require.EqualValues(t, 4, s.MessageCount, "applied once")
	require.Zero(t, h.metrics.Sum("mnemos.bus.deliveries", "result", "dead_lettered"))
	require.Len(t, h.collect(t, bus.StreamEvents, "turn.accounted.>"), 3)
}

func TestTurnsWithAWindowWithoutRoomAreRejected(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	tiny := withInputs("tw", 1, 1)
	tiny.ContextWindow = 1000 // every threshold at or below zero: a compaction asked on every turn
	next := withInputs("tw", 2, 1)
	h.publish(t, tiny, tiny.EventID)
	h.publish(t, next, next.EventID)
	h.waitApplied(t, map[string]int64{"tw": 2})
	h.waitOutboxEmpty(t)

	reasons := h.deadLetterReasons(t, 1)
	require.True(t, strings.HasPrefix(reasons[tiny.EventID], string(turn.ReasonBadContextWindow)+": "), reasons)
	s, err := h.store.GetSession(ctx, tenant, "tw")
	require.NoError(t, err)
	require.EqualValues(t, 1, s.RejectedTurns)
	require.EqualValues(t, 2, s.MessageCount, "the next turn applied")
	require.Zero(t, s.CompactRequests, "no compaction asked for a window that cannot hold one")
}
