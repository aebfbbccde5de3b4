package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/faults"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// TestOutboxRelayDownPastTheDuplicateWindow: the relay publishes a batch and
// dies before deleting its rows, and stays down longer than the streams'
// duplicate window (shortened to 2 s here; no other relay runs meanwhile), so
// the batch is published a
// second time and the server no longer drops the copies. The consumers'
// idempotency absorbs them: every event takes effect once. The same holds
// for turn events a backend sends again after the window.
func TestOutboxRelayDownPastTheDuplicateWindow(t *testing.T) {
	t.Parallel()
	const window = 2 * time.Second
	s := newSystem(t, systemOptions{duplicateWindow: window})
	// The compactor starts later: its process relays the outbox too, and
	// would publish the crashed relay's rows within the window.
	acc := s.start("token-accounting", map[string]string{"MNEMOS_FAULT_CRASH_AFTER_PUBLISH": "outbox-relay:1"})

	// Each session starts above its auto-compact threshold (23,000 of a
	// 40,000-token window): its first event writes compact.requested to the
	// outbox, so the first batch holds compaction requests.
	ctx := context.Background()
	last := map[string]int64{}
	var all []turn.Event
	for i := range 4 {
		id := fmt.Sprintf("o%d", i)
		evs := session(id, 3, eventOptions{window: 40_000, maxOutput: 4_000, usage: true, firstInput: 30_000})
		all = append(all, evs...)
		last[id] = int64(len(evs))
	}
	for _, ev := range all {
		_, err := s.publish(ctx, ev)
		require.NoError(t, err)
	}
	require.Equal(t, faults.ExitCode, acc.WaitExit(t, settleTimeout), "the relay crashed after its first publish")
	require.Positive(t, s.count("SELECT count(*) FROM outbox"), "the published batch is still in the outbox")
	time.Sleep(2 * window) // down past the window: the server forgets the ids
	acc.RestartWith(t, map[string]string{"MNEMOS_FAULT_CRASH_AFTER_PUBLISH": ""})
	s.waitApplied(last)
	s.waitOutboxEmpty()

	// The compactor now finds each copy of a request on the stream, the two
	// often handled at once by two of its workers.
	s.start("compactor", nil)
	s.waitConsumerSettled(bus.StreamEvents, "compactor")
	s.waitOutboxEmpty()

	// The batch is on the bus twice…
	events := s.msgIDs(bus.StreamEvents, ">")
	twice := 0
	for _, n := range events {
		if n > 1 {
			twice++
		}
	}
	require.Positive(t, twice, "the relay published its first batch again, past the window")
	requests := s.msgIDs(bus.StreamEvents, bus.KindCompactRequested+".>")
	requested := 0
	for _, n := range requests {
		requested += n
	}
	require.Greater(t, requested, len(requests), "compaction requests among the copies")

	// …and took effect once: one compaction per request, one announcement each.
	require.Equal(t, int64(len(requests)), s.count("SELECT count(*) FROM compactions"))
	require.Zero(t, s.count("SELECT count(*) FROM compactions WHERE status NOT IN ('completed', 'skipped')"))
	for id, n := range s.msgIDs(bus.StreamEvents, bus.KindCompactCompleted+".>") {
		require.Equal(t, 1, n, "%s", id)
	}

	// A backend sending turn events again after the window: stored again,
	// applied once.
	for _, ev := range all[:3] {
		ack, err := s.publish(ctx, ev)
		require.NoError(t, err)
		require.False(t, ack.Duplicate, "past the window the server keeps the copy")
	}
	s.waitConsumerSettled(bus.StreamTurns, "token-accounting")
	applied := checkRows(t, s, last)
	require.Len(t, s.msgIDs(bus.StreamEvents, bus.KindTurnAccounted+".>"), int(applied), "every event accounted")
	require.Empty(t, s.deadLetters())
}
