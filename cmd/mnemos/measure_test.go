package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/claudecode/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/replay"
)

// TestReplayMeasure: `mnemos replay --measure` on a sample transcript
// against a real server prints one line per round with the usage the
// transcript recorded, and a summary whose figures are those lines'. With
// the system prompt and tools supplied, the first request is predicted
// within 2% and the p95 error is no worse than Claude Code's heuristic.
func TestReplayMeasure(t *testing.T) {
	t.Parallel()
	p := start(t, map[string]string{
		"MNEMOS_DATABASE_URL":   pgtest.URL(t),
		"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		"MNEMOS_DEV_API_KEY":    "test-dev-key",
	}, "-target=all")
	path := claudecodetest.Path(t, "tool_heavy.jsonl")
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"replay", "--measure", "--url", p.http, "--api-key", "test-dev-key", path}, env(nil), &out, io.Discard))

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	records, err := claudecode.Parse(bytes.NewReader(data))
	require.NoError(t, err)
	var actual []int64
	for _, ev := range replay.Events(records, replay.Options{}) {
		if ev.Usage != nil {
			actual = append(actual, ev.Usage.InputSide())
		}
	}

	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 1+len(actual)+1, "header, one line per round, summary:\n%s", out.String())
	var rounds []replay.Measured
	for i, line := range lines[1 : len(lines)-1] {
		f := strings.Fields(line)
		require.Len(t, f, 7, line)
		num := func(s string) int64 {
			n, err := strconv.ParseInt(s, 10, 64)
			require.NoError(t, err, line)
			return n
		}
		r := replay.Measured{Seq: num(f[1]), Actual: num(f[2]), Predicted: num(f[3]), Heuristic: num(f[5])}
		require.Equal(t, int64(i+1), r.Seq)
		require.Equal(t, actual[i], r.Actual)
		rounds = append(rounds, r)
	}
	m, h := replay.Summaries(rounds)
	want := regexp.MustCompile(`^tool_heavy\.jsonl: n=(\d+)  mnemos p50 ([\d.]+)% p95 ([\d.]+)% max ([\d.]+)%  \|  heuristic p50 ([\d.]+)% p95 ([\d.]+)% max ([\d.]+)%$`)
	sub := want.FindStringSubmatch(lines[len(lines)-1])
	require.NotNil(t, sub, lines[len(lines)-1])
	require.Equal(t, strconv.Itoa(m.N), sub[1])
	for i, v := range []float64{m.P50, m.P95, m.Max, h.P50, h.P95, h.Max} {
		require.Equal(t, strconv.FormatFloat(v, 'f', 2, 64), sub[i+2])
	}
	require.LessOrEqual(t, replay.ErrorPercent(rounds[0].Predicted, rounds[0].Actual), 2.0, "the first request, with system prompt and tools")
	require.LessOrEqual(t, m.P95, h.P95)
}
