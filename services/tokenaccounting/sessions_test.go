package tokenaccounting_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

func TestSessionsGaugeCountsByState(t *testing.T) {
	t.Parallel()
	h := setup(t, func(c *tokenaccounting.Config) { c.SessionsCountInterval = 20 * time.Millisecond })
	ctx := context.Background()
	// Sessions whose one round reports these many tokens in context.
	sessions := map[string]int64{"small-1": 10_000, "small-2": 20_000, "near": 150_000, "over": 170_000, "stuck": 180_000}
	want := map[string]int64{}
	for id, n := range sessions {
		ev := turn.Event{
			Schema: turn.SchemaV1, EventID: "ev-" + id, TenantID: tenant, SessionID: id, Seq: 1, OccurredAt: time.Now().UTC(),
			Model:         "claude-sonnet-4-5",
			InputMessages: []turn.Message{{UUID: id + "-u", Role: "user", Content: turn.Content{{Type: "text", Text: "go on"}}}},
			Response:      &turn.Message{UUID: id + "-a", Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: "text", Text: "ok"}}},
			Usage:         &turn.Usage{InputTokens: 1, CacheReadInputTokens: n, OutputTokens: 10},
		}
		h.publish(t, ev, ev.EventID)
		want[id] = 1
	}
	h.waitApplied(t, want)
	byState := map[string]int64{}
	for id := range sessions {
		s, err := h.store.GetSession(ctx, tenant, id)
		require.NoError(t, err)
		byState[s.State]++
	}
	// ok 2, error 1 (warning and error are equal by default), autocompact 1, blocking 1.
	require.Equal(t, map[string]int64{"ok": 2, "error": 1, "autocompact": 1, "blocking": 1}, byState)
	require.Eventually(t, func() bool {
		for _, st := range []string{"ok", "warning", "error", "autocompact", "blocking"} {
			n, ok := h.metrics.Gauge("mnemos.sessions", "state", st)
			if !ok || n != byState[st] {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "the gauge reports the stored states, zero included")
}
