package search_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/search"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// corpus writes rows as the administrator: tenants, sessions and their
// messages, memories; the triggers index them as they would the
// services' writes.
type corpus struct {
	t     *testing.T
	store *store.Store
	admin *pgxpool.Pool
	clock time.Time
}

func newCorpus(t *testing.T) (*corpus, *search.Searcher, *telemetrytest.Reader) {
	t.Helper()
	st := pgtest.New(t)
	metrics := telemetrytest.New(t)
	s, err := search.New(st, metrics.Meter())
	require.NoError(t, err)
	c := &corpus{t: t, store: st, admin: pgtest.Admin(t, st), clock: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	c.exec(`INSERT INTO tenants (tenant_id, name) VALUES ('acme', 'Acme'), ('other', 'Other')`)
	return c, s, metrics
}

func (c *corpus) exec(sql string, args ...any) {
	c.t.Helper()
	_, err := c.admin.Exec(context.Background(), sql, args...)
	require.NoError(c.t, err, sql)
}

// session stores a session of tenant naming scope (a memory_scope object)
// with texts as its messages, user and assistant by turns, a minute apart;
// each session is updated after the one stored before it.
func (c *corpus) session(tenant, id string, scope map[string]string, texts ...string) {
	c.t.Helper()
	raw, err := json.Marshal(scope)
	require.NoError(c.t, err)
	c.clock = c.clock.Add(time.Hour)
	c.exec(`INSERT INTO sessions (tenant_id, session_id, memory_scope, message_count, updated_at) VALUES ($1, $2, $3, $4, $5)`,
		tenant, id, raw, len(texts), c.clock)
	for i, text := range texts {
		content, err := json.Marshal([]map[string]string{{"type": "text", "text": text}})
		require.NoError(c.t, err)
		role := []string{"user", "assistant"}[i%2]
		c.exec(`INSERT INTO messages (tenant_id, session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, bytes_through, created_at)
			VALUES ($1, $2, $3, $4::bigint, $4::bigint + 1, $5, $6, '\x00', 10, 100, $7)`, tenant, id, fmt.Sprintf("%s-%d", id, i), i, role, content, c.clock.Add(time.Duration(i)*time.Minute))
	}
}

func (c *corpus) memory(tenant, scope, name, description, body string) {
	c.t.Helper()
	c.clock = c.clock.Add(time.Hour)
	c.exec(`INSERT INTO memories (tenant_id, scope, name, revision, type, description, body, created_at, updated_at)
		VALUES ($1, $2, $3, 1, 'project', $4, $5, $6, $6)`, tenant, scope, name, description, body, c.clock)
}

var (
	project = memory.Scope{Kind: memory.KindProject, ID: "apollo"}
	inScope = map[string]string{"project": "apollo", "user": "u-1"}
)

func search1(t *testing.T, s *search.Searcher, req search.Request) []search.Hit {
	t.Helper()
	if req.Tenant == "" {
		req.Tenant = "acme"
	}
	if req.Scope.IsZero() {
		req.Scope = project
	}
	res, err := s.Search(context.Background(), req)
	require.NoError(t, err, req.Query)
	return res.Hits
}

// where lists the hits as "session/position" or "memory:name".
func where(hits []search.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		if h.Source == search.SourceMemory {
			out[i] = "memory:" + h.Memory
		} else {
			out[i] = fmt.Sprintf("%s/%d", h.Session, h.Position)
		}
	}
	return out
}

