package compactor

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func TestBreakerOpensAfterTheConfiguredFailuresAndClosesOnAModelSummary(t *testing.T) {
	t.Parallel()
	set := tenantcfg.Defaults()
	set.Compaction.BreakerFailures = 3
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	later := now.Add(30 * time.Minute)
	svc := &Service{now: func() time.Time { return now }}
	jobWith := func(failures int, open bool, until time.Time) job {
		return job{set: set, c: store.Compaction{Trigger: events.TriggerAuto},
			state: sessionctx.State{Session: sessionstate.Session{CompactFailures: failures, CompactCircuitOpen: open, CompactCircuitUntil: until}}}
	}
	failed := &result{method: events.MethodExtractive, llmErr: errors.New("model down")}

	require.Equal(t, circuit{failures: 2}, svc.breaker(jobWith(1, false, time.Time{}), failed),
		"two failures in a row do not open a circuit of three")
	require.Equal(t, circuit{failures: 3, open: true, opened: true, until: later}, svc.breaker(jobWith(2, false, time.Time{}), failed),
		"the third failure opens the circuit, once, for the cool-down")
	require.Equal(t, circuit{failures: 4, open: true, until: later}, svc.breaker(jobWith(3, true, now.Add(-time.Second)), failed),
		"a failed half-open try opens it for another cool-down, not a second time")
	require.Equal(t, circuit{}, svc.breaker(jobWith(3, true, now.Add(-time.Second)), &result{method: events.MethodFull}),
		"a model summary closes the circuit")
	require.Equal(t, circuit{failures: 2}, svc.breaker(jobWith(2, false, time.Time{}), &result{method: events.MethodSessionMemory}),
		"a compaction without a model call leaves the breaker as it was")
	require.Equal(t, circuit{failures: 3, open: true, until: later}, svc.breaker(jobWith(3, true, later), &result{method: events.MethodExtractive}))

	require.True(t, svc.circuitOpen(jobWith(3, true, now.Add(time.Second))), "cooling down: no model")
	require.False(t, svc.circuitOpen(jobWith(3, true, now)), "cooled down: half-open, the model is tried")
	require.False(t, svc.circuitOpen(jobWith(3, true, time.Time{})), "opened before the cool-down was recorded: tried at once")
	manual := jobWith(3, true, later)
	manual.c.Trigger = events.TriggerManual
	require.False(t, svc.circuitOpen(manual), "a manual compaction always tries the model")
}

func TestStaleAboveIsHalfwayBetweenBeforeAndAfter(t *testing.T) {
	t.Parallel()
	require.Equal(t, int64(100_000), staleAbove(180_000, 20_000))
	require.Zero(t, staleAbove(20_000, 20_000), "nothing saved: no usage is stale")
	require.Zero(t, staleAbove(10_000, 20_000))
}

func TestAutoCompactionIDIsStablePerRequest(t *testing.T) {
	t.Parallel()
	a := AutoCompactionID("acme", "s-1", 1)
	require.Equal(t, a, AutoCompactionID("acme", "s-1", 1), "a redelivered request names the same compaction")
	require.NotEqual(t, a, AutoCompactionID("acme", "s-1", 2))
	require.NotEqual(t, a, AutoCompactionID("other", "s-1", 1))
}

func TestSummaryTextSaysWhatReplacedTheMessages(t *testing.T) {
	t.Parallel()
	notes := SummaryText(events.MethodSessionMemory, true, "  # Current State\nworking  ")
	require.Contains(t, notes, "running notes")
	require.Contains(t, notes, "most recent messages follow")
	require.True(t, strings.HasSuffix(notes, "# Current State\nworking"), "the summary is trimmed and last")

	full := SummaryText(events.MethodFull, false, "the summary")
	require.Contains(t, full, "summary below")
	require.NotContains(t, full, "follow as they were", "no kept messages, no promise of them")
}

func TestBoundaryNamesTheCompaction(t *testing.T) {
	t.Parallel()
	c := store.Compaction{ID: "c-1", Trigger: events.TriggerManual, PreTokens: 170_000, Direction: events.DirectionFrom}
	require.Equal(t, `<mnemos:compact-boundary id="c-1" trigger="manual" method="full" direction="from" pre_tokens="170000"/>`, Boundary(c, events.MethodFull))
	c.Direction = ""
	require.NotContains(t, Boundary(c, events.MethodFull), "direction")
}

func TestAnswersCallsIn(t *testing.T) {
	t.Parallel()
	call := view.Message{Role: "assistant", Content: turn.Content{{Type: turn.BlockToolUse, ID: "t1", Name: "Read"}}}
	answer := view.Message{Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: "t1"}}}
	other := view.Message{Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: "t2"}}}
	require.True(t, answersCallsIn(answer, []view.Message{call}))
	require.False(t, answersCallsIn(other, []view.Message{call}))
	require.False(t, answersCallsIn(answer, nil))
}
