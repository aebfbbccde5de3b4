package gateway_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// searchPath is the search route of scope for query and the other
// parameters (name, value pairs).
func searchPath(scope, query string, params ...string) string {
	v := url.Values{"q": {query}}
	for i := 0; i < len(params); i += 2 {
		v.Set(params[i], params[i+1])
	}
	return "/v1/scopes/" + url.PathEscape(scope) + "/search?" + v.Encode()
}

// hitsOf lists an answer's hits as "session/position" or "memory:name".
func hitsOf(t *testing.T, body map[string]any) []string {
	t.Helper()
	var out []string
	for _, raw := range body["hits"].([]any) {
		h := raw.(map[string]any)
		if h["source"] == "memory" {
			out = append(out, "memory:"+h["memory"].(string))
			continue
		}
		out = append(out, h["session"].(string)+"/"+strconv.FormatInt(int64(h["position"].(float64)), 10))
	}
	return out
}

func TestSearchRanksTheScopeForItsTenantAlone(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	acc := h.accountant(t)
	require.NoError(t, acc.Apply(ctx, round("acme", "s1", 1, "the flaky test is TestQuokkaMigration", "")))
	require.NoError(t, acc.Apply(ctx, round("acme", "s2", 1, "a flaky network", "")))
	require.NoError(t, acc.Apply(ctx, round("globex", "g1", 1, "TestQuokkaMigration is flaky for globex too", "")))
	status, body := h.do(t, "PUT", "/v1/scopes/project:repo-x/memories/flaky-tests", "key-acme",
		[]byte(memoryMarkdown("flaky-tests", "Which tests are flaky", "TestQuokkaMigration times out under load.")))
	require.Equal(t, http.StatusCreated, status, body)

	status, body = h.do(t, "GET", searchPath("project:repo-x", "Which test is flaky: TestQuokkaMigration?"), "key-acme", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "project:repo-x", body["scope"])
	require.Equal(t, "Which test is flaky: TestQuokkaMigration?", body["query"])
	require.Equal(t, []string{"memory:flaky-tests", "s1/0", "s2/0"}, hitsOf(t, body))
	hit := body["hits"].([]any)[1].(map[string]any)
	require.Equal(t, "user", hit["role"])
	require.Contains(t, hit["snippet"], "«TestQuokkaMigration»")

	status, body = h.do(t, "GET", searchPath("project:repo-x", "flaky", "source", "message", "limit", "1"), "key-acme", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, hitsOf(t, body), 1)
	status, body = h.do(t, "GET", searchPath("project:repo-x", "flaky", "session", "s2"), "key-acme", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, []string{"s2/0"}, hitsOf(t, body))

	// Another tenant's scope of the same name answers that tenant's own
	// rows only, by name or by search; the session of another tenant
	// answers nothing.
	status, body = h.do(t, "GET", searchPath("project:repo-x", "TestQuokkaMigration flaky"), "key-globex", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, []string{"g1/0"}, hitsOf(t, body))
	status, body = h.do(t, "GET", searchPath("project:repo-x", "flaky", "session", "s1"), "key-globex", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Empty(t, hitsOf(t, body))
	status, body = h.do(t, "GET", searchPath("project:repo-x", "globex"), "key-acme", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Empty(t, hitsOf(t, body))
	status, _ = h.do(t, "GET", searchPath("project:repo-x", "flaky"), "", nil)
	require.Equal(t, http.StatusUnauthorized, status)
}

func TestSearchRefusesBadRequests(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, tc := range []struct{ path, code string }{
		{searchPath("project:repo-x", "  "), "empty_query"},
		{searchPath("project:repo-x", "-only -excluded"), "empty_query"},
		{"/v1/scopes/project:repo-x/search", "empty_query"},
		{searchPath("project:repo-x", strings.Repeat("a ", 260)), "query_too_long"},
		{searchPath("project:repo-x", "x", "limit", "0"), "bad_limit"},
		{searchPath("project:repo-x", "x", "limit", "51"), "bad_limit"},
		{searchPath("project:repo-x", "x", "limit", "ten"), "bad_limit"},
		{searchPath("project:repo-x", "x", "source", "files"), "bad_source"},
		{searchPath("project:repo-x", "x", "session", "../s1"), "bad_session_id"},
		{searchPath("galaxy:far", "x"), "bad_scope"},
	} {
		status, body := h.do(t, "GET", tc.path, "key-acme", nil)
		require.Equal(t, http.StatusBadRequest, status, tc.path)
		require.Equal(t, tc.code, body["error"].(map[string]any)["code"], tc.path)
	}
}
