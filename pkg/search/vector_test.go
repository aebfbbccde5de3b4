package search_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/embedtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/search"
	"github.com/mnemos-ai/mnemos/services/embedder"
)

// TestEmbeddingsFindWhatSharesNoWord: a question that shares no word with
// the message that answers it, but whose words the scripted vectors take
// as the same concepts, is found by the hybrid ranking and not by the
// lexical one; a phrase query, and a query the endpoint fails to embed,
// rank lexically; another tenant's identical message is never a hit.
func TestEmbeddingsFindWhatSharesNoWord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.New(t)
	metrics := telemetrytest.New(t)
	c := &corpus{t: t, admin: pgtest.Admin(t, st), clock: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	c.exec(`INSERT INTO tenants (tenant_id, name) VALUES ('acme', 'Acme'), ('other', 'Other')`)
	c.session("acme", "trip", inScope,
		"My automobile broke down on the highway near Lyon.",
		"That sounds stressful; did the tow truck come quickly?")
	c.session("acme", "party", inScope,
		"We planned the garden party menu with lemonade.",
		"The lemonade should be cold.")
	c.session("other", "elsewhere", inScope, "My automobile broke down on the highway near Lyon.", "Noted.")
	c.memory("acme", project.String(), "drinks", "Lemonade for every garden party", "Cold, with mint.")

	var down atomic.Bool
	srv := embedtest.Start(t, embedtest.Config{
		Concepts: map[string]string{"automobil": "car", "broke": "fail"},
		Fail: func([]string) (int, string) {
			if down.Load() {
				return http.StatusServiceUnavailable, "scripted outage"
			}
			return 0, ""
		},
	})
	client, err := embed.NewOpenAI(embed.Config{BaseURL: srv.URL + "/v1", Model: "scripted"})
	require.NoError(t, err)
	// The embedder stores the vectors, as its target would on the turns.
	emb, err := embedder.New(embedder.DefaultConfig(), st, nil, client, bustest.Logger(t), metrics.Meter())
	require.NoError(t, err)
	for _, s := range []struct{ tenant, session string }{{"acme", "trip"}, {"acme", "party"}, {"other", "elsewhere"}} {
		require.NoError(t, emb.EmbedSession(ctx, s.tenant, s.session))
	}
	require.NoError(t, emb.EmbedMemories(ctx, "acme", project.String()))

	lexical, err := search.New(st, metrics.Meter())
	require.NoError(t, err)
	hybrid, err := search.New(st, metrics.Meter())
	require.NoError(t, err)
	hybrid.UseRanker(hybrid.Hybrid(client, bustest.Logger(t)))

	question := "When did the car fail?"
	require.NotContains(t, where(search1(t, lexical, search.Request{Query: question})), "trip/0", "no word in common")
	hits := search1(t, hybrid, search.Request{Query: question})
	require.NotEmpty(t, hits)
	require.Equal(t, "trip/0", where(hits)[0], "found by its vector")
	require.Equal(t, "user", hits[0].Role)
	require.False(t, hits[0].Time.IsZero())
	for _, h := range search1(t, hybrid, search.Request{Query: question, Limit: 50}) {
		require.NotEqual(t, "elsewhere", h.Session, "never another tenant's")
	}
	require.Equal(t, "elsewhere/0", where(search1(t, hybrid, search.Request{Tenant: "other", Query: question}))[0], "its own tenant finds it")

	// Both rankings agree on what shares words; fusion keeps it first.
	require.Equal(t, where(search1(t, lexical, search.Request{Query: "lemonade garden party"}))[0],
		where(search1(t, hybrid, search.Request{Query: "lemonade garden party"}))[0])
	// The memory is ranked by its vector too.
	require.Contains(t, where(search1(t, hybrid, search.Request{Query: "lemonade", Source: search.SourceMemory})), "memory:drinks")

	require.NotContains(t, where(search1(t, hybrid, search.Request{Query: `"car" fail`})), "trip/0", "a phrase ranks lexically")
	down.Store(true)
	require.NotContains(t, where(search1(t, hybrid, search.Request{Query: question})), "trip/0", "the endpoint down: lexical")
}
