package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHealthcheckCommand is the container health check of the image.
func TestHealthcheckCommand(t *testing.T) {
	t.Parallel()
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/readyz", r.URL.Path)
		if !ready {
			http.Error(w, `{"status":"unavailable"}`, http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	vars := map[string]string{"MNEMOS_HTTP_ADDR": ":" + port}
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"healthcheck"}, env(vars), &out, &out))
	ready = false
	require.ErrorContains(t, run(t.Context(), []string{"healthcheck"}, env(vars), &out, &out), "503")
	require.ErrorContains(t, run(t.Context(), []string{"healthcheck", "http://127.0.0.1:1/readyz"}, env(nil), &out, &out), "connection refused")
}
