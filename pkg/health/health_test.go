package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/health"
)

func get(t *testing.T, h http.Handler, path string) (int, map[string]any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	var body map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	return rec.Code, body
}

func TestReadyOnlyWhenEveryCheckPasses(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	down := errors.New("connection refused")
	broken := true
	mux := http.NewServeMux()
	health.Register(mux, map[string]health.Check{
		"postgres": st.Ping,
		"nats": func(context.Context) error {
			if broken {
				return down
			}
			return nil
		},
	}, map[string]string{"compactor": "idle"})

	code, body := get(t, mux, "/healthz")
	require.Equal(t, http.StatusOK, code, "alive even when a dependency is down")
	require.Equal(t, "idle", body["targets"].(map[string]any)["compactor"])

	code, body = get(t, mux, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, map[string]any{"nats": "connection refused"}, body["failed"])

	broken = false
	code, _ = get(t, mux, "/readyz")
	require.Equal(t, http.StatusOK, code)
}