func TestAnyWordMatchesAndRareWordsRankFirst(t *testing.T) {
	t.Parallel()
	c, s, _ := newCorpus(t)
	c.session("acme", "s1", inScope,
		"I went to the LGBTQ support group on Tuesday and it was powerful",
		"That sounds wonderful, what did you talk about?",
		"We talked about the group and my plans for the week")
	c.session("acme", "s2", inScope,
		"The build failed again this week",
		"The group of tests in the storage package timed out")
	// A plain question: no message holds every word, several hold some.
	hits := search1(t, s, search.Request{Query: "When did Caroline go to the LGBTQ support group?", Source: search.SourceMessage})
	require.NotEmpty(t, hits)
	assert.Equal(t, "s1/0", where(hits)[0], "the message with the rare words ranks first")
	assert.Subset(t, where(hits), []string{"s1/2", "s2/1"}, "a message holding one common word of the query is found too")
	assert.NotContains(t, where(hits), "s1/1")
	// Stemming: "talking" finds "talked" and "talk".
	assert.ElementsMatch(t, []string{"s1/1", "s1/2"}, where(search1(t, s, search.Request{Query: "talking"})))
	h := hits[0]
	assert.Equal(t, search.SourceMessage, h.Source)
	assert.Equal(t, "user", h.Role)
	assert.Equal(t, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), h.Time.UTC())
	assert.Positive(t, h.Score)
	assert.Contains(t, h.Snippet, "«LGBTQ»")
	for i := 1; i < len(hits); i++ {
		assert.GreaterOrEqual(t, hits[i-1].Score, hits[i].Score, "best first")
	}
}

func TestPhrasesMustMatchAndExcludedWordsMustNot(t *testing.T) {
	t.Parallel()
	c, s, _ := newCorpus(t)
	c.session("acme", "s1", inScope,
		"the support group met on Tuesday",
		"a group for support of the release",
		"support for the group's release notes")
	assert.Equal(t, []string{"s1/0"}, where(search1(t, s, search.Request{Query: `"support group"`})))
	assert.ElementsMatch(t, []string{"s1/0"}, where(search1(t, s, search.Request{Query: "support -release group"})))
	assert.ElementsMatch(t, []string{"s1/0"}, where(search1(t, s, search.Request{Query: "support -release"})))
	assert.ElementsMatch(t, []string{"s1/1"}, where(search1(t, s, search.Request{Query: `group -"support group" -notes`})))
}

// TestStopWordsFilterNothing: no index holds a stop word, so a phrase or
// an excluded term of stop words alone leaves the hits as they were, and
// a phrase's stop words are not asked of its hits.
func TestStopWordsFilterNothing(t *testing.T) {
	t.Parallel()
	c, s, _ := newCorpus(t)
	c.session("acme", "s1", inScope,
		"the deploy of the gateway failed",
		"a deploy went out",
		"rollback the gateway")
	plain := where(search1(t, s, search.Request{Query: "deploy"}))
	require.ElementsMatch(t, []string{"s1/0", "s1/1"}, plain)
	assert.Equal(t, plain, where(search1(t, s, search.Request{Query: `deploy "of the"`})))
	assert.Equal(t, plain, where(search1(t, s, search.Request{Query: "deploy -a -the"})))
	assert.Equal(t, []string{"s1/0"}, where(search1(t, s, search.Request{Query: `"deploy of the gateway"`})))
	assert.Equal(t, []string{"s1/0"}, where(search1(t, s, search.Request{Query: `"the gateway" -rollback`})))
}

func TestMemoriesRankByNameAndDescriptionAboveBody(t *testing.T) {
	t.Parallel()
	c, s, _ := newCorpus(t)
	c.memory("acme", "project:apollo", "deploy-window", "when releases may ship", "Fridays are frozen.")
	c.memory("acme", "project:apollo", "coffee", "the team's coffee order", "The deploy bot orders coffee.")
	c.memory("acme", "project:apollo", "release-train", "how a deploy is cut", "Cut from main on Mondays.")
	c.memory("acme", "project:other", "deploy-elsewhere", "another project's deploy", "deploy deploy deploy")
	hits := search1(t, s, search.Request{Query: "deploy", Source: search.SourceMemory})
	assert.Equal(t, []string{"memory:deploy-window", "memory:release-train", "memory:coffee"}, where(hits))
	assert.Empty(t, hits[0].Role)
	assert.Contains(t, hits[2].Snippet, "«deploy»")
	// Deleted: gone from the search; restored: back.
	c.exec(`UPDATE memories SET deleted_at = now() WHERE name = 'deploy-window'`)
	assert.Equal(t, []string{"memory:release-train", "memory:coffee"}, where(search1(t, s, search.Request{Query: "deploy"})))
	c.exec(`UPDATE memories SET deleted_at = NULL, body = 'Fridays are frozen for deploys.' WHERE name = 'deploy-window'`)
	assert.Equal(t, "memory:deploy-window", where(search1(t, s, search.Request{Query: "deploy"}))[0])
}

