package search_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/search"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// BenchmarkScopeVectorRank times the vector half of a search of messages
// (Searcher.Vector) over a scope of n stored messages in 100 sessions, each
// with a vector of dims float32, under row-level security: the scope's
// sessions and their vectors' versions read, the vectors scored by their
// dot product with the query's, the 100 best kept and their heads read.
// "read" reads every vector from Postgres each time (a searcher that keeps
// none); "cached" finds them in the searcher's memory, unchanged since
// the round before. It reports the median and the 99th percentile of one
// ranking.
func BenchmarkScopeVectorRank(b *testing.B) {
	for _, c := range []struct{ messages, dims int }{{10_000, 256}, {100_000, 256}, {10_000, 1536}} {
		b.Run(fmt.Sprintf("messages=%d/dims=%d", c.messages, c.dims), func(b *testing.B) {
			st := pgtest.New(b)
			require.NoError(b, st.EnsureTenant(context.Background(), "acme", "Acme"))
			seedVectors(b, st, c.messages, c.dims)
			query := randomVector(rand.New(rand.NewPCG(7, 7)), c.dims)
			for _, keep := range []struct {
				name  string
				bytes int64
			}{{"read", 0}, {"cached", search.DefaultVectorCacheBytes}} {
				b.Run(keep.name, func(b *testing.B) {
					s, err := search.New(st, telemetrytest.New(b).Meter())
					require.NoError(b, err)
					s.KeepVectors(keep.bytes)
					req := search.Request{Tenant: "acme", Scope: memory.Scope{Kind: memory.KindProject, ID: "bench"}, Source: search.SourceMessage}
					rank := func() {
						hits, err := s.Vector(context.Background(), req, "bench", query)
						require.NoError(b, err)
						require.Len(b, hits, search.MaxCandidates)
					}
					rank() // a first search fills the cache
					var took []time.Duration
					for b.Loop() {
						start := time.Now()
						rank()
						took = append(took, time.Since(start))
					}
					slices.Sort(took)
					b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
				})
			}
		})
	}
}

func randomVector(rng *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return embed.Normalize(v)
}

// seedVectors stores n messages over 100 sessions of scope project:bench,
// each with a random vector of model "bench".
func seedVectors(b *testing.B, st *store.Store, n, dims int) {
	b.Helper()
	ctx := context.Background()
	admin := pgtest.Admin(b, st)
	_, err := admin.Exec(ctx, `INSERT INTO sessions (tenant_id, session_id, memory_scope)
		SELECT 'acme', 's' || i, '{"project": "bench"}' FROM generate_series(0, 99) i`)
	require.NoError(b, err)
	_, err = admin.Exec(ctx, `INSERT INTO messages (tenant_id, session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, bytes_through)
		SELECT 'acme', 's' || (i % 100), 'u' || i, i / 100, 1, 'user', '[{"type":"text","text":"hello"}]', '\x00', 2, 0
		FROM generate_series(0, $1 - 1) i`, n)
	require.NoError(b, err)
	rng := rand.New(rand.NewPCG(1, uint64(dims)))
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{"acme", fmt.Sprintf("s%d", i%100), int64(i / 100), "bench", embed.Encode(randomVector(rng, dims))}
	}
	_, err = admin.CopyFrom(ctx, pgx.Identifier{"message_vectors"}, []string{"tenant_id", "session_id", "position", "model", "vector"}, pgx.CopyFromRows(rows))
	require.NoError(b, err)
	_, err = admin.Exec(ctx, "ANALYZE sessions, messages, message_vectors")
	require.NoError(b, err)
}
