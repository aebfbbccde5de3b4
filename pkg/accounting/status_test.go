package accounting_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// window200K are docs/token-accounting.md's thresholds for a 200K window, derived from the
// default config the way the design states them.
type window200K struct {
	window, effective, autoCompact, warning, blocking int64
}

func defaultThresholds(cfg tokens.Config) window200K {
	info, ok := tokens.LookupModel(session().Model)
	if !ok {
		panic("model table lost " + session().Model)
	}
	w := window200K{window: info.Window}
	reserve := min(info.MaxOutput, cfg.MaxReserve)
	w.effective = w.window - reserve
	w.autoCompact = w.effective - cfg.AutoCompactBuffer
	w.warning = w.autoCompact - cfg.WarningBuffer
	w.blocking = w.effective - cfg.BlockingBuffer
	return w
}

func TestDefaultThresholdsMatchDesign(t *testing.T) {
	t.Parallel()
	w := defaultThresholds(tokens.DefaultConfig())
	// The bracketed numbers of docs/token-accounting.md.
	require.Equal(t, window200K{window: 200_000, effective: 180_000, autoCompact: 167_000, warning: 147_000, blocking: 177_000}, w)
}

// session is a Claude session on a 200K window with auto-compaction on.
func session() sessionstate.Session {
	return sessionstate.Session{TenantID: "acme", SessionID: "s-1", Model: "claude-sonnet-4-5", AutoCompactEnabled: true}
}

// textMessage is a user message of n ASCII bytes, n/4 tokens when n is a multiple of 4.
func textMessage(uuid string, n int) turn.Message {
	return turn.Message{UUID: uuid, Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: strings.Repeat("w", n)}}}
}

func TestLimitsAndTally(t *testing.T) {
	t.Parallel()

	cfg := tokens.DefaultConfig()
	w := defaultThresholds(cfg)
	s := session()
	l := accounting.Limits(cfg, s)
	require.Equal(t, w.window, l.Window)
	require.Equal(t, w.autoCompact, l.AutoCompact)
	require.Equal(t, w.blocking, l.Blocking)

	// The session's own window and max output win over the model table.
	s.ContextWindow, s.MaxOutputTokens = 1_000_000, 8_000
	l = accounting.Limits(cfg, s)
	require.Equal(t, s.ContextWindow, l.Window)
	require.Equal(t, s.MaxOutputTokens, l.Reserve, "a max output under 20K is the reserve")
	require.Equal(t, s.ContextWindow-s.MaxOutputTokens, l.Effective)

	s.BaselineTokens, s.HasUsage, s.PendingTokens = 1000, true, 20
	require.Equal(t, tokens.Tally{Baseline: 1000, HasUsage: true, Pending: 20}, accounting.TallyOf(s))
}

func TestStatus(t *testing.T) {
	t.Parallel()

	cfg := tokens.DefaultConfig()
	// Separate the warning and error thresholds so every state shows.
	cfg.WarningBuffer = 30_000
	l := accounting.Limits(cfg, session())
	require.Less(t, l.Warning, l.Error)

	tests := []struct {
		count int64
		state tokens.State
	}{
		{0, tokens.StateOK},
		{l.Warning - 1, tokens.StateOK},
		{l.Warning, tokens.StateWarning},
		{l.Error, tokens.StateError},
		{l.AutoCompact - 1, tokens.StateError},
		{l.AutoCompact, tokens.StateAutoCompact},
		{l.Blocking, tokens.StateBlocking},
		{l.Window, tokens.StateBlocking},
	}
	for _, tt := range tests {
		got := accounting.Status(l, tt.count)
		percentLeft := 0.0
		if tt.count < l.AutoCompact {
			percentLeft = 100 * float64(l.AutoCompact-tt.count) / float64(l.AutoCompact)
		}
		require.Equal(t, events.Tokens{
			Count: tt.count, State: string(tt.state), PercentLeft: percentLeft,
			Window: l.Window, Effective: l.Effective, Warning: l.Warning, Error: l.Error,
			AutoCompact: l.AutoCompact, Blocking: l.Blocking,
		}, got, "count %d", tt.count)
	}
	require.Equal(t, 100.0, accounting.Status(l, 0).PercentLeft, "a percentage, 0 to 100")
}

