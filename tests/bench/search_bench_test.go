package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/internal/benchmark"
)

// The search benchmark's scope and questions.
const (
	searchScope   = "project:search-bench"
	searchQueries = 60
)

// searchSize is how much a search scope holds: sessions of perSession
// messages each, and memories.
type searchSize struct{ sessions, perSession, memories int }

// benchSearchSize is the benchmark's: 100,000 messages in 500 sessions,
// and 300 memories.
var benchSearchSize = searchSize{sessions: 500, perSession: 200, memories: 300}

// common are everyday English words, the most frequent of the corpus
// (several are stop words, which the search leaves out).
var common = strings.Fields(`the a to and of in is it you that for on with this was be have are not
	but at we what so can if do all your my they from just about will one there would like when time
	know how up out get then think more some now go see because want need make also right back well
	test build file code change fix run error work check update branch review merge deploy service
	user request table query index data session memory message model token context plan step issue`)

// vocabulary is a corpus's words by rank: the common words first, then
// pseudo-words made of syllables, rarer the later they come.
func vocabulary(n int) []string {
	syllables := strings.Fields("ka lo mi ne su ra to vi pe do gu ze ba fi lu mo ta re si no")
	words := append([]string(nil), common...)
	for i := 0; len(words) < n; i++ {
		var b strings.Builder
		for x := i; ; x /= len(syllables) {
			b.WriteString(syllables[x%len(syllables)])
			if x < len(syllables) {
				break
			}
		}
		b.WriteString("n")
		words = append(words, b.String())
	}
	return words
}

// corpusText writes messages of 8 to 60 words drawn by a Zipf law over
// vocab, as conversations are: a few words very often, most rarely.
type corpusText struct {
	vocab []string
	zipf  *rand.Zipf
	rng   *rand.Rand
}

func newCorpusText(seed uint64) *corpusText {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	vocab := vocabulary(20_000)
	return &corpusText{vocab: vocab, rng: rng, zipf: rand.NewZipf(rng, 1.07, 2, uint64(len(vocab)-1))}
}

func (c *corpusText) words(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = c.vocab[c.zipf.Uint64()]
	}
	return out
}

func (c *corpusText) message() string {
	return strings.Join(c.words(8+c.rng.IntN(53)), " ")
}

// query is a question as a user asks it: a few words of the corpus, common
// and rare, some as a phrase or with a word left out.
func (c *corpusText) query(i int) string {
	words := c.words(3 + c.rng.IntN(6))
	switch i % 10 {
	case 7:
		return `"` + strings.Join(words[:2], " ") + `" ` + strings.Join(words[2:], " ")
	case 9:
		return strings.Join(words[1:], " ") + " -" + words[0]
	}
	return "what did we say about " + strings.Join(words, " ") + "?"
}

// fillSearchScope stores the scope's sessions and messages with COPY, as
// the schema's owner (the triggers index them as they would the
// accountant's writes), then vacuums and analyzes, as a database that has
// been running looks.
func fillSearchScope(ctx context.Context, tb testing.TB, sys *benchmark.System, text *corpusText, size searchSize) {
	tb.Helper()
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	id := func(n int) string { return fmt.Sprintf("search-%04d", n) }
	sessions := make([][]any, size.sessions)
	for n := range sessions {
		sessions[n] = []any{benchmark.Tenant, id(n), "main", "claude-sonnet-4-5", `{"project": "search-bench"}`, int64(size.perSession), at.Add(time.Duration(n) * time.Minute)}
	}
	_, err := sys.Owner.CopyFrom(ctx, pgx.Identifier{"sessions"},
		[]string{"tenant_id", "session_id", "agent_id", "model", "memory_scope", "message_count", "updated_at"}, pgx.CopyFromRows(sessions))
	require.NoError(tb, err)
	for n := range size.sessions {
		rows := make([][]any, size.perSession)
		for p := range rows {
			role := []string{"user", "assistant"}[p%2]
			body := fmt.Sprintf(`[{"type":"text","text":%q}]`, text.message())
			rows[p] = []any{benchmark.Tenant, id(n), fmt.Sprintf("%s-m%d", id(n), p), int64(p), int64(p/2 + 1), role, body, []byte{0}, int64(20), int64(p + 1)}
		}
		_, err := sys.Owner.CopyFrom(ctx, pgx.Identifier{"messages"},
			[]string{"tenant_id", "session_id", "uuid", "position", "seq", "role", "content", "content_hash", "estimate_tokens", "bytes_through"},
			pgx.CopyFromRows(rows))
		require.NoError(tb, err)
	}
	c := client.New(sys.API, benchmark.APIKey)
	for i := range size.memories {
		name := fmt.Sprintf("note-%03d", i)
		md := fmt.Sprintf("---\nname: %s\ndescription: %s\ntype: project\n---\n\n%s\n", name, strings.Join(text.words(8), " "), text.message())
		_, err := c.PutMemory(ctx, searchScope, name, md, client.WriteOptions{})
		require.NoError(tb, err)
	}
	_, err = sys.Owner.Exec(ctx, "VACUUM (ANALYZE) sessions, messages, message_terms, memories, memory_terms")
	require.NoError(tb, err)
}

