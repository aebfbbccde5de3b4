package apitest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api/apitest"
)

// session is a GET /v1/sessions/{id} answer as the gateway writes it.
const session = `{"session_id":"s1","agent_id":"main","model":"claude-sonnet-4-5","applied_seq":3,"messages":7,` +
	`"tokens":{"count":1200,"state":"ok","percent_left":99.3,"window":200000,"effective_window":180000,"warning_threshold":147000,` +
	`"error_threshold":147000,"autocompact_threshold":167000,"blocking_threshold":177000},"compaction_in_flight":false,` +
	`"auto_compact_enabled":true,"auto_compact":true,"compact_requests":0,"thrash_held":0,"tool_calls_total":2,"rejected_turns":0,"skipped_seqs":0,"created_at":"2026-11-22T09:00:00Z","updated_at":"2026-11-22T10:00:00Z"}`

const notFound = `{"error":{"code":"not_found","message":"no session s1"}}`

func answer(status int, contentType, body string, headers ...string) *http.Response {
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: http.NoBody}
}

// TestValidatorHoldsAnswersToTheDocument: the answers the document allows
// pass, and each way an answer can break it fails, so a test whose answer
// drifts from the document fails too.
func TestValidatorHoldsAnswersToTheDocument(t *testing.T) {
	t.Parallel()
	v, err := apitest.Default()
	require.NoError(t, err)
	require.NoError(t, v.Document(), "api/openapi.yaml is a valid OpenAPI 3.1 document")

	get := httptest.NewRequest(http.MethodGet, "http://mnemos/v1/sessions/s1", nil)
	cases := []struct {
		name    string
		req     *http.Request
		status  int
		ctype   string
		body    string
		headers []string
		wrong   string // "" when the answer is allowed; else what the error names
	}{
		{name: "a session", req: get, status: 200, ctype: "application/json", body: session},
		{name: "no session", req: get, status: 404, ctype: "application/json", body: notFound},
		{name: "a field the document does not name", req: get, status: 200, ctype: "application/json",
			body: strings.Replace(session, `"messages":7,`, `"messages":7,"secret":"x",`, 1), wrong: "secret"},
		{name: "a required field missing", req: get, status: 200, ctype: "application/json",
			body: strings.Replace(session, `"applied_seq":3,`, ``, 1), wrong: "applied_seq"},
		{name: "a wrong type", req: get, status: 200, ctype: "application/json",
			body: strings.Replace(session, `"messages":7`, `"messages":"7"`, 1), wrong: "messages"},
		{name: "a state not in the enum", req: get, status: 200, ctype: "application/json",
			body: strings.Replace(session, `"state":"ok"`, `"state":"fine"`, 1), wrong: "state"},
		{name: "not a date-time", req: get, status: 200, ctype: "application/json",
			body: strings.Replace(session, `"2026-11-22T10:00:00Z"`, `"yesterday"`, 1), wrong: "date-time"},
		{name: "a status the operation does not list", req: get, status: 418, ctype: "application/json", body: notFound, wrong: "418"},
		{name: "an error body of another shape", req: get, status: 404, ctype: "application/json",
			body: `{"error":"not_found"}`, wrong: "error"},
		{name: "another content type", req: get, status: 200, ctype: "text/plain", body: session, wrong: "text/plain"},
		{name: "429 with Retry-After", req: get, status: 429, ctype: "application/json",
			body: `{"error":{"code":"too_many_key_failures","message":"retry later"}}`, headers: []string{"Retry-After", "12"}},
		{name: "429 without Retry-After", req: get, status: 429, ctype: "application/json",
			body: `{"error":{"code":"too_many_key_failures","message":"retry later"}}`, wrong: "Retry-After"},
		{name: "a path the document does not list, 404", req: httptest.NewRequest(http.MethodGet, "http://mnemos/v1/nothing", nil),
			status: 404, ctype: "application/json", body: `{"error":{"code":"not_found","message":"no route for GET /v1/nothing"}}`},
		{name: "a method the document does not list, 405", req: httptest.NewRequest(http.MethodPut, "http://mnemos/v1/sessions/s1", nil),
			status: 405, ctype: "application/json", body: `{"error":{"code":"method_not_allowed","message":"PUT is not allowed"}}`},
		{name: "a path the document does not list, 200", req: httptest.NewRequest(http.MethodGet, "http://mnemos/v1/nothing", nil),
			status: 200, ctype: "application/json", body: `{}`, wrong: "not 404 or 405"},
		{name: "a path the document does not list, no Error body", req: httptest.NewRequest(http.MethodGet, "http://mnemos/v1/nothing", nil),
			status: 404, ctype: "text/plain", body: "404 page not found", wrong: "Content-Type"},
		{name: "markdown where the document allows it", req: httptest.NewRequest(http.MethodGet, "http://mnemos/v1/scopes/user:u-1/index", nil),
			status: 200, ctype: "text/markdown; charset=utf-8", body: "- [a](a.md) — A\n", headers: []string{"ETag", `"3"`}},
		{name: "an ETag that is no revision", req: httptest.NewRequest(http.MethodGet, "http://mnemos/v1/scopes/user:u-1/index", nil),
			status: 200, ctype: "text/markdown; charset=utf-8", body: "- [a](a.md) — A\n", headers: []string{"ETag", `W/"x"`}, wrong: "etag"},
	}
	for _, c := range cases {
		err := v.Check(c.req, answer(c.status, c.ctype, c.body, c.headers...), []byte(c.body))
		if c.wrong == "" {
			require.NoError(t, err, c.name)
			continue
		}
		require.Error(t, err, c.name)
		require.Contains(t, err.Error(), c.wrong, c.name)
	}
}

// TestTransportFailsTheTest: an answer the document does not allow fails
// the test that received it.
func TestTransportFailsTheTest(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"session_id":"s1"}`))
	}))
	t.Cleanup(srv.Close)
	inner := &recorder{TB: t}
	resp, err := (&http.Client{Transport: apitest.Transport(inner, nil)}).Get(srv.URL + "/v1/sessions/s1")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, inner.errors, 1)
	require.Contains(t, inner.errors[0], "does not allow")
	require.Contains(t, inner.errors[0], "missing properties")
}

// recorder is a testing.TB that records its errors instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
