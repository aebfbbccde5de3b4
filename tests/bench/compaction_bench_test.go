package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/replay"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// BenchmarkCompactionSavings reports what the extractive summary (which the
// builtin provider also answers a full compaction with) leaves of each
// fixture session: post-compaction tokens (boundary, summary and restored
// files and todo list) over the estimate of the messages it replaces. (The
// session's count, which also holds the system prompt and tool definitions
// the backend sends with every request, is logged beside.) The last case
// is a session past the auto-compact threshold: long.jsonl replayed twice.
func BenchmarkCompactionSavings(b *testing.B) {
	cases := savingsCases
	type saving struct{ count, pre, post int64 }
	got := map[string]saving{}
	for b.Loop() {
		for _, c := range cases {
			fs := loadFixtureSession(b, c.file, c.repeat)
			msgs, count := fs.msgs, fs.count
			summary := compaction.Extractive(msgs, compaction.ExtractLimits{})
			head := turn.Content{{Type: turn.BlockText, Text: "<mnemos:compact-boundary/>"}, {Type: turn.BlockText, Text: summary}}
			head = append(head, compaction.Restore(msgs, nil, compaction.RestoreLimits{}, compaction.ToolNames{})...)
			got[c.name] = saving{count: count, pre: view.Tokens(msgs), post: tokens.EstimateContent(head)}
		}
	}
	for _, c := range cases {
		s := got[c.name]
		b.ReportMetric(float64(s.post)/float64(s.pre), "post/pre-"+c.name)
		b.Logf("%s", fmt.Sprintf("extractive compaction of %s: messages %d tokens before, %d after (%.3f); session count before %d", c.name, s.pre, s.post, float64(s.post)/float64(s.pre), s.count))
	}
}

// savingsCases are the sessions the compaction-savings benchmarks compact.
var savingsCases = []struct {
	name   string
	file   string
	repeat int
}{
	{"short", "short.jsonl", 1},
	{"tool_heavy", "tool_heavy.jsonl", 1},
	{"subagent", "subagent.jsonl", 1},
	{"long", "long.jsonl", 1},
	{"long_x2", "long.jsonl", 2},
}

// fixtureSession is the main session of a fixture transcript, replayed
// repeat times over: its turn events, its messages as stored, and its count
// after the last event as the accountant keeps it.
type fixtureSession struct {
	events []turn.Event
	msgs   []view.Message
	count  int64
}

func loadFixtureSession(b *testing.B, file string, repeat int) fixtureSession {
	b.Helper()
	f, err := os.Open(claudecodetest.Path(b, file))
	require.NoError(b, err)
	records, err := claudecode.Parse(f)
	f.Close()
	require.NoError(b, err)
	records = replay.Repeat(records, repeat)
	lines, err := replay.Account(records, replay.Options{})
	require.NoError(b, err)
	var fs fixtureSession
	var main string
	for _, l := range lines {
		if !strings.Contains(l.Session, "-agent-") {
			fs.count, main = l.Count, l.Session
		}
	}
	for _, ev := range replay.Events(records, replay.Options{}) {
		if ev.SessionID != main {
			continue
		}
		fs.events = append(fs.events, ev)
		for _, m := range ev.Messages() {
			fs.msgs = append(fs.msgs, view.Message{UUID: m.UUID, Position: int64(len(fs.msgs)), Round: ev.Seq, Role: m.Role, Content: m.Content, Tokens: tokens.EstimateMessage(m)})
		}
	}
	return fs
}