// searchQuestions fills a scope of size and asks text's questions once
// each, unmeasured (the tables' pages in Postgres's cache, as a serving
// database holds them); it returns the client and the questions, which
// find what the scope holds.
func searchQuestions(ctx context.Context, tb testing.TB, size searchSize) (*client.Client, []string) {
	tb.Helper()
	sys := startSystem(tb)
	text := newCorpusText(63)
	start := time.Now()
	fillSearchScope(ctx, tb, sys, text, size)
	tb.Logf("filled %d messages and %d memories in %s", size.sessions*size.perSession, size.memories, time.Since(start).Round(time.Second))
	queries := make([]string, searchQueries)
	for i := range queries {
		queries[i] = text.query(i)
	}
	c := client.New(sys.API, benchmark.APIKey)
	hits := 0
	for _, q := range queries {
		res, err := c.SearchScope(ctx, searchScope, q, client.SearchOptions{})
		require.NoError(tb, err, q)
		for i := 1; i < len(res.Hits); i++ {
			require.GreaterOrEqual(tb, res.Hits[i-1].Score, res.Hits[i].Score, "%s: best first", q)
		}
		hits += len(res.Hits)
	}
	require.Greater(tb, hits, searchQueries*5, "the questions find what the scope holds")
	return c, queries
}

// TestSearchScopeRoundEndToEnd runs the search benchmark's harness on a
// small scope (2,000 messages, 20 memories) as a test, so it cannot rot
// while the benchmark itself, whose scope takes minutes to fill, runs
// with make bench-go.
func TestSearchScopeRoundEndToEnd(t *testing.T) {
	t.Parallel()
	searchQuestions(context.Background(), t, searchSize{sessions: 20, perSession: 100, memories: 20})
}

// BenchmarkSearchScope measures GET /v1/scopes/{scope}/search over HTTP
// (the gateway's handler, the ranking, the snippets) on a scope of
// 100,000 messages in 500 sessions and 300 memories, for 60 questions of
// plain words (some with a phrase or a word left out), 10 hits each, and
// reports the p50 and p99 in milliseconds.
func BenchmarkSearchScope(b *testing.B) {
	ctx := context.Background()
	c, queries := searchQuestions(ctx, b, benchSearchSize)
	var latencies []time.Duration
	b.ResetTimer()
	for b.Loop() {
		for _, q := range queries {
			t0 := time.Now()
			_, err := c.SearchScope(ctx, searchScope, q, client.SearchOptions{})
			latencies = append(latencies, time.Since(t0))
			require.NoError(b, err)
		}
	}
	p50, p99 := ms(benchmark.Percentile(latencies, 50)), ms(benchmark.Percentile(latencies, 99))
	b.ReportMetric(p50, "search100k-p50-ms")
	b.ReportMetric(p99, "search100k-p99-ms")
	b.Logf("search of a scope of 100,000 messages and %d memories: p50 %.2f ms, p99 %.2f ms (%d searches)", benchSearchSize.memories, p50, p99, len(latencies))
}