func TestRecencyBreaksTiesAndScopesBound(t *testing.T) {
	t.Parallel()
	c, s, _ := newCorpus(t)
	c.session("acme", "old", inScope, "the quokka escaped")
	c.session("acme", "new", inScope, "the quokka escaped")
	c.session("acme", "elsewhere", map[string]string{"project": "zeus"}, "the quokka escaped")
	c.session("other", "theirs", inScope, "the quokka escaped")
	c.memory("other", "project:apollo", "quokka", "a quokka", "quokka")
	assert.Equal(t, []string{"new/0", "old/0"}, where(search1(t, s, search.Request{Query: "quokka"})))
	assert.Equal(t, []string{"old/0"}, where(search1(t, s, search.Request{Query: "quokka", Session: "old"})))
	assert.Empty(t, search1(t, s, search.Request{Query: "quokka", Session: "elsewhere"}), "a session of another scope")
	assert.Equal(t, []string{"elsewhere/0"}, where(search1(t, s, search.Request{Query: "quokka", Scope: memory.Scope{Kind: memory.KindProject, ID: "zeus"}})))
	assert.Equal(t, []string{"new/0", "old/0"}, where(search1(t, s, search.Request{Query: "quokka", Scope: memory.Scope{Kind: memory.KindUser, ID: "u-1"}})))
	assert.Equal(t, []string{"memory:quokka", "theirs/0"}, where(search1(t, s, search.Request{Tenant: "other", Query: "quokka"})))
	// A deleted message leaves the index with it.
	c.exec(`DELETE FROM sessions WHERE session_id = 'new'`)
	assert.Equal(t, []string{"old/0"}, where(search1(t, s, search.Request{Query: "quokka"})))
	assert.Equal(t, []string{"old/0"}, where(search1(t, s, search.Request{Query: "quokka", Limit: 1})))
}

func TestBadRequestsAreRefusedAndCounted(t *testing.T) {
	t.Parallel()
	_, s, metrics := newCorpus(t)
	for _, tc := range []struct {
		req    search.Request
		reason string
	}{
		{search.Request{Query: "  "}, search.ReasonEmpty},
		{search.Request{Query: "-only -excluded"}, search.ReasonEmpty},
		{search.Request{Query: "x", Limit: 51}, search.ReasonBadLimit},
		{search.Request{Query: "x", Limit: -1}, search.ReasonBadLimit},
		{search.Request{Query: "x", Source: "files"}, search.ReasonBadSource},
	} {
		tc.req.Tenant, tc.req.Scope, tc.req.Caller = "acme", project, search.CallerAPI
		_, err := s.Search(context.Background(), tc.req)
		var bad *search.InputError
		require.ErrorAs(t, err, &bad, "%+v", tc.req)
		assert.Equal(t, tc.reason, bad.Reason)
	}
	assert.Equal(t, int64(5), metrics.SumAll("mnemos.search.requests", "caller", "api", "outcome", "refused"))
	// Stop words alone are no error: they find nothing.
	assert.Empty(t, search1(t, s, search.Request{Query: "the of and"}))
}

func TestFuseRanksByReciprocalRank(t *testing.T) {
	t.Parallel()
	a := search.Candidate{Source: search.SourceMemory, Memory: "a"}
	b := search.Candidate{Source: search.SourceMessage, Session: "s", Position: 1}
	c := search.Candidate{Source: search.SourceMessage, Session: "s", Position: 2}
	fused := search.Fuse([]search.Candidate{a, b, c}, []search.Candidate{c, b})
	require.Len(t, fused, 3)
	// b: 1/62 + 1/62; c: 1/63 + 1/61; a: 1/61.
	assert.Equal(t, []search.Candidate{c, b, a}, []search.Candidate{
		{Source: fused[0].Source, Session: fused[0].Session, Position: fused[0].Position},
		{Source: fused[1].Source, Session: fused[1].Session, Position: fused[1].Position},
		{Source: fused[2].Source, Memory: fused[2].Memory},
	})
	assert.InDelta(t, 1.0/63+1.0/61, fused[0].Score, 1e-12)
	assert.InDelta(t, 2.0/62, fused[1].Score, 1e-12)
}
