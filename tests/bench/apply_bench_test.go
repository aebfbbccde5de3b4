package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

const (
	applyMessages = 100 // new messages per applied turn
	applyTurns    = 20  // turns applied to each session per round
)

// BenchmarkApplyIntoLargeSession measures the accountant applying turns of
// 100 new messages to a session that holds 1K messages and to one that
// holds 300K, in the same table, and reports the time per applied message
// for each and their ratio: applying a turn costs what it adds, not what the
// session holds.
func BenchmarkApplyIntoLargeSession(b *testing.B) {
	ctx := context.Background()
	acc, _, sessions := applySetup(b, map[string]int{"s1k": 1_000, "s300k": 300_000})
	var small, large []float64
	for round := 0; b.Loop(); round++ {
		for id, per := range map[string]*[]float64{"s1k": &small, "s300k": &large} {
			start := time.Now()
			for range applyTurns {
				sessions[id]++
				require.NoError(b, acc.Apply(ctx, applyEvent(id, sessions[id])))
			}
			*per = append(*per, float64(time.Since(start).Nanoseconds())/(applyTurns*applyMessages))
		}
	}
	s, l := benchmark.Median(small), benchmark.Median(large)
	b.ReportMetric(s, "ns/msg-1k")
	b.ReportMetric(l, "ns/msg-300k")
	b.ReportMetric(l/s, "ratio")
	b.Logf("applying turns of %d new messages: %.0f ns/message into a 1K-message session, %.0f into a 300K one, ratio %.2f (median of %d rounds of %d turns)",
		applyMessages, s, l, l/s, len(small), applyTurns)
}

// applySetup starts an accountant (no bus: Apply is called directly) over a
// fresh database holding sessions of the given sizes, filled in bulk by the
// administrator, and returns each session's last seq.
func applySetup(tb testing.TB, sizes map[string]int) (*tokenaccounting.Service, *store.Store, map[string]int64) {
	tb.Helper()
	ctx := context.Background()
	st := pgtest.New(tb)
	require.NoError(tb, st.EnsureTenant(ctx, benchmark.Tenant, "benchmark"))
	// No limits: the 300K session is over the default session_messages.
	defaults := tenantcfg.Defaults()
	defaults.Limits = limits.Config{}
	settings, err := tenantcfg.NewCache(defaults, st.TenantSettings, time.Minute)
	require.NoError(tb, err)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, nil, settings, bustest.Logger(tb), nil)
	require.NoError(tb, err)
	seqs := map[string]int64{}
	admin := pgtest.Admin(tb, st)
	for id, n := range sizes {
		fill(tb, admin, id, n)
		seqs[id] = 1
	}
	_, err = admin.Exec(ctx, "ANALYZE")
	require.NoError(tb, err)
	return acc, st, seqs
}

// fill writes a session of n messages, at seq 1, as one bulk insert.
func fill(tb testing.TB, admin *pgxpool.Pool, id string, n int) {
	tb.Helper()
	ctx := context.Background()
	_, err := admin.Exec(ctx, `INSERT INTO sessions (tenant_id, session_id, agent_id, applied_seq, message_count, message_bytes) VALUES ($1, $2, 'main', 1, $3, 64 * $3::bigint)`, benchmark.Tenant, id, n)
	require.NoError(tb, err)
	_, err = admin.Exec(ctx, `INSERT INTO messages (tenant_id, session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, bytes_through)
		SELECT $1, $2, $2 || '-fill-' || g, g - 1, 1, CASE WHEN g % 2 = 0 THEN 'assistant' ELSE 'user' END,
		       jsonb_build_array(jsonb_build_object('type', 'text', 'text', 'message ' || g || ' of the session, about the build')),
		       sha256(($2 || g)::bytea), 12, 64 * g
		FROM generate_series(1, $3::integer) g`, benchmark.Tenant, id, n)
	require.NoError(tb, err)
}

// applyEvent is a turn of applyMessages new messages: user messages and the response.
func applyEvent(session string, seq int64) turn.Event {
	return turnOfSize(session, seq, applyMessages)
}

