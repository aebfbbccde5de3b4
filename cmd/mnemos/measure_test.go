package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
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

// TestExactPreflightsMeasureWithinOnePercent: with
// proxy.preflight_exact_percent the tenant's upstream counts what a
// preflight would estimate, and `mnemos replay --measure` finds every
// sample transcript's p95 error within 1.0% of what its requests really
// were, and no worse than Claude Code's heuristic. The upstream is the
// scripted one whose usage the transcripts recorded; each transcript is
// measured in a tenant of its own (no prior), with offload off (the
// replayed client sends every tool result whole). The figures are printed
// for docs/token-accounting.md.
func TestExactPreflightsMeasureWithinOnePercent(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Reply{}, errors.New("this upstream only counts")
	}})
	dbURL := pgtest.URL(t)
	p := start(t, map[string]string{
		"MNEMOS_DATABASE_URL":           dbURL,
		"MNEMOS_HTTP_ADDR":              "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR":         t.TempDir(),
		"MNEMOS_UPSTREAM_ANTHROPIC_URL": up.URL,
		"MNEMOS_UPSTREAM_ANTHROPIC_KEY": "upstream-key",
	}, "-target=all")
	ctx := context.Background()
	admin := env(map[string]string{"MNEMOS_DATABASE_URL": dbURL})
	calls := 0
	for _, name := range []string{"short.jsonl", "tool_heavy.jsonl", "subagent.jsonl", "long.jsonl"} {
		tenant := "exact-" + strings.TrimSuffix(strings.ReplaceAll(name, "_", "-"), ".jsonl")
		key := "mnm_" + tenant + "-key-0123456789abcdef"
		require.NoError(t, run(ctx, []string{"tenant", "create", "-key", key, tenant}, admin, io.Discard, io.Discard))
		require.NoError(t, run(ctx, []string{"tenant", "settings", tenant,
			`{"offload":{"threshold_chars":1000000000,"preview_bytes":2000,"turn_cap_chars":1000000000},"proxy":{"preflight_exact_percent":5}}`},
			admin, io.Discard, io.Discard))
		var out bytes.Buffer
		require.NoError(t, run(ctx, []string{"replay", "--measure", "--url", p.http, "--api-key", key, claudecodetest.Path(t, name)}, env(nil), &out, io.Discard))
		t.Logf("%s\ncount_tokens calls: %d", out.String(), len(up.Calls())-calls)
		calls = len(up.Calls())
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		sub := regexp.MustCompile(`n=(\d+)  mnemos p50 ([\d.]+)% p95 ([\d.]+)% max ([\d.]+)%  \|  heuristic p50 ([\d.]+)% p95 ([\d.]+)%`).FindStringSubmatch(lines[len(lines)-1])
		require.NotNil(t, sub, lines[len(lines)-1])
		p95, err := strconv.ParseFloat(sub[3], 64)
		require.NoError(t, err)
		heuristic, err := strconv.ParseFloat(sub[6], 64)
		require.NoError(t, err)
		require.LessOrEqual(t, p95, 1.0, "%s: p95 error", name)
		require.LessOrEqual(t, p95, heuristic, "%s: p95 error against the heuristic's", name)
	}
	var counted int
	for _, call := range up.Calls() {
		require.Equal(t, "/v1/messages/count_tokens", call.Path, "the preflights only count")
		require.Equal(t, "upstream-key", call.Header.Get("X-Api-Key"))
		counted++
	}
	require.Positive(t, counted, "count_tokens calls")
}
