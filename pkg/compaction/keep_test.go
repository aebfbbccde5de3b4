package compaction_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// sized is a message of the given tokens, with a text block when withText.
func sized(role string, tokens int64, withText bool, blocks ...turn.Block) view.Message {
	if withText {
		blocks = append(blocks, text("words"))
	}
	return view.Message{Role: role, Round: 1, Content: turn.Content(blocks), Tokens: tokens}
}

// uniform is n messages of the given tokens, alternating user and
// assistant; textEvery > 0 puts text in every textEvery-th message (from m0).
func uniform(n int, tokens int64, textEvery int) []view.Message {
	out := make([]view.Message, n)
	for i := range out {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		out[i] = sized(role, tokens, textEvery > 0 && i%textEvery == 0)
	}
	return numbered(out...)
}

func TestKeepFrom(t *testing.T) {
	t.Parallel()

	call := func(id string) turn.Block { return toolUse(id, "Bash", map[string]any{"command": "true"}) }
	result := func(id string) turn.Block { return toolResult(id, "ok") }

	tests := []struct {
		name string
		msgs []view.Message
		last string
		lim  compaction.KeepLimits
		want int
	}{
		{
			// m15…m19 hold 5,000 tokens: extend to 10,000.
			name: "defaults: extend back to 10,000 tokens",
			msgs: uniform(20, 1000, 1), last: "m14", want: 10,
		},
		{
			name: "extend for 5 text messages",
			// Text in m0, m4, m8, m12, m16: 10,000 tokens at m10 hold only
			// 2 of them; 5 need m0 (20,000 tokens ≤ 40,000).
			msgs: uniform(20, 1000, 4), last: "m14", want: 0,
		},
		{
			name: "stop before passing 40,000",
			// 9,000 each: m8, m9 (18,000) + m7 (27,000) + m6 (36,000); m5
			// would make 45,000. Only 4 text messages, but the max holds.
			msgs: uniform(10, 9000, 1), last: "m7", want: 6,
		},
		{
			name: "exactly at the max is allowed",
			msgs: uniform(10, 10_000, 1), last: "m7", want: 6, // 4 × 10,000 = 40,000
		},
		{
			name: "the unsummarized tail is kept even above the max",
			msgs: uniform(10, 9000, 1), last: "m1", want: 2, // 72,000 after m1
		},
		{
			name: "nothing after the last summarized message",
			msgs: uniform(20, 1000, 1), last: "m19", want: 10,
		},
		{
			name: "minimums met without extending",
			msgs: uniform(20, 3000, 1), last: "m14", want: 15, // 15,000 tokens, 5 texts
		},
		{
			name: "the whole context is not enough",
			msgs: uniform(6, 1000, 1), last: "m2", want: 0,
		},
		{
			name: "custom limits",
			msgs: uniform(20, 1000, 1), last: "m17",
			lim:  compaction.KeepLimits{MinTokens: 3000, MinTextMessages: 1, MaxTokens: 3500},
			want: 17, // m18, m19 = 2,000; + m17 = 3,000
		},
		{
			name: "custom max stops first",
			msgs: uniform(20, 1000, 1), last: "m17",
			lim:  compaction.KeepLimits{MinTokens: 9000, MinTextMessages: 1, MaxTokens: 4500},
			want: 16, // 4,000; a fifth message would make 5,000
		},
		{
			name: "a kept result pulls in its call",
			msgs: numbered(
				sized("user", 1000, true),
				sized("assistant", 2000, false, call("t1")),
				sized("user", 9000, false, result("t1")),
				sized("assistant", 1000, true),
			),
			last: "m1", lim: compaction.KeepLimits{MinTokens: 5000, MinTextMessages: 1},
			want: 1, // m2, m3 = 10,000 are enough, but m2 answers m1
		},
		{
			name: "a call that would pass the max: move past its result",
			msgs: numbered(
				sized("user", 1000, true),
				sized("assistant", 2000, false, call("t1")),
				sized("user", 9000, false, result("t1")),
				sized("assistant", 1000, true),
			),
			last: "m1", lim: compaction.KeepLimits{MinTokens: 5000, MinTextMessages: 1, MaxTokens: 11_000},
			want: 3,
		},
		{
			name: "extension stops at a result whose big call does not fit",
			msgs: numbered(
				sized("user", 1000, true),
				sized("assistant", 40_000, false, call("w")), // a large write
				sized("user", 1000, false, result("w")),
				sized("assistant", 1000, true),
				sized("user", 1000, true),
				sized("assistant", 1000, true),
			),
			last: "m3", want: 3, // back to m2 (4,000); m1 would pass 40,000; m2 is an orphan
		},
		{
			name: "parallel results split over messages",
			msgs: numbered(
				sized("user", 1000, true),
				sized("assistant", 1000, false, call("a"), call("b")),
				sized("user", 1000, false, result("a")),
				sized("user", 1000, false, result("b")),
				sized("assistant", 1000, true),
			),
			last: "m2", lim: compaction.KeepLimits{MinTokens: 1000, MinTextMessages: 1},
			want: 1, // m3's result pulls in m1 (and m2 between)
		},
		{
			name: "moving forward only moves forward",
			// From m3 the result in m4 answers m2 (too big to take): move
			// past m4. Then m5 answers m3, now before the start: it is not
			// pulled back in (that would bring back m4's orphan); move past m5.
			msgs: numbered(
				sized("user", 1000, true),
				sized("assistant", 1000, true),
				sized("assistant", 30_000, false, call("old")),
				sized("assistant", 1000, false, call("new")),
				sized("user", 1000, false, result("old")),
				sized("user", 1000, false, result("new")),
				sized("assistant", 1000, true),
			),
			last: "m2", lim: compaction.KeepLimits{MinTokens: 1000, MinTextMessages: 1, MaxTokens: 20_000},
			want: 6,
		},
		{
			name: "results of calls inside the kept part are fine",
			msgs: numbered(
				sized("user", 1000, true),
				sized("assistant", 1000, false, call("x")),
				sized("user", 1000, false, result("x")),
				sized("assistant", 1000, true),
			),
			last: "m0", lim: compaction.KeepLimits{MinTokens: 1000, MinTextMessages: 1},
			want: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := compaction.KeepFrom(tt.msgs, tt.last, tt.lim)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			requireNoSplitPair(t, tt.msgs, got)
		})
	}
}

