package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
)

// contextSizes are the session sizes context assembly is measured at.
var contextSizes = []int64{10_000, 50_000, 150_000}

// samples is how many requests each round times per size and path.
const samples = 40

// BenchmarkContextAssembly measures GET /v1/sessions/{id}/context (over
// HTTP, from the gateway's handler through Postgres) for sessions of 10K,
// 50K and 150K tokens, and in the same run a plain SELECT of the same
// messages, and reports the p50 and p99 of each and their ratio.
func BenchmarkContextAssembly(b *testing.B) {
	sys := startSystem(b)
	ctx := context.Background()
	for _, size := range contextSizes {
		require.NoError(b, sys.BuildSession(ctx, fmt.Sprintf("ctx-%d", size), size))
	}
	type result struct{ assemble, sel []time.Duration }
	results := map[int64]*result{}
	for _, size := range contextSizes {
		results[size] = &result{}
	}
	for b.Loop() {
		for _, size := range contextSizes {
			id := fmt.Sprintf("ctx-%d", size)
			r := results[size]
			for range samples {
				a, err := sys.ContextLatency(ctx, id, 1)
				require.NoError(b, err)
				s, err := sys.SelectLatency(ctx, id, 1)
				require.NoError(b, err)
				r.assemble, r.sel = append(r.assemble, a...), append(r.sel, s...)
			}
		}
	}
	for _, size := range contextSizes {
		r := results[size]
		k := size / 1000
		a50, a99 := ms(benchmark.Percentile(r.assemble, 50)), ms(benchmark.Percentile(r.assemble, 99))
		s50, s99 := ms(benchmark.Percentile(r.sel, 50)), ms(benchmark.Percentile(r.sel, 99))
		b.ReportMetric(a50, fmt.Sprintf("ctx%dk-p50-ms", k))
		b.ReportMetric(a99, fmt.Sprintf("ctx%dk-p99-ms", k))
		b.ReportMetric(s50, fmt.Sprintf("select%dk-p50-ms", k))
		b.ReportMetric(a50/s50, fmt.Sprintf("ratio%dk-p50", k))
		b.Logf("context assembly, %dK-token session: p50 %.2f ms, p99 %.2f ms; plain SELECT of its messages: p50 %.2f ms, p99 %.2f ms; ratio of p50s %.1f (%d samples each)",
			k, a50, a99, s50, s99, a50/s50, len(r.assemble))
	}
}

// TestPreflightBenchEndToEnd runs the pre-flight part of `mnemos bench` on
// small sessions, with context assembly, so that it cannot rot: both parts
// ran on the same sessions, every pre-flight was timed, and the JSON report
// carries them.
func TestPreflightBenchEndToEnd(t *testing.T) {
	t.Parallel()
	sys := startSystem(t)
	rep, err := benchmark.Run(context.Background(), sys, benchmark.Options{
		Only: "context,preflight", ContextSizes: []int64{2_000, 4_000}, Samples: 3, PreflightSamples: 7, Progress: t.Logf,
	})
	require.NoError(t, err)
	require.Empty(t, rep.Burst)
	require.Empty(t, rep.Proxy)
	require.Len(t, rep.Context, 2)
	require.Len(t, rep.Preflight, 2)
	for i, p := range rep.Preflight {
		require.Equal(t, rep.Context[i].Tokens, p.Tokens)
		require.Len(t, p.Latencies, 7)
	}
	var out bytes.Buffer
	require.NoError(t, rep.JSON(&out))
	var parsed struct {
		Preflight []struct {
			Tokens int64   `json:"tokens"`
			P50MS  float64 `json:"p50_ms"`
			P99MS  float64 `json:"p99_ms"`
		} `json:"preflight"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &parsed))
	require.Len(t, parsed.Preflight, 2)
	require.EqualValues(t, 4_000, parsed.Preflight[1].Tokens)
	require.Positive(t, parsed.Preflight[1].P50MS)
	require.LessOrEqual(t, parsed.Preflight[1].P50MS, parsed.Preflight[1].P99MS)
}
