package gateway_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
)

// errorOf decodes an error answer into its code and message.
func apiError(t *testing.T, raw []byte) (code, message string) {
	t.Helper()
	e, _ := decode(t, raw)["error"].(map[string]any)
	require.NotNil(t, e, string(raw))
	code, _ = e["code"].(string)
	message, _ = e["message"].(string)
	return code, message
}

// TestSessionRoutesAnswer404ForASessionThatDoesNotExist: every route under
// /v1/sessions/{id} that reads a session answers 404 not_found "no session
// <id>" when there is none, as GET /v1/sessions/{id} does, instead of an
// empty list or "no notes yet"; a session that exists keeps its answers
// (an empty list, no notes yet). Another tenant's session does not exist.
func TestSessionRoutesAnswer404ForASessionThatDoesNotExist(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.saveSession(t, "exists", func(*sessionstate.Session) {})
	for _, path := range []string{"/v1/sessions/nope", "/v1/sessions/nope/compactions", "/v1/sessions/nope/notes", "/v1/sessions/nope/context"} {
		status, _, raw := h.call(t, "GET", path, "key-acme", "", nil)
		require.Equal(t, http.StatusNotFound, status, "%s: %s", path, raw)
		code, msg := apiError(t, raw)
		require.Equal(t, "not_found", code, path)
		require.Equal(t, "no session nope", msg, path)
	}
	for _, path := range []string{"/v1/sessions/exists/compactions", "/v1/sessions/exists/notes"} {
		status, _, raw := h.call(t, "GET", path, "key-globex", "", nil)
		require.Equal(t, http.StatusNotFound, status, "%s: %s", path, raw)
		_, msg := apiError(t, raw)
		require.Equal(t, "no session exists", msg, "another tenant's session is no session: %s", path)
	}

	status, _, raw := h.call(t, "GET", "/v1/sessions/exists/compactions", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	require.Empty(t, decode(t, raw)["compactions"])
	status, _, raw = h.call(t, "GET", "/v1/sessions/exists/notes", "key-acme", "", nil)
	require.Equal(t, http.StatusNotFound, status, string(raw))
	code, msg := apiError(t, raw)
	require.Equal(t, "not_found", code)
	require.Contains(t, msg, "has no notes yet")
}

// TestAWrongMethodIs405WithAllow: a path the API serves, asked with a
// method it does not serve there, answers 405 method_not_allowed with an
// Allow header listing the methods it does serve; a path it does not serve
// stays 404 not_found, whatever the method.
func TestAWrongMethodIs405WithAllow(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, c := range []struct{ method, path, allow string }{
		{"PUT", "/v1/sessions/x", "GET, HEAD, PATCH, DELETE"},
		{"GET", "/v1/scopes/user:u-42", "DELETE"},
		{"GET", "/v1/turns", "POST"},
		{"PUT", "/v1/sessions/x/compact", "POST"},
		{"POST", "/v1/scopes/user:u-42/memories/a", "GET, HEAD, PUT, DELETE"},
		{"PATCH", "/v1/scopes/user:u-42/index", "GET, HEAD, PUT"},
		{"DELETE", "/v1/dreams/d-1/kill", "POST"},
	} {
		status, hdr, raw := h.call(t, c.method, c.path, "key-acme", "", nil)
		require.Equal(t, http.StatusMethodNotAllowed, status, "%s %s: %s", c.method, c.path, raw)
		require.Equal(t, c.allow, hdr.Get("Allow"), "%s %s", c.method, c.path)
		code, msg := apiError(t, raw)
		require.Equal(t, "method_not_allowed", code)
		require.Contains(t, msg, c.method+" "+c.path)
		require.Contains(t, msg, c.allow)
	}
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/nothing"},
		{"DELETE", "/v1/nothing/here"},
		{"GET", "/v1/sessions/x/unknown"},
		{"GET", "/v1/"},
	} {
		status, hdr, raw := h.call(t, c.method, c.path, "key-acme", "", nil)
		require.Equal(t, http.StatusNotFound, status, "%s %s: %s", c.method, c.path, raw)
		require.Empty(t, hdr.Get("Allow"))
		code, _ := apiError(t, raw)
		require.Equal(t, "not_found", code)
	}
}