func TestKeepFromUnknown(t *testing.T) {
	t.Parallel()

	msgs := uniform(5, 1000, 1)
	for _, id := range []string{"nope", ""} {
		_, err := compaction.KeepFrom(msgs, id, compaction.KeepLimits{})
		require.Error(t, err, "uuid %q", id)
	}
	_, err := compaction.KeepFrom(nil, "m0", compaction.KeepLimits{})
	require.Error(t, err)
}

// On real sessions, whatever message was summarized last, the kept part
// respects the limits and splits no tool pair.
func TestKeepFromFixtures(t *testing.T) {
	t.Parallel()

	lim := compaction.KeepLimits{MinTokens: 2000, MinTextMessages: 2, MaxTokens: 6000}
	for _, fc := range fixtureContexts(t) {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			for i, m := range fc.messages {
				got, err := compaction.KeepFrom(fc.messages, m.UUID, lim)
				require.NoError(t, err)
				require.LessOrEqual(t, got, len(fc.messages))
				requireNoSplitPair(t, fc.messages, got)
				tail := view.Tokens(fc.messages[i+1:])
				kept := view.Tokens(fc.messages[got:])
				if got <= i+1 {
					// Extended backwards (or not at all): within the max, unless
					// the tail alone passes it.
					require.LessOrEqual(t, kept, max(tail, lim.MaxTokens), "after %s", m.UUID)
				}
			}
		})
	}
}

// requireNoSplitPair checks that no kept tool_result answers a call before from.
func requireNoSplitPair(t *testing.T, msgs []view.Message, from int) {
	t.Helper()
	before := map[string]bool{}
	for _, m := range msgs[:from] {
		for _, b := range m.Content {
			if b.Type == turn.BlockToolUse {
				before[b.ID] = true
			}
		}
	}
	for _, m := range msgs[from:] {
		for _, b := range m.Content {
			if b.Type == turn.BlockToolResult {
				require.False(t, before[b.ToolUseID], "result of %s kept without its call", b.ToolUseID)
			}
		}
	}
}
