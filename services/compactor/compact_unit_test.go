package compactor

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/pkg/view"
)

func TestBreakerOpensAfterTheConfiguredFailuresAndClosesOnAModelSummary(t *testing.T) {
	t.Parallel()
	set := tenantcfg.Defaults()
	set.Compaction.BreakerFailures = 3
	jobWith := func(failures int, open bool) job {
		return job{set: set, state: sessionctx.State{Session: store.Session{CompactFailures: failures, CompactCircuitOpen: open}}}
	}
	failed := &result{method: events.MethodExtractive, llmErr: errors.New("model down")}

	failures, open, opened := (&Service{}).breaker(jobWith(1, false), failed)
	require.Equal(t, 2, failures)
	require.False(t, open, "two failures in a row do not open a circuit of three")
	require.False(t, opened)

	failures, open, opened = (&Service{}).breaker(jobWith(2, false), failed)
	require.Equal(t, 3, failures)
	require.True(t, open)
	require.True(t, opened, "the third failure opens the circuit, once")

	_, open, opened = (&Service{}).breaker(jobWith(3, true), failed)
	require.True(t, open)
	require.False(t, opened, "an open circuit is not opened again")

	failures, open, _ = (&Service{}).breaker(jobWith(3, true), &result{method: events.MethodFull})
	require.Zero(t, failures)
	require.False(t, open, "a model summary closes the circuit")

	failures, open, _ = (&Service{}).breaker(jobWith(2, false), &result{method: events.MethodSessionMemory})
	require.Equal(t, 2, failures, "a compaction without a model call leaves the count as it was")
	require.False(t, open)
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
