package gateway_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// saveSessionOf creates a session of tenant and saves it as change leaves it.
func (h *harness) saveSessionOf(t *testing.T, tenant, id, agent string, change func(*sessionstate.Session)) sessionstate.Session {
	t.Helper()
	ctx := context.Background()
	var saved sessionstate.Session
	require.NoError(t, h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		s, err := tx.LockSession(ctx, id, agent)
		if err != nil {
			return err
		}
		s.State = "ok"
		change(&s)
		if err := tx.SaveSessions(ctx, s); err != nil {
			return err
		}
		saved, err = tx.Session(ctx, id)
		return err
	}))
	return saved
}

type sessionPage struct {
	Items []struct {
		SessionID   string            `json:"session_id"`
		AgentID     string            `json:"agent_id"`
		MemoryScope map[string]string `json:"memory_scope"`
		Tokens      struct {
			Count       int64   `json:"count"`
			State       string  `json:"state"`
			PercentLeft float64 `json:"percent_left"`
		} `json:"tokens"`
		CreatedAt time.Time `json:"created_at"`
		UpdatedAt time.Time `json:"updated_at"`
	} `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

func (p sessionPage) ids() []string {
	out := []string{}
	for _, it := range p.Items {
		out = append(out, it.SessionID)
	}
	return out
}

// sessions lists sessions with query and wants 200.
func (h *harness) sessions(t *testing.T, key, query string) sessionPage {
	t.Helper()
	status, _, raw := h.call(t, "GET", "/v1/sessions"+query, key, "", nil)
	require.Equal(t, http.StatusOK, status, "%s: %s", query, raw)
	var p sessionPage
	require.NoError(t, json.Unmarshal(raw, &p), string(raw))
	require.NotNil(t, p.NextCursor, "next_cursor is always there: %s", raw)
	require.NotNil(t, p.Items, "items is a list, never null: %s", raw)
	return p
}

// TestListSessions: GET /v1/sessions lists the key's tenant's sessions and
// no other's, newest first, each as GET /v1/sessions/{id} shows it, in
// pages of ?limit= joined by an opaque cursor that stays where it was
// while sessions are created and updated; filters by state, agent, memory
// scope and update time.
func TestListSessions(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.saveSessionOf(t, "acme", "s-1", "main", func(s *sessionstate.Session) {
		s.MemoryScope = map[string]string{"user": "u-42", "project": "repo-x"}
	})
	h.saveSessionOf(t, "acme", "s-2", "explore", func(s *sessionstate.Session) { s.TokenCount, s.State = 170_000, "autocompact" })
	s3 := h.saveSessionOf(t, "acme", "s-3", "main", func(s *sessionstate.Session) {
		s.MemoryScope = map[string]string{"project": "repo-x"}
	})
	h.saveSessionOf(t, "acme", "s-4", "main", func(s *sessionstate.Session) { s.TokenCount, s.State = 180_000, "blocking" })
	h.saveSessionOf(t, "acme", "s-5", "main", func(s *sessionstate.Session) { s.TokenCount = 83_500 })
	h.saveSessionOf(t, "globex", "s-1", "main", func(*sessionstate.Session) {})
	h.saveSessionOf(t, "globex", "g-2", "main", func(*sessionstate.Session) {})

	all := h.sessions(t, "key-acme", "")
	require.Equal(t, []string{"s-5", "s-4", "s-3", "s-2", "s-1"}, all.ids(), "newest first")
	require.Empty(t, *all.NextCursor, "one page holds them all")
	require.Equal(t, "explore", all.Items[3].AgentID)
	require.Equal(t, "autocompact", all.Items[3].Tokens.State)
	require.InDelta(t, 50.0, all.Items[0].Tokens.PercentLeft, 1e-9, "the tokens status as GET /v1/sessions/{id} shows it")
	require.False(t, all.Items[0].CreatedAt.IsZero())
	require.Equal(t, []string{"g-2", "s-1"}, h.sessions(t, "key-globex", "").ids(), "a tenant sees its own sessions only")

	// Pages of 2; a session created and one updated meanwhile move no boundary.
	p1 := h.sessions(t, "key-acme", "?limit=2")
	require.Equal(t, []string{"s-5", "s-4"}, p1.ids())
	require.NotEmpty(t, *p1.NextCursor)
	h.saveSessionOf(t, "acme", "s-6", "main", func(*sessionstate.Session) {})
	h.saveSessionOf(t, "acme", "s-2", "explore", func(s *sessionstate.Session) { s.TokenCount, s.State = 171_000, "autocompact" })
	p2 := h.sessions(t, "key-acme", "?limit=2&cursor="+url.QueryEscape(*p1.NextCursor))
	require.Equal(t, []string{"s-3", "s-2"}, p2.ids(), "the next page starts where the first ended")
	p3 := h.sessions(t, "key-acme", "?limit=2&cursor="+url.QueryEscape(*p2.NextCursor))
	require.Equal(t, []string{"s-1"}, p3.ids())
	require.Empty(t, *p3.NextCursor, "the last page says so")
	require.Equal(t, []string{"s-6", "s-5"}, h.sessions(t, "key-acme", "?limit=2").ids(), "a new listing starts at the newest")

	// Filters, alone and together, paged too.
	require.Equal(t, []string{"s-4", "s-2"}, h.sessions(t, "key-acme", "?state=autocompact,blocking").ids())
	require.Equal(t, []string{"s-4", "s-2"}, h.sessions(t, "key-acme", "?state=autocompact&state=blocking").ids())
	require.Equal(t, []string{"s-2"}, h.sessions(t, "key-acme", "?agent=explore").ids())
	require.Equal(t, []string{"s-3", "s-1"}, h.sessions(t, "key-acme", "?scope=project:repo-x").ids())
	require.Equal(t, []string{"s-1"}, h.sessions(t, "key-acme", "?scope=project:repo-x&scope=user:u-42").ids())
	require.Empty(t, h.sessions(t, "key-acme", "?scope=project:repo-y").ids())
	after := "?updated_after=" + url.QueryEscape(s3.UpdatedAt.Format(time.RFC3339Nano))
	require.Equal(t, []string{"s-6", "s-5", "s-4", "s-2"}, h.sessions(t, "key-acme", after).ids(), "updated after s-3 was")
	f1 := h.sessions(t, "key-acme", after+"&state=ok&limit=1")
	require.Equal(t, []string{"s-6"}, f1.ids())
	f2 := h.sessions(t, "key-acme", after+"&state=ok&limit=1&cursor="+url.QueryEscape(*f1.NextCursor))
	require.Equal(t, []string{"s-5"}, f2.ids())
	require.Empty(t, *f2.NextCursor, "s-5 was the last to match")
	require.Equal(t, f1.ids(), h.sessions(t, "key-acme", after+"&state=ok&limit=1&cursor=").ids(), "an empty cursor is the first page")
	require.Equal(t, []string{"s-1"}, h.sessions(t, "key-globex", "?state=ok&cursor="+url.QueryEscape(mustCursor(t, h, "key-globex"))).ids())
}

// mustCursor is the cursor after the first session of key's listing.
func mustCursor(t *testing.T, h *harness, key string) string {
	t.Helper()
	p := h.sessions(t, key, "?limit=1")
	require.NotEmpty(t, *p.NextCursor)
	return *p.NextCursor
}

// scopePage is api.ScopeList with its cursor as sent: nil when absent.
type scopePage struct {
	Items      []api.ScopeSummary `json:"items"`
	NextCursor *string            `json:"next_cursor"`
}

func (p scopePage) names() []string {
	out := []string{}
	for _, it := range p.Items {
		out = append(out, it.Scope)
	}
	return out
}

func (h *harness) scopes(t *testing.T, key, query string) scopePage {
	t.Helper()
	status, _, raw := h.call(t, "GET", "/v1/scopes"+query, key, "", nil)
	require.Equal(t, http.StatusOK, status, "%s: %s", query, raw)
	var p scopePage
	require.NoError(t, json.Unmarshal(raw, &p), string(raw))
	require.NotNil(t, p.NextCursor, "next_cursor is always there: %s", raw)
	require.NotNil(t, p.Items, "items is a list, never null: %s", raw)
	return p
}

// TestListScopes: GET /v1/scopes lists the scopes of the key's tenant that
// hold memories, and no other tenant's, in name order with their counts,
// in pages that a scope created meanwhile does not shift; filters by kind
// and prefix.
func TestListScopes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	put := func(key, scope, name string) {
		t.Helper()
		status, _, raw := h.call(t, "PUT", "/v1/scopes/"+scope+"/memories/"+name, key, memoryMarkdown(name, "about "+name, "x"), nil)
		require.Equal(t, http.StatusCreated, status, string(raw))
	}
	put("key-acme", "user:u-42", "role")
	put("key-acme", "user:u-42", "style")
	put("key-acme", "project:repo-x", "deploys")
	put("key-acme", "project:repo-x", "old")
	put("key-acme", "project:repo-y", "ci")
	put("key-acme", "agent:explore", "search")
	put("key-globex", "project:secret", "plans")
	status, _, raw := h.call(t, "DELETE", "/v1/scopes/project:repo-x/memories/old", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(raw))

	all := h.scopes(t, "key-acme", "")
	require.Equal(t, []string{"agent:explore", "project:repo-x", "project:repo-y", "user:u-42"}, all.names())
	require.Empty(t, *all.NextCursor)
	x := all.Items[1]
	require.Equal(t, "project", x.Kind)
	require.Equal(t, "repo-x", x.ID)
	require.EqualValues(t, 1, x.Memories)
	require.EqualValues(t, 1, x.DeletedMemories)
	require.WithinDuration(t, time.Now(), x.UpdatedAt, time.Minute)
	require.Nil(t, x.LastConsolidatedAt, "never dreamed")
	require.EqualValues(t, 2, all.Items[3].Memories)
	require.Equal(t, []string{"project:secret"}, h.scopes(t, "key-globex", "").names(), "a tenant sees its own scopes only")

	require.Equal(t, []string{"project:repo-x", "project:repo-y"}, h.scopes(t, "key-acme", "?kind=project").names())
	require.Equal(t, []string{"project:repo-y"}, h.scopes(t, "key-acme", "?prefix=project:repo-y").names())
	require.Equal(t, []string{"project:repo-x", "project:repo-y"}, h.scopes(t, "key-acme", "?kind=project&prefix=proj").names())
	require.Empty(t, h.scopes(t, "key-acme", "?kind=user&prefix=project:").names())

	p1 := h.scopes(t, "key-acme", "?limit=2")
	require.Equal(t, []string{"agent:explore", "project:repo-x"}, p1.names())
	put("key-acme", "agent:a", "first")      // behind the cursor: not in the later pages
	put("key-acme", "project:repo-xa", "me") // ahead of it: in them
	p2 := h.scopes(t, "key-acme", "?limit=2&cursor="+url.QueryEscape(*p1.NextCursor))
	require.Equal(t, []string{"project:repo-xa", "project:repo-y"}, p2.names())
	p3 := h.scopes(t, "key-acme", "?limit=2&cursor="+url.QueryEscape(*p2.NextCursor))
	require.Equal(t, []string{"user:u-42"}, p3.names())
	require.Empty(t, *p3.NextCursor)
}

// TestListsRefuseBadQueries: a bad limit, a cursor no listing of that kind
// gave, a bad or unknown filter answer 400 with a code, counted.
func TestListsRefuseBadQueries(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.saveSessionOf(t, "acme", "s-1", "main", func(*sessionstate.Session) {})
	h.saveSessionOf(t, "acme", "s-2", "main", func(*sessionstate.Session) {})
	sessionCursor := mustCursor(t, h, "key-acme")
	scopeCursor := base64.RawURLEncoding.EncodeToString([]byte("c1:user:u-42"))
	for _, c := range []struct{ path, code string }{
		{"/v1/sessions?limit=0", "bad_limit"},
		{"/v1/sessions?limit=501", "bad_limit"},
		{"/v1/sessions?limit=ten", "bad_limit"},
		{"/v1/sessions?limit=-1", "bad_limit"},
		{"/v1/scopes?limit=1000", "bad_limit"},
		{"/v1/sessions?cursor=garbage!", "bad_cursor"},
		{"/v1/sessions?cursor=" + scopeCursor, "bad_cursor"},
		{"/v1/scopes?cursor=" + sessionCursor, "bad_cursor"},
		{"/v1/sessions?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("s1:x:s-1")), "bad_cursor"},
		{"/v1/sessions?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("s1:1:a.b")), "bad_cursor"},
		{"/v1/scopes?cursor=" + base64.RawURLEncoding.EncodeToString([]byte("c1:team:x")), "bad_cursor"},
		{"/v1/sessions?state=compacting", "bad_filter"},
		{"/v1/sessions?state=ok,", "bad_filter"},
		{"/v1/sessions?updated_after=yesterday", "bad_filter"},
		{"/v1/sessions?agent=a.b", "bad_filter"},
		{"/v1/sessions?scope=team:x", "bad_filter"},
		{"/v1/sessions?scope=project:a&scope=project:b", "bad_filter"},
		{"/v1/sessions?stat=ok", "bad_filter"},
		{"/v1/sessions?limit=1&limit=2", "bad_filter"},
		{"/v1/sessions?agent=%00", "bad_filter"},
		{"/v1/scopes?kind=team", "bad_filter"},
		{"/v1/scopes?prefix=a%20b", "bad_filter"},
		{"/v1/scopes?state=ok", "bad_filter"},
	} {
		status, _, raw := h.call(t, "GET", c.path, "key-acme", "", nil)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", c.path, raw)
		code, msg := apiError(t, raw)
		require.Equal(t, c.code, code, c.path)
		require.NotEmpty(t, msg)
	}
	require.EqualValues(t, 5, h.metrics.Sum("mnemos.requests.refused", "code", "bad_limit"))
	require.EqualValues(t, 6, h.metrics.Sum("mnemos.requests.refused", "code", "bad_cursor"))
	status, _, _ := h.call(t, "GET", "/v1/sessions", "nope", "", nil)
	require.Equal(t, http.StatusUnauthorized, status)
}
