package apitest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompareRoutesNamesEachDisagreement(t *testing.T) {
	t.Parallel()
	ops := []Operation{{"GET", "/v1/sessions/{id}"}, {"POST", "/v1/turns"}, {"GET", "/v1/scopes"}}
	require.Empty(t, compareRoutes([]string{"POST /v1/turns", "GET /v1/sessions/{id}", "GET /v1/scopes", "/v1/"}, ops, "api/openapi.yaml"),
		"the same routes, and a fallback subtree, agree")
	require.Equal(t, []string{
		"\"/metrics\" has no method: only a fallback subtree (ending in /) may",
		"\"GET /files/{path...}\" matches a subtree: the document cannot describe it",
		"\"GET example.com/x\" names a host: the document cannot say it",
		"DELETE /v1/sessions/{id} is registered but not in api/openapi.yaml",
		"POST /v1/turns is registered twice",
		"the document describes GET /v1/scopes, which no route serves",
	}, compareRoutes([]string{
		"POST /v1/turns", "POST /v1/turns", "GET /v1/sessions/{id}", "DELETE /v1/sessions/{id}",
		"/metrics", "GET /files/{path...}", "GET example.com/x",
	}, ops, "api/openapi.yaml"))
}

// TestCompareRoutesTakesAProtocolPath: a path the document describes
// without operations (a protocol of its own, as /mcp) is served by routes
// of any method, and must be served.
func TestCompareRoutesTakesAProtocolPath(t *testing.T) {
	t.Parallel()
	ops := []Operation{{"POST", "/v1/turns"}, {AnyMethod, "/mcp"}}
	require.Empty(t, compareRoutes([]string{"POST /v1/turns", "POST /mcp", "GET /mcp"}, ops, "api/openapi.yaml"))
	require.Equal(t, []string{"the document describes /mcp, which no route serves"}, compareRoutes([]string{"POST /v1/turns"}, ops, "api/openapi.yaml"))
	require.Equal(t, []string{"POST /v2/mcp is registered but not in api/openapi.yaml"},
		compareRoutes([]string{"POST /v1/turns", "POST /mcp", "POST /v2/mcp"}, ops, "api/openapi.yaml"))
}

func TestMatchTemplate(t *testing.T) {
	t.Parallel()
	require.True(t, matchTemplate("/v1/sessions/{id}", "/v1/sessions/s-1"))
	require.True(t, matchTemplate("/v1/sessions/{id}", "/v1/sessions/a%2Fb"), "an escaped slash stays in its segment")
	require.False(t, matchTemplate("/v1/sessions/{id}", "/v1/sessions/"), "a parameter is never empty")
	require.False(t, matchTemplate("/v1/sessions/{id}", "/v1/sessions/s-1/context"))
	require.False(t, matchTemplate("/v1/sessions/{id}/context", "/v1/sessions/s-1/notes"))
}
