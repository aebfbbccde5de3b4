package replay_test

import (
	"cmp"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/replay"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func TestRepeatMakesOneLongerSession(t *testing.T) {
	t.Parallel()
	f, err := os.Open(claudecodetest.Path(t, "tool_heavy.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	records, err := claudecode.Parse(f)
	require.NoError(t, err)

	once := replay.Events(records, replay.Options{})
	thrice := replay.Events(replay.Repeat(records, 3), replay.Options{})
	require.Len(t, thrice, 3*len(once))

	uuids, calls := map[string]bool{}, map[string]bool{}
	for i, ev := range thrice {
		require.Equal(t, int64(i+1), ev.Seq, "seqs run on across copies")
		for _, m := range ev.Messages() {
			require.False(t, uuids[m.UUID], "uuid %s appears twice", m.UUID)
			uuids[m.UUID] = true
			for _, b := range m.Content {
				switch b.Type {
				case turn.BlockToolUse:
					require.False(t, calls[b.ID], "tool call %s appears twice", b.ID)
					calls[b.ID] = true
				case turn.BlockToolResult:
					require.True(t, calls[b.ToolUseID], "result %s answers a call of its own copy", b.ToolUseID)
				}
			}
		}
	}
	// Usage carries on: each copy starts above where the one before ended.
	lines, err := replay.Account(replay.Repeat(records, 3), replay.Options{})
	require.NoError(t, err)
	single, err := replay.Account(records, replay.Options{})
	require.NoError(t, err)
	n := len(single)
	require.Len(t, lines, 3*n)
	require.Equal(t, single[n-1].Count, lines[n-1].Count, "the first copy is the transcript")
	require.Greater(t, lines[2*n-1].Count, lines[n-1].Count)
	require.Greater(t, lines[3*n-1].Count, lines[2*n-1].Count)
	require.Same(t, &records[0], &replay.Repeat(records, 1)[0], "one copy is the transcript itself")
}

// TestUntilCompactionStopsAtTheClientsCompaction: long.jsonl cut at its
// /compact holds no boundary and peaks at 155,686 tokens; twice (Repeat)
// it crosses the 167,000-token auto-compact threshold and its count never
// comes down. A transcript without a compaction is kept whole.
func TestUntilCompactionStopsAtTheClientsCompaction(t *testing.T) {
	t.Parallel()
	parse := func(name string) []claudecode.Record {
		f, err := os.Open(claudecodetest.Path(t, name))
		require.NoError(t, err)
		defer f.Close()
		records, err := claudecode.Parse(f)
		require.NoError(t, err)
		return records
	}
	records := parse("long.jsonl")
	cut := replay.UntilCompaction(records)
	require.Less(t, len(cut), len(records))
	for _, r := range cut {
		require.False(t, r.IsBoundary())
	}
	once, err := replay.Account(cut, replay.Options{})
	require.NoError(t, err)
	require.EqualValues(t, 155_686, slices.MaxFunc(once, func(a, b replay.Line) int { return cmp.Compare(a.Count, b.Count) }).Count)
	lines, err := replay.Account(replay.Repeat(cut, 2), replay.Options{})
	require.NoError(t, err)
	peak, crossed := int64(0), false
	for _, l := range lines {
		require.GreaterOrEqual(t, l.Count, peak/2, "no compaction brings the count down")
		peak = max(peak, l.Count)
		crossed = crossed || l.Compact
	}
	require.True(t, crossed, "the second copy crosses the auto-compact threshold (peak %d)", peak)
	whole := parse("tool_heavy.jsonl")
	require.Len(t, replay.UntilCompaction(whole), len(whole))
}