func TestPreflightFor(t *testing.T) {
	t.Parallel()

	cfg := tokens.DefaultConfig()
	off := accounting.DefaultOffload()
	w := defaultThresholds(cfg)

	t.Run("no usage: estimate times 4/3", func(t *testing.T) {
		t.Parallel()
		s := session()
		s.PendingTokens = 250
		// 3,000 bytes of text are 750 tokens; (250 + 750)·4/3 rounds up to 1,334.
		msgs := []turn.Message{textMessage("u1", 3_000)}
		estimate := int64(3_000 / 4)
		want := ((s.PendingTokens+estimate)*4 + 2) / 3
		require.Equal(t, int64(1_334), want)

		p := accounting.PreflightFor(cfg, off, s, msgs)
		require.Equal(t, want, p.Count)
		require.Equal(t, string(tokens.StateOK), p.State)
		require.False(t, p.CompactFirst)
		require.False(t, p.Blocked)
	})

	t.Run("with usage: baseline plus estimates", func(t *testing.T) {
		t.Parallel()
		s := session()
		s.HasUsage, s.BaselineTokens, s.PendingTokens = true, 100_000, 500
		msgs := []turn.Message{textMessage("u1", 4_000), textMessage("u2", 400)}
		want := s.BaselineTokens + s.PendingTokens + 4_000/4 + 400/4
		p := accounting.PreflightFor(cfg, off, s, msgs)
		require.Equal(t, want, p.Count)
		require.Equal(t, w.window, p.Window)
		require.Equal(t, w.autoCompact, p.AutoCompact)
		require.InDelta(t, 100*float64(w.autoCompact-want)/float64(w.autoCompact), p.PercentLeft, 1e-9)
	})

	t.Run("no messages", func(t *testing.T) {
		t.Parallel()
		s := session()
		s.HasUsage, s.BaselineTokens = true, 42
		require.Equal(t, s.BaselineTokens, accounting.PreflightFor(cfg, off, s, nil).Count)
	})

	// The message adds 1,000 tokens; the baseline sets the count to land on
	// a threshold, or one token below it.
	const msgBytes = 4_000
	msgTokens := int64(msgBytes / 4)
	at := func(count int64, mutate func(*sessionstate.Session)) accounting.Preflight {
		s := session()
		s.HasUsage, s.BaselineTokens = true, count-msgTokens
		if mutate != nil {
			mutate(&s)
		}
		p := accounting.PreflightFor(cfg, off, s, []turn.Message{textMessage("u1", msgBytes)})
		require.Equal(t, count, p.Count)
		return p
	}

	t.Run("compact first exactly at the auto-compact threshold", func(t *testing.T) {
		t.Parallel()
		p := at(w.autoCompact, nil)
		require.True(t, p.CompactFirst)
		require.False(t, p.Blocked)
		require.Equal(t, string(tokens.StateAutoCompact), p.State)
		require.Zero(t, p.PercentLeft)

		p = at(w.autoCompact-1, nil)
		require.False(t, p.CompactFirst)
		require.Equal(t, string(tokens.StateError), p.State, "warning and error share 147,000 by default")
	})

	t.Run("auto-compaction disabled", func(t *testing.T) {
		t.Parallel()
		p := at(w.autoCompact, func(s *sessionstate.Session) { s.AutoCompactEnabled = false })
		require.False(t, p.CompactFirst)
		require.Equal(t, string(tokens.StateAutoCompact), p.State)
	})

	t.Run("blocked at the blocking limit", func(t *testing.T) {
		t.Parallel()
		p := at(w.blocking, nil)
		require.True(t, p.Blocked)
		require.True(t, p.CompactFirst)
		require.Equal(t, string(tokens.StateBlocking), p.State)

		p = at(w.blocking-1, nil)
		require.False(t, p.Blocked)
		require.True(t, p.CompactFirst)
	})

	t.Run("compaction in flight is reported", func(t *testing.T) {
		t.Parallel()
		p := at(w.autoCompact, func(s *sessionstate.Session) { s.CompactionInFlight = true })
		require.True(t, p.CompactionInFlight)
		require.False(t, at(w.autoCompact, nil).CompactionInFlight)
	})

	t.Run("counts offloaded results by their preview", func(t *testing.T) {
		t.Parallel()
		s := session()
		s.HasUsage, s.BaselineTokens = true, 10_000
		big := strings.Repeat("x", off.ThresholdChars+1)
		msgs := []turn.Message{userMessage("u1", toolResult("toolu_1", big))}
		before := snapshot(t, msgs)

		// What the accountant would show: the preview, not the result.
		_, decisions, err := off.Apply(msgs, nil, func(string) string { return "pending" })
		require.NoError(t, err)
		require.Len(t, decisions, 1)
		previewTokens := (int64(len(decisions[0].Replacement)) + 3) / 4

		p := accounting.PreflightFor(cfg, off, s, msgs)
		require.Equal(t, s.BaselineTokens+previewTokens, p.Count)
		require.Less(t, p.Count, s.BaselineTokens+int64(len(big))/4)
		require.Equal(t, before, snapshot(t, msgs), "preflight changed its input")
	})

	t.Run("offloads each turn on its own", func(t *testing.T) {
		t.Parallel()
		s := session()
		s.HasUsage, s.BaselineTokens = true, 10_000
		// Five results, each under the threshold for one result: together
		// over the cap of one turn, each alone far under it.
		size := off.ThresholdChars - 1
		require.Greater(t, 5*size, off.TurnCapChars, "the premise: one turn of them passes the cap")
		var turns [][]turn.Message
		var all []turn.Message
		for i := range 5 {
			id := fmt.Sprintf("toolu_%d", i)
			round := []turn.Message{
				userMessage("u"+id, toolResult(id, strings.Repeat("x", size))),
				{UUID: "a" + id, Role: "assistant", Content: turn.Content{{Type: turn.BlockText, Text: "Next."}}},
			}
			turns, all = append(turns, round), append(all, round...)
		}

		whole := tokens.EstimateContent(all[0].Content)
		require.Equal(t, (int64(size)+3)/4, whole, "a result counts whole")
		each := accounting.PreflightForTurns(cfg, off, s, turns).Count
		require.Equal(t, accounting.PreflightFor(cfg, off, s, all[:2]).Count-s.BaselineTokens, (each-s.BaselineTokens)/5,
			"five turns count five times what one does")
		require.Greater(t, each, s.BaselineTokens+5*whole)
		require.Less(t, accounting.PreflightFor(cfg, off, s, all).Count, each-whole/2,
			"as one turn, the largest results are counted by their previews")
	})
}
