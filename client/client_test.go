package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/client"
)

// TestEveryOperationHasAMethod: each operation of api/openapi.yaml has the
// client method named after its operationId, and each of the operator
// API's (api/admin-openapi.yaml) has client.Admin's, so a route added to a
// document without one fails here.
func TestEveryOperationHasAMethod(t *testing.T) {
	t.Parallel()
	requireMethods(t, api.OpenAPIJSON, reflect.TypeFor[*client.Client](), 20)
	requireMethods(t, api.AdminOpenAPIJSON, reflect.TypeFor[*client.Admin](), 15)
}

// requireMethods checks that typ has a method for each operationId of the
// document, which has more than least operations.
func requireMethods(t *testing.T, document func() ([]byte, error), typ reflect.Type, least int) {
	t.Helper()
	raw, err := document()
	require.NoError(t, err)
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	n := 0
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			var op struct {
				OperationID string `json:"operationId"`
			}
			require.NoError(t, json.Unmarshal(raw, &op))
			require.NotEmpty(t, op.OperationID, "%s %s has no operationId", method, path)
			name := strings.ToUpper(op.OperationID[:1]) + op.OperationID[1:]
			_, ok := typ.MethodByName(name)
			require.True(t, ok, "%s %s (%s) has no method %s.%s", method, path, op.OperationID, typ, name)
			n++
		}
	}
	require.Greater(t, n, least)
}

// TestErrorsCarryTheAnswer: an error answer is an *Error with the API's
// code and message and the Retry-After; a body that is no error body is
// kept as the message.
func TestErrorsCarryTheAnswer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/v1/sessions/busy":
			require.Equal(t, "Bearer k-1", r.Header.Get("Authorization"))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":{"code":"rate_limited","message":"slow down"}}`))
		case "/v1/sessions/a%2Fb":
			w.WriteHeader(http.StatusTeapot)
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html>proxy error</html>"))
		}
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL+"/", "k-1")
	ctx := context.Background()

	_, err := c.GetSession(ctx, "busy")
	e, ok := client.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, client.Error{Status: 429, Code: "rate_limited", Message: "slow down", RetryAfter: 7 * time.Second}, *e)
	require.Equal(t, "mnemos: 429 rate_limited: slow down", err.Error())
	require.False(t, client.IsNotFound(err))

	_, err = c.GetSession(ctx, "other")
	e, ok = client.AsError(err)
	require.True(t, ok)
	require.Equal(t, client.Error{Status: 502, Message: "<html>proxy error</html>", RetryAfter: -1}, *e)

	_, err = c.GetSession(ctx, "a/b")
	e, ok = client.AsError(err)
	require.True(t, ok)
	require.Equal(t, http.StatusTeapot, e.Status, "a slash in an id stays in its segment")
	require.Equal(t, "(empty body)", e.Message)

	srv.Close()
	_, err = c.GetSession(ctx, "busy")
	require.Error(t, err)
	_, ok = client.AsError(err)
	require.False(t, ok, "no answer is no *Error")
}