// turnOfSize is a turn of n new messages: user messages and the response.
func turnOfSize(session string, seq int64, n int) turn.Event {
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", session, seq), TenantID: benchmark.Tenant, SessionID: session, Seq: seq,
		Model: "claude-sonnet-4-5", OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		Usage: &turn.Usage{InputTokens: 1_000, OutputTokens: 10},
	}
	for i := range n - 1 {
		ev.InputMessages = append(ev.InputMessages, turn.Message{UUID: fmt.Sprintf("%s-%d-%d", session, seq, i), Role: "user",
			Content: turn.Content{{Type: turn.BlockText, Text: fmt.Sprintf("step %d of turn %d: the tests pass", i, seq)}}})
	}
	ev.Response = &turn.Message{UUID: fmt.Sprintf("%s-%d-r", session, seq), Role: "assistant", StopReason: "end_turn",
		Content: turn.Content{{Type: turn.BlockText, Text: "done"}}}
	return ev
}

// TestApplyIntoLargeSessionRound runs the benchmark's setup and a few turns
// on small sessions, so the harness cannot rot.
func TestApplyIntoLargeSessionRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	acc, st, seqs := applySetup(t, map[string]int{"a": 50, "b": 500})
	for id, n := range map[string]int64{"a": 50, "b": 500} {
		for range 2 {
			seqs[id]++
			require.NoError(t, acc.Apply(ctx, applyEvent(id, seqs[id])))
		}
		s, err := st.GetSession(ctx, benchmark.Tenant, id)
		require.NoError(t, err)
		require.EqualValues(t, 3, s.AppliedSeq)
		require.Equal(t, n+2*applyMessages, s.MessageCount)
	}
}

// BenchmarkApplyBatch measures the accountant applying the next turn of
// each of 64 sessions (a tool result of 720 bytes and an answer calling the
// next tool, as the ingest part of `mnemos bench` sends), one event per
// transaction, one after the other, and all in one transaction as the group
// commit does; it reports the time per turn of each and their allocations.
func BenchmarkApplyBatch(b *testing.B) {
	const sessions = 64
	for _, mode := range []string{"one-by-one", "batch"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			acc, _, _ := applySetup(b, nil)
			b.ReportAllocs()
			var per []float64
			for round := 1; b.Loop(); round++ {
				// Round r is seq r of the same sessions (Events is seq-major).
				b.StopTimer()
				all := benchmark.Events(mode, sessions, round)
				evs := all[len(all)-sessions:]
				b.StartTimer()
				start := time.Now()
				if mode == "batch" {
					for i, err := range acc.ApplyAll(ctx, evs) {
						require.NoError(b, err, evs[i].EventID)
					}
				} else {
					for _, ev := range evs {
						require.NoError(b, acc.Apply(ctx, ev))
					}
				}
				per = append(per, float64(time.Since(start).Nanoseconds())/sessions)
			}
			b.ReportMetric(benchmark.Median(per), "ns/turn")
		})
	}
}

// BenchmarkApplyALargeTurnInABatch measures the group commit's statements
// on one turn of 1,000 and of 10,000 messages (a new session's first turn,
// through ApplyAll): what a turn costs per message should not grow with the
// turn. It reports the time per message of each and their ratio.
func BenchmarkApplyALargeTurnInABatch(b *testing.B) {
	ctx := context.Background()
	acc, _, _ := applySetup(b, nil)
	per := map[int][]float64{}
	sizes := []int{1_000, 10_000}
	for round := 0; b.Loop(); round++ {
		for _, n := range sizes {
			ev := turnOfSize(fmt.Sprintf("large-%d-%d", n, round), 1, n)
			start := time.Now()
			for _, err := range acc.ApplyAll(ctx, []turn.Event{ev}) {
				require.NoError(b, err)
			}
			per[n] = append(per[n], float64(time.Since(start).Nanoseconds())/float64(n))
		}
	}
	small, large := benchmark.Median(per[sizes[0]]), benchmark.Median(per[sizes[1]])
	b.ReportMetric(small, "ns/msg-1k")
	b.ReportMetric(large, "ns/msg-10k")
	b.ReportMetric(large/small, "ratio")
}
