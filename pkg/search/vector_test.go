package search_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/embedtest"
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
	c, _, metrics := newCorpus(t)
	st := c.store
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

// TestCachedVectorsFollowWhatPostgresHolds: a searcher keeps the vectors
// of the sessions it ranked, and a change to a session's vectors — a
// message added, a rewind that replaces one, the session erased — is in
// its next ranking, as in that of a searcher that never cached them.
func TestCachedVectorsFollowWhatPostgresHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _, metrics := newCorpus(t)
	st := c.store
	c.session("acme", "trip", inScope, "My automobile broke down on the highway near Lyon.", "Did someone help you?")
	c.session("acme", "party", inScope, "We planned the garden party menu with lemonade.", "The lemonade should be cold.")
	srv := embedtest.Start(t, embedtest.Config{Concepts: map[string]string{"automobil": "car", "broke": "fail"}})
	client, err := embed.NewOpenAI(embed.Config{BaseURL: srv.URL + "/v1", Model: "scripted"})
	require.NoError(t, err)
	emb, err := embedder.New(embedder.DefaultConfig(), st, nil, client, bustest.Logger(t), metrics.Meter())
	require.NoError(t, err)
	embedAll := func() {
		t.Helper()
		for _, s := range []string{"trip", "party"} {
			require.NoError(t, emb.EmbedSession(ctx, "acme", s))
		}
	}
	embedAll()
	hybrid := func() *search.Searcher {
		s, err := search.New(st, metrics.Meter())
		require.NoError(t, err)
		s.UseRanker(s.Hybrid(client, bustest.Logger(t)))
		return s
	}
	cached := hybrid()
	// Ranked by vector only: the lexical half of the query matches nothing
	// these changes add ("car" and "fail" are in none of the texts).
	byVector := func(s *search.Searcher) []string {
		return where(search1(t, s, search.Request{Query: "car fail", Source: search.SourceMessage, Limit: 3}))
	}
	require.Equal(t, "trip/0", byVector(cached)[0])

	// A message added to a cached session.
	c.exec(`INSERT INTO messages (tenant_id, session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, bytes_through)
		VALUES ('acme', 'party', 'party-2', 2, 3, 'user', '[{"type":"text","text":"After the party my automobile broke down again."}]', '\x00', 10, 100)`)
	embedAll()
	require.Equal(t, "party/2", byVector(cached)[0], "the session's new message is ranked")
	require.Equal(t, byVector(hybrid()), byVector(cached))

	// A rewind: the message is deleted and another stored in its place.
	c.exec(`DELETE FROM messages WHERE tenant_id = 'acme' AND session_id = 'party' AND position = 2`)
	c.exec(`INSERT INTO messages (tenant_id, session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, bytes_through)
		VALUES ('acme', 'party', 'party-2b', 2, 3, 'user', '[{"type":"text","text":"We bought more lemonade."}]', '\x00', 10, 100)`)
	embedAll()
	require.Equal(t, "trip/0", byVector(cached)[0], "the replaced message's vector is not the old one")
	require.NotContains(t, byVector(cached), "party/2")
	require.Equal(t, byVector(hybrid()), byVector(cached))

	// The session erased: none of its messages is ranked.
	c.exec(`DELETE FROM sessions WHERE tenant_id = 'acme' AND session_id = 'trip'`)
	for _, w := range byVector(cached) {
		require.NotContains(t, w, "trip/")
	}
}
