package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
)

// withRecall gives the gateway a Recaller whose selector is handler.
func (h *harness) withRecall(t *testing.T, handler builtin.Handler) {
	t.Helper()
	mem, err := memory.NewStore(h.store, nil, memory.Options{})
	require.NoError(t, err)
	r, err := recall.New(h.store, mem, builtin.New(map[llm.Task]builtin.Handler{llm.TaskRecall: handler}),
		func(context.Context, string) (recall.Settings, error) { return recall.DefaultSettings(), nil }, h.metrics.Meter(), recall.Options{})
	require.NoError(t, err)
	h.gw.UseRecall(r)
}

func TestRecallThroughTheAPI(t *testing.T) {
	t.Parallel()
	h := setup(t)
	status, _, raw := h.call(t, "POST", "/v1/sessions/s1/recall", "key-acme", `{"query": "staging database"}`, nil)
	require.Equal(t, http.StatusServiceUnavailable, status, "no selector in this process")
	require.Equal(t, "recall_unavailable", errorCode(t, raw))

	h.withRecall(t, recall.Builtin)
	status, _, raw = h.call(t, "PUT", "/v1/scopes/project:repo-x/memories/staging-db-read-only-fridays", "key-acme",
		memoryMarkdown("staging-db-read-only-fridays", "The staging database is read-only on Fridays", "Wait for Monday."), nil)
	require.Equal(t, http.StatusCreated, status, string(raw))
	h.saveSession(t, "s1", func(s *sessionstate.Session) { s.MemoryScope = map[string]string{"project": "repo-x"} })

	status, _, raw = h.call(t, "POST", "/v1/sessions/s1/recall", "key-acme", `{"query": "can you run the migration on the staging database?", "recent_tools": ["Bash"]}`, nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	got := decode(t, raw)
	require.Equal(t, "surfaced", got["outcome"])
	mems := got["memories"].([]any)
	require.Len(t, mems, 1)
	m := mems[0].(map[string]any)
	require.Equal(t, "project:repo-x", m["scope"])
	require.Equal(t, "staging-db-read-only-fridays", m["name"])
	require.Equal(t, "feedback", m["type"])
	require.Equal(t, "today", m["age"])
	require.Equal(t, false, m["stale"])
	require.True(t, strings.HasPrefix(m["text"].(string), "<system-reminder>\n"), "the text is served as it is, < unescaped: %s", raw)
	require.Contains(t, string(raw), `"text":"<system-reminder>`)
	require.Equal(t, "builtin", got["llm_provider"])

	// Before its first turn, a session is recalled for by the scope it names.
	status, _, raw = h.call(t, "POST", "/v1/sessions/new-one/recall", "key-acme", `{"query": "staging database migration"}`, nil)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "not_found", errorCode(t, raw))
	status, _, raw = h.call(t, "POST", "/v1/sessions/new-one/recall", "key-acme", `{"query": "staging database migration", "memory_scope": {"project": "repo-x"}}`, nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	require.Equal(t, "surfaced", decode(t, raw)["outcome"])

	// Another tenant's key sees nothing of acme's memories or sessions.
	status, _, _ = h.call(t, "POST", "/v1/sessions/s1/recall", "key-globex", `{"query": "staging database migration"}`, nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _, raw = h.call(t, "POST", "/v1/sessions/s1/recall", "key-globex", `{"query": "staging database migration", "memory_scope": {"project": "repo-x"}}`, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "none", decode(t, raw)["outcome"])
	require.EqualValues(t, 0, decode(t, raw)["candidates"])
}

func TestBadRecallRequestsAreRefusedAndCounted(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.withRecall(t, recall.Builtin)
	h.saveSession(t, "s1", func(s *sessionstate.Session) { s.MemoryScope = map[string]string{"project": "repo-x"} })
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"bad json", "/v1/sessions/s1/recall", `{"query":`, 400, "bad_json"},
		{"unknown field", "/v1/sessions/s1/recall", `{"query": "a b", "limit": 3}`, 400, "bad_json"},
		{"empty query", "/v1/sessions/s1/recall", `{"query": "  "}`, 400, "bad_request"},
		{"bad tool name", "/v1/sessions/s1/recall", `{"query": "a b", "recent_tools": ["Bash, Read"]}`, 400, "bad_request"},
		{"too many tools", "/v1/sessions/s1/recall", `{"query": "a b", "recent_tools": [` + strings.TrimSuffix(strings.Repeat(`"T",`, 65), ",") + `]}`, 400, "bad_request"},
		{"bad scope", "/v1/sessions/s1/recall", `{"query": "a b", "memory_scope": {"team": "x"}}`, 400, "bad_scope"},
		{"bad scope id", "/v1/sessions/s1/recall", `{"query": "a b", "memory_scope": {"project": "../x"}}`, 400, "bad_scope"},
		{"bad session id", "/v1/sessions/s.1/recall", `{"query": "a b"}`, 400, "bad_session_id"},
		{"too large", "/v1/sessions/s1/recall", `{"query": "` + strings.Repeat("x", 70_000) + `"}`, 413, "too_large"},
	} {
		status, _, raw := h.call(t, "POST", tc.path, "key-acme", tc.body, nil)
		require.Equal(t, tc.status, status, "%s: %s", tc.name, raw)
		require.Equal(t, tc.code, errorCode(t, raw), tc.name)
	}
	require.EqualValues(t, 9, h.metrics.Sum("mnemos.recall.requests", "outcome", "refused"))
}

func TestAFailingSelectorIsABadGateway(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.withRecall(t, func(context.Context, llm.Request) (llm.Response, error) {
		return llm.Response{}, &llm.Error{Kind: llm.KindServer, Err: errors.New("overloaded")}
	})
	status, _, raw := h.call(t, "PUT", "/v1/scopes/project:repo-x/memories/a", "key-acme", memoryMarkdown("a", "Staging facts", "x"), nil)
	require.Equal(t, http.StatusCreated, status, string(raw))
	status, _, raw = h.call(t, "POST", "/v1/sessions/s1/recall", "key-acme", `{"query": "staging facts", "memory_scope": {"project": "repo-x"}}`, nil)
	require.Equal(t, http.StatusBadGateway, status, string(raw))
	require.Equal(t, "recall_failed", errorCode(t, raw))
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.recall.requests", "outcome", "failed"))
}
