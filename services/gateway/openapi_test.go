package gateway_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/pkg/health"
	"github.com/mnemos-ai/mnemos/services/gateway"
)

// TestEveryRouteIsDocumented walks the routes of the API port, the
// gateway's and the health endpoints every process serves beside them (as
// cmd/mnemos registers both on one mux), and compares them with
// api/openapi.yaml: a route registered and not described, or described and
// not registered, fails.
func TestEveryRouteIsDocumented(t *testing.T) {
	t.Parallel()
	gw, err := gateway.New(gateway.DefaultConfig(), nil, nil, nil, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	mux := apitest.NewRecorder()
	health.Register(mux, nil, nil)
	gw.Register(mux)
	require.NotEmpty(t, mux.Patterns())
	problems, err := apitest.CheckRoutes(mux.Patterns())
	require.NoError(t, err)
	require.Empty(t, problems, "the routes and api/openapi.yaml disagree; describe each route in the document (docs/contributing.md, Add a route):\n%s",
		strings.Join(problems, "\n"))
}

// TestServesTheDocument checks GET /openapi.json: no API key, the embedded
// document as JSON.
func TestServesTheDocument(t *testing.T) {
	t.Parallel()
	gw, err := gateway.New(gateway.DefaultConfig(), nil, nil, nil, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	mux := http.NewServeMux()
	gw.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	resp, err := apitest.Client(t).Get(srv.URL + "/openapi.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	want, err := api.OpenAPIJSON()
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(got))
}
