package tokenaccounting

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

var planNow = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func planEvent(seq int64, text string, usage *turn.Usage) turn.Event {
	return turn.Event{
		Schema: turn.SchemaV1, EventID: "e-" + text[:1], TenantID: "acme", SessionID: "s", Seq: seq, Model: "claude-sonnet-4-5",
		InputMessages: []turn.Message{{UUID: "u-" + text[:1], Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: text}}}},
		Response:      &turn.Message{UUID: "a-" + text[:1], Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: "ok"}}},
		Usage:         usage,
		OccurredAt:    planNow,
	}
}

// planOf plans ev over sess as applyEvent would, known naming the messages
// the session stored already.
func planOf(t *testing.T, sess sessionstate.Session, ev turn.Event, known ...string) turnPlan {
	t.Helper()
	in, err := prepare(ev)
	require.NoError(t, err)
	in.known = map[string][]byte{}
	for i, u := range in.uuids {
		for _, k := range known {
			if u == k {
				in.known[u] = in.sums[i]
			}
		}
	}
	in.shown = in.msgs
	plan, err := planTurn(tenantcfg.Defaults(), sess, in, planNow)
	require.NoError(t, err)
	return plan
}

func kinds(plan turnPlan) []string {
	var out []string
	for _, e := range plan.outgoing {
		out = append(out, e.Kind())
	}
	return out
}

func TestPlanStoresNewMessagesAndCountsTheUsage(t *testing.T) {
	t.Parallel()
	sess := sessionstate.Session{SessionID: "s", State: string(tokens.StateOK), AutoCompactEnabled: true}
	plan := planOf(t, sess, planEvent(1, "hello", &turn.Usage{InputTokens: 100, OutputTokens: 20}))
	require.Len(t, plan.added, 2)
	require.EqualValues(t, 0, plan.added[0].Position)
	require.True(t, plan.added[1].IsResponse)
	require.EqualValues(t, 120, plan.next.TokenCount, "the response's usage is the count")
	require.EqualValues(t, 1, plan.next.AppliedSeq)
	require.EqualValues(t, 2, plan.next.MessageCount)
	require.Equal(t, []string{"turn.accounted"}, kinds(plan), "no change of state, no compaction")
}

func TestPlanSkipsResentMessages(t *testing.T) {
	t.Parallel()
	sess := sessionstate.Session{SessionID: "s", State: string(tokens.StateOK), MessageCount: 7, AutoCompactEnabled: true}
	plan := planOf(t, sess, planEvent(2, "again", nil), "u-a")
	require.Len(t, plan.added, 1, "the resent user message is stored once already")
	require.Equal(t, "a-a", plan.added[0].UUID)
	require.EqualValues(t, 7, plan.added[0].Position)
	require.EqualValues(t, 8, plan.next.MessageCount)
}

func TestPlanAsksForACompactionOnceAboveTheThreshold(t *testing.T) {
	t.Parallel()
	sess := sessionstate.Session{SessionID: "s", State: string(tokens.StateOK), AutoCompactEnabled: true, CompactRequests: 2}
	plan := planOf(t, sess, planEvent(3, "big", &turn.Usage{InputTokens: 170_000, OutputTokens: 100}))
	require.Equal(t, []string{"context.threshold", "compact.requested", "turn.accounted"}, kinds(plan))
	req := plan.outgoing[1].(events.CompactRequested)
	require.EqualValues(t, 3, req.Request, "the session's next request number")
	require.Equal(t, events.TriggerAuto, req.Trigger)
	require.True(t, plan.next.CompactionInFlight)

	sess.CompactionInFlight = true
	sess.State = plan.next.State
	again := planOf(t, sess, planEvent(4, "more", &turn.Usage{InputTokens: 171_000, OutputTokens: 100}))
	require.Equal(t, []string{"turn.accounted"}, kinds(again), "one compaction in flight at a time")

	sess.CompactionInFlight, sess.AutoCompactEnabled = false, false
	off := planOf(t, sess, planEvent(4, "more", &turn.Usage{InputTokens: 171_000, OutputTokens: 100}))
	require.Equal(t, []string{"turn.accounted"}, kinds(off), "auto-compaction off: none asked")
}

func TestPlanCountsStaleUsageByItsEstimate(t *testing.T) {
	t.Parallel()
	// The session was compacted from 180,000 to 20,000: usage of 150,000
	// still measures the context before the compaction.
	sess := sessionstate.Session{SessionID: "s", State: string(tokens.StateOK), AutoCompactEnabled: true,
		BaselineTokens: 20_000, HasUsage: true, TokenCount: 20_000, StaleUsageAbove: 100_000}
	plan := planOf(t, sess, planEvent(5, strings.Repeat("x", 400), &turn.Usage{InputTokens: 150_000, OutputTokens: 10}))
	require.True(t, plan.staleUsage)
	require.Less(t, plan.next.TokenCount, int64(25_000), "counted by the estimate of what the turn added")
	require.EqualValues(t, 100_000, plan.next.StaleUsageAbove, "still waiting for usage measured after the compaction")
}

// TestPlanThrashGuard: three automatic compactions asked within the last
// ten turns hold the next one back, counted, until the oldest falls out of
// the window; the turns that asked are remembered, the latest three.
func TestPlanThrashGuard(t *testing.T) {
	t.Parallel()
	above := &turn.Usage{InputTokens: 170_000, OutputTokens: 100}
	sess := sessionstate.Session{SessionID: "s", State: string(tokens.StateAutoCompact), AutoCompactEnabled: true, CompactRequests: 3,
		AutoCompactSeqs: []int64{3, 6, 9}}

	held := planOf(t, sess, planEvent(12, "held", above))
	require.Equal(t, []string{"turn.accounted"}, kinds(held), "3 compactions within turns 3..12: none asked")
	require.True(t, held.thrashHeld)
	require.EqualValues(t, 1, held.next.ThrashHeld)
	require.False(t, held.next.CompactionInFlight)
	require.Equal(t, []int64{3, 6, 9}, held.next.AutoCompactSeqs)

	asked := planOf(t, sess, planEvent(13, "asked", above))
	require.Equal(t, []string{"compact.requested", "turn.accounted"}, kinds(asked), "turn 3 fell out of the last ten")
	require.False(t, asked.thrashHeld)
	require.Equal(t, []int64{6, 9, 13}, asked.next.AutoCompactSeqs)

	set := tenantcfg.Defaults().Compaction
	set.ThrashCompactions = 0
	busy := sessionstate.Session{AutoCompactEnabled: true, AutoCompactSeqs: []int64{10, 11, 12}}
	require.Equal(t, tenantcfg.AutoDecision{Ask: true, Seqs: []int64{13}}, set.AutoCompaction(busy, 13, true), "0 turns the guard off (and keeps only the latest turn that asked)")
	require.Equal(t, tenantcfg.AutoDecision{}, set.AutoCompaction(busy, 13, false), "below the threshold: nothing")
}
