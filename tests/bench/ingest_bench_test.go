// Package bench measures Mnemos end to end on the machine it runs on, next
// to the raw speed of the same machine's JetStream and Postgres, so the
// figures can be read as ratios rather than absolutes. The driving code is
// internal/benchmark's, shared with `mnemos bench`.
package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
)

const (
	turnsPerRound = 2_000 // turn events per measured round
	sessions      = 100
	publishers    = 8
)

// BenchmarkIngest measures, per round, turns/s from publish to committed and
// accounted (turn.accounted seen on the bus) with everything published at
// once, then the latency of turns offered at half that rate, below
// saturation, and the raw JetStream publish+consume and raw Postgres insert
// rates; it reports the medians and the ratios. The rounds follow an
// unmeasured one and VACUUM (ANALYZE), as `mnemos bench`'s do (System.WarmIngest).
func BenchmarkIngest(b *testing.B) {
	sys := startSystem(b)
	ctx := context.Background()
	require.NoError(b, sys.WarmIngest(ctx, "w", sessions, publishers))
	var rates, js, pg, p50, p99, s50, s99 []float64
	for i := 0; b.Loop(); i++ {
		turns, err := sys.Encode(benchmark.Events(fmt.Sprintf("r%d", i), sessions, turnsPerRound/sessions))
		require.NoError(b, err)
		in, err := sys.IngestBurst(ctx, turns, publishers)
		require.NoError(b, err)
		rates = append(rates, in.Rate)
		p50, p99 = append(p50, ms(benchmark.Percentile(in.Latencies, 50))), append(p99, ms(benchmark.Percentile(in.Latencies, 99)))

		turns, err = sys.Encode(benchmark.Events(fmt.Sprintf("r%d-steady", i), sessions, 10))
		require.NoError(b, err)
		steady, err := sys.IngestAtRate(ctx, turns, in.Rate/2)
		require.NoError(b, err)
		s50, s99 = append(s50, ms(benchmark.Percentile(steady.Latencies, 50))), append(s99, ms(benchmark.Percentile(steady.Latencies, 99)))

		rate, err := benchmark.RawJetStream(ctx, sys.Bus, fmt.Sprint(i), turnsPerRound, in.EventBytes, publishers)
		require.NoError(b, err)
		js = append(js, rate)
		rate, err = benchmark.RawPostgres(ctx, sys.Store, sys.Owner, turnsPerRound, in.EventBytes, publishers)
		require.NoError(b, err)
		pg = append(pg, rate)
	}
	m := benchmark.Median(rates)
	b.ReportMetric(m, "turns/s")
	b.ReportMetric(benchmark.Median(p50), "p50-ms")
	b.ReportMetric(benchmark.Median(p99), "p99-ms")
	b.ReportMetric(benchmark.Median(s50), "steady-p50-ms")
	b.ReportMetric(benchmark.Median(s99), "steady-p99-ms")
	b.ReportMetric(benchmark.Median(js), "js-msgs/s")
	b.ReportMetric(benchmark.Median(pg), "pg-inserts/s")
	b.ReportMetric(m/benchmark.Median(js), "ratio-js")
	b.ReportMetric(m/benchmark.Median(pg), "ratio-pg")
	b.Logf("ingest end to end: %.0f turns/s (p50 %.1f ms, p99 %.1f ms publish to accounted; at half that rate p50 %.1f ms, p99 %.1f ms); raw JetStream publish+consume %.0f msgs/s; raw Postgres insert %.0f rows/s; ratios %.3f of JetStream, %.3f of Postgres (median of %d rounds of %d turns)",
		m, benchmark.Median(p50), benchmark.Median(p99), benchmark.Median(s50), benchmark.Median(s99),
		benchmark.Median(js), benchmark.Median(pg), m/benchmark.Median(js), m/benchmark.Median(pg), len(rates), turnsPerRound)
}

// startSystem runs the accountant, the outbox relay and the gateway on a
// real Postgres and JetStream until tb ends.
func startSystem(tb testing.TB) *benchmark.System {
	tb.Helper()
	st := pgtest.New(tb)
	bb := bustest.New(tb)
	sys, err := benchmark.Start(context.Background(), st, pgtest.Admin(tb, st), bb, bustest.Logger(tb))
	require.NoError(tb, err)
	tb.Cleanup(sys.Close)
	return sys
}

// TestIngestRoundEndToEnd runs one small round of the benchmark as a test, so
// the harness cannot rot: every turn is accounted, and each session ends at
// its last response's usage.
func TestIngestRoundEndToEnd(t *testing.T) {
	t.Parallel()
	sys := startSystem(t)
	ctx := context.Background()
	evs := benchmark.Events("t", 10, 20)
	turns, err := sys.Encode(evs)
	require.NoError(t, err)
	require.Equal(t, len(evs), turns.Len())
	in, err := sys.IngestBurst(ctx, turns, publishers)
	require.NoError(t, err)
	require.Positive(t, in.Rate)
	require.Len(t, in.Latencies, len(evs))
	require.LessOrEqual(t, benchmark.Percentile(in.Latencies, 50), benchmark.Percentile(in.Latencies, 99))
	for _, ev := range evs[len(evs)-10:] {
		s, err := sys.Store.GetSession(ctx, benchmark.Tenant, ev.SessionID)
		require.NoError(t, err)
		var want tokens.Tally
		want.SetResponse(*ev.Usage, ev.Response.Content)
		require.Equal(t, want.Count(), s.TokenCount, ev.SessionID)
		require.EqualValues(t, 20, s.AppliedSeq)
	}

	turns, err = sys.Encode(benchmark.Events("t-steady", 5, 4))
	require.NoError(t, err)
	steady, err := sys.IngestAtRate(ctx, turns, 50)
	require.NoError(t, err)
	require.Len(t, steady.Latencies, 20)
	require.InDelta(t, 50, steady.Offered, 0)
}

// TestTheIngestPartMeasuresAnalyzedTables: before its measured rounds the
// ingest part of `mnemos bench` runs an unmeasured one and gathers the
// statistics of the tables a turn writes, so the store's prepared
// statements are planned from them and not from default guesses.
func TestTheIngestPartMeasuresAnalyzedTables(t *testing.T) {
	t.Parallel()
	sys := startSystem(t)
	ctx := context.Background()
	rep, err := benchmark.Run(ctx, sys, benchmark.Options{
		Only: "ingest", Rounds: 1, Sessions: 4, PerSession: 3, SustainFor: 200 * time.Millisecond, Run: "a", Progress: t.Logf,
	})
	require.NoError(t, err)
	require.Len(t, rep.Burst, 1)
	require.Equal(t, 12, rep.Burst[0].Turns)
	admin := pgtest.Admin(t, sys.Store)
	var warmed int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE session_id LIKE 'a-warm-%' AND applied_seq = 5`).Scan(&warmed))
	require.Equal(t, 4, warmed, "every session of the warm-up took its five turns")
	rows, err := admin.Query(ctx, `SELECT relname FROM pg_stat_user_tables
		WHERE relname IN ('sessions', 'messages', 'turns', 'outbox') AND last_analyze IS NOT NULL ORDER BY relname`)
	require.NoError(t, err)
	analyzed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"messages", "outbox", "sessions", "turns"}, analyzed)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
