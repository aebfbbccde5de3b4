package tokenaccounting_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func limitedEvent(tenantID, session string, seq int64) turn.Event {
	return turn.Event{
		Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%s-%d", tenantID, session, seq), TenantID: tenantID, SessionID: session, Seq: seq,
		OccurredAt:    time.Date(2026, 11, 22, 10, 0, int(seq), 0, time.UTC),
		InputMessages: []turn.Message{{UUID: fmt.Sprintf("%s-u%d", session, seq), Role: "user", Content: turn.Content{{Type: "text", Text: "go on"}}}},
		Response:      &turn.Message{UUID: fmt.Sprintf("%s-a%d", session, seq), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: "text", Text: "done"}}},
		Usage:         &turn.Usage{InputTokens: 100 * seq, OutputTokens: 5},
	}
}

// deadLetterReasons waits for n dead letters and returns their reasons by
// original message id.
func (h *harness) deadLetterReasons(t *testing.T, n int) map[string]string {
	t.Helper()
	var reasons map[string]string
	require.Eventually(t, func() bool {
		info, err := h.bus.JetStream().Stream(context.Background(), h.bus.StreamName(bus.StreamDeadLetter))
		return err == nil && info.CachedInfo().State.Msgs >= uint64(n)
	}, 30*time.Second, 20*time.Millisecond)
	reasons = map[string]string{}
	for _, m := range h.collect(t, bus.StreamDeadLetter, "deadletter.>") {
		reasons[m.Headers().Get(bus.HeaderOriginalMsgID)] = m.Headers().Get(bus.HeaderDeadLetterReason)
	}
	return reasons
}

// waitAppliedOf waits until another tenant's session applied seq.
func (h *harness) waitAppliedOf(t *testing.T, tenantID, session string, seq int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		s, err := h.store.GetSession(context.Background(), tenantID, session)
		return err == nil && s.AppliedSeq == seq
	}, 30*time.Second, 20*time.Millisecond)
}

func TestEventsStraightFromNATSOverTheLimitsAreDeadLettered(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.store.EnsureTenant(ctx, "globex", "Globex"))
	// acme: three events, then one a minute; globex: one active session.
	require.NoError(t, h.store.SetTenantSettings(ctx, tenant, []byte(`{"limits": {"events_per_second": 0.016, "events_burst": 3}}`)))
	require.NoError(t, h.store.SetTenantSettings(ctx, "globex", []byte(`{"limits": {"active_sessions": 1, "active_minutes": 30}}`)))

	for seq := int64(1); seq <= 3; seq++ {
		ev := limitedEvent(tenant, "s1", seq)
		h.publish(t, ev, ev.EventID)
	}
	h.waitApplied(t, map[string]int64{"s1": 3})
	over := limitedEvent(tenant, "s1", 4)
	h.publish(t, over, over.EventID)

	first := limitedEvent("globex", "g1", 1)
	h.publish(t, first, first.EventID)
	h.waitAppliedOf(t, "globex", "g1", 1)
	second := limitedEvent("globex", "g2", 1)
	h.publish(t, second, second.EventID)

	reasons := h.deadLetterReasons(t, 2)
	require.True(t, strings.HasPrefix(reasons[over.EventID], limits.ReasonRateLimited+": "), reasons)
	require.True(t, strings.HasPrefix(reasons[second.EventID], limits.ReasonTooManySessions+": "), reasons)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitEventsPerSecond))
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitActiveSessions))
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.turns.rejected", "reason", limits.ReasonRateLimited))
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.turns.rejected", "reason", limits.ReasonTooManySessions))

	// A refused event leaves the session as it was, so it can be sent again:
	// here as the gateway would, having admitted it (it carries the header,
	// and the accountant does not count it a second time).
	s, err := h.store.GetSession(ctx, tenant, "s1")
	require.NoError(t, err)
	require.EqualValues(t, 3, s.AppliedSeq)
	require.EqualValues(t, 0, s.RejectedTurns, "a limit is not the event's fault")
	data, err := json.Marshal(over)
	require.NoError(t, err)
	_, err = h.bus.Publish(ctx, h.bus.Subject(bus.KindTurnCompleted, tenant, "s1"), over.EventID+"-again", data,
		nats.Header{limits.HeaderAdmitted: []string{"gateway"}})
	require.NoError(t, err)
	h.waitApplied(t, map[string]int64{"s1": 4})

	// The active session of globex keeps working.
	next := limitedEvent("globex", "g1", 2)
	h.publish(t, next, next.EventID)
	h.waitAppliedOf(t, "globex", "g1", 2)
	_, err = h.store.GetSession(ctx, "globex", "g2")
	require.Error(t, err, "the refused session was never created")
}
