package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// route is one API route with its path parameters as placeholders.
type route struct {
	method, path, body string
}

// everyRoute lists every route of the API that takes a path parameter:
// {id} is a session, compaction, tool result or dream id, {scope} a scope,
// {name} a memory name, {rev} a revision.
var everyRoute = []route{
	{"GET", "/v1/sessions/{id}", ""},
	{"POST", "/v1/sessions/{id}/preflight", `{"input_messages":[]}`},
	{"GET", "/v1/tool-results/{id}", ""},
	{"GET", "/v1/sessions/{id}/context", ""},
	{"POST", "/v1/sessions/{id}/context", `{"context_management":{"edits":[{"type":"clear_tool_uses_20250919"}]}}`},
	{"POST", "/v1/sessions/{id}/compact", `{"wait":false}`},
	{"GET", "/v1/sessions/{id}/compactions", ""},
	{"GET", "/v1/compactions/{id}", ""},
	{"GET", "/v1/sessions/{id}/notes", ""},
	{"POST", "/v1/sessions/{id}/recall", `{"query":"q"}`},
	{"GET", "/v1/scopes/{scope}/memories", ""},
	{"GET", "/v1/scopes/{scope}/memories/{name}", ""},
	{"PUT", "/v1/scopes/{scope}/memories/{name}", memoryMarkdown("testing", "how to test", "run it")},
	{"DELETE", "/v1/scopes/{scope}/memories/{name}", ""},
	{"GET", "/v1/scopes/{scope}/memories/{name}/revisions", ""},
	{"GET", "/v1/scopes/{scope}/memories/{name}/revisions/{rev}", ""},
	{"POST", "/v1/scopes/{scope}/memories/{name}/revisions/{rev}/restore", ""},
	{"GET", "/v1/scopes/{scope}/memories/{name}/diff", ""},
	{"GET", "/v1/scopes/{scope}/index", ""},
	{"PUT", "/v1/scopes/{scope}/index", ""},
	{"POST", "/v1/scopes/{scope}/dream", ""},
	{"GET", "/v1/scopes/{scope}/dreams", ""},
	{"GET", "/v1/dreams/{id}", ""},
	{"POST", "/v1/dreams/{id}/kill", ""},
	{"POST", "/v1/dreams/{id}/approve", ""},
}

// badIDs are path segments no id, scope, name or revision can be.
var badIDs = map[string]string{
	"NUL":           "a\x00b",
	"invalid UTF-8": "a\xffb",
	"slash":         "a/b",
	"percent":       "a%b",
	"quote":         "a'b",
	"dot":           "a.b",
	"unicode":       "café",
	"1,000 bytes":   strings.Repeat("a", 1_000),
	"leading dash":  "-ab",
}

func fill(path, param, value string) string {
	good := map[string]string{"{id}": "0c1d9a2e-4b7f-4c8e-9d2a-5f6e7a8b9c0d", "{scope}": "user:u-42", "{name}": "testing", "{rev}": "1"}
	for p, v := range good {
		if p == param {
			v = value
		}
		path = strings.ReplaceAll(path, p, url.PathEscape(v))
	}
	return path
}

// TestEveryRouteRefusesBadIDs walks every route with every bad value in
// every path parameter: 400 with a code naming what is wrong, never 500 (a
// NUL or invalid UTF-8 reaching Postgres) and never a lookup of an id the
// message says cannot exist. The same routes with good values are not 400.
func TestEveryRouteRefusesBadIDs(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.withRecall(t, recall.Builtin)
	for _, rt := range everyRoute {
		status, _, raw := h.call(t, rt.method, fill(rt.path, "", ""), "key-acme", rt.body, nil)
		require.NotEqual(t, http.StatusBadRequest, status, "%s %s with good values: %s", rt.method, rt.path, raw)
		require.Less(t, status, 500, "%s %s with good values: %s", rt.method, rt.path, raw)
		for _, param := range []string{"{id}", "{scope}", "{name}", "{rev}"} {
			if !strings.Contains(rt.path, param) {
				continue
			}
			for what, bad := range badIDs {
				if param == "{scope}" {
					bad = "user:" + bad
				}
				path := fill(rt.path, param, bad)
				status, _, raw := h.call(t, rt.method, path, "key-acme", rt.body, nil)
				// Every failing route is reported, not only the first.
				if !assert.Equal(t, http.StatusBadRequest, status, "%s %s, %s %s: %s", rt.method, path, param, what, raw) {
					continue
				}
				code := errorCode(t, raw)
				want := map[string][]string{
					"{id}": {"bad_id"}, "{scope}": {"bad_scope"}, "{name}": {"bad_name", "out_of_scope"}, "{rev}": {"bad_request"},
				}[param]
				if param == "{id}" && strings.HasPrefix(rt.path, "/v1/sessions/") {
					want = []string{"bad_session_id"}
				}
				assert.Contains(t, want, code, "%s %s, %s %s", rt.method, path, param, what)
			}
		}
	}
	require.Positive(t, h.metrics.Sum("mnemos.requests.refused", "code", "bad_session_id"))
	require.Positive(t, h.metrics.Sum("mnemos.requests.refused", "code", "bad_id"))
}

// TestSessionIDsOfIngestAreAddressable: an id the turn schema refuses is
// refused at ingest, and an id it accepts (Claude Code's UUIDs) can be read
// back through the API.
func TestSessionIDsOfIngestAreAddressable(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, id := range []string{"a/b", "a%b", "a'b", "café", strings.Repeat("s", 129)} {
		status, body := h.do(t, "POST", "/v1/turns", "key-acme", encode(t, event(id, 1)))
		require.Equal(t, http.StatusBadRequest, status, "%q: %v", id, body)
		status, body = h.do(t, "GET", "/v1/sessions/"+url.PathEscape(id), "key-acme", nil)
		require.Equal(t, http.StatusBadRequest, status, "%q: %v", id, body)
	}
	id := "0c1d9a2e-4b7f-4c8e-9d2a-5f6e7a8b9c0d"
	status, body := h.do(t, "POST", "/v1/turns", "key-acme", encode(t, event(id, 1)))
	require.Equal(t, http.StatusAccepted, status, body)
	status, body = h.do(t, "GET", "/v1/sessions/"+id, "key-acme", nil)
	require.Equal(t, http.StatusNotFound, status, "not applied yet (no accountant here), but a valid id: %v", body)
}

// TestMemoryWriteMetadataIsBounded: the headers of a memory write are
// bounded, checked like ids and free of invalid UTF-8 and NUL; 400 naming
// the bound, never 500, and nothing stored.
func TestMemoryWriteMetadataIsBounded(t *testing.T) {
	t.Parallel()
	h := setup(t)
	doc := memoryMarkdown("testing", "how to test", "run it")
	path := "/v1/scopes/user:u-42/memories/testing"
	ids := func(n, size int) string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("e-%0*d", size-2, i)
		}
		return strings.Join(out, ",")
	}
	cases := []struct {
		name    string
		query   string
		headers map[string]string
		detail  string
	}{
		{"21 source turns", "", map[string]string{"Mnemos-Source-Turns": ids(21, 8)}, "more than 20 source turns"},
		{"a source turn of 129 bytes", "", map[string]string{"Mnemos-Source-Turns": ids(1, 129)}, "not an event id"},
		{"a source turn that is no id", "", map[string]string{"Mnemos-Source-Turns": "e-1,a/b"}, "not an event id"},
		{"a source turn not UTF-8", "", map[string]string{"Mnemos-Source-Turns": "e-\xff"}, "not an event id"},
		{"a reason not UTF-8", "", map[string]string{"Mnemos-Reason": "caf\xe9"}, "not valid UTF-8"},
		{"a reason with NUL", "?reason=a%00b", nil, "NUL"},
		{"a reason of 1,001 bytes", "", map[string]string{"Mnemos-Reason": strings.Repeat("r", 1_001)}, "limit of 1000"},
		{"a session id not UTF-8", "", map[string]string{"Mnemos-Session-Id": "s\xff"}, "session ids are"},
		{"a session id with NUL", "?session=s%00", nil, "session ids are"},
		{"a session id with a slash", "?session=a%2Fb", nil, "session ids are"},
	}
	for _, c := range cases {
		status, _, raw := h.call(t, "PUT", path+c.query, "key-acme", doc, c.headers)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", c.name, raw)
		require.Equal(t, "bad_request", errorCode(t, raw), c.name)
		require.Contains(t, string(raw), c.detail, c.name)
	}
	// Two of one header: which one counts would depend on the reader.
	req, err := http.NewRequest(http.MethodPut, h.srv.URL+path, strings.NewReader(doc))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer key-acme")
	req.Header.Add("Mnemos-Reason", "one")
	req.Header.Add("Mnemos-Reason", "two")
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", raw)

	status, _, raw := h.call(t, "GET", path, "key-acme", "", nil)
	require.Equal(t, http.StatusNotFound, status, "nothing was written: %s", raw)

	// At the bounds, the write goes through and keeps them all.
	status, _, raw = h.call(t, "PUT", path, "key-acme", doc, map[string]string{
		"Mnemos-Source-Turns": ids(20, 128), "Mnemos-Reason": strings.Repeat("r", 1_000),
	})
	require.Equal(t, http.StatusCreated, status, "%s", raw)
	status, _, raw = h.call(t, "GET", path+"/revisions", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, "%s", raw)
	rev := decode(t, raw)["revisions"].([]any)[0].(map[string]any)
	require.Len(t, rev["source_turns"], 20)
	require.Less(t, len(raw), 8<<10, "a revision's metadata is bounded")
}

func TestTwoAuthorizationHeadersAreRefused(t *testing.T) {
	t.Parallel()
	h := setup(t)
	req, err := http.NewRequest(http.MethodGet, h.srv.URL+"/v1/sessions/s1", nil)
	require.NoError(t, err)
	req.Header.Add("Authorization", "Bearer key-acme")
	req.Header.Add("Authorization", "Bearer key-globex")
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", raw)
	require.Equal(t, "ambiguous_credentials", errorCode(t, raw))
}

// TestFailedKeyChecksAreLimited: past 20 misses from one address within a
// minute, the address answers 429 with Retry-After without asking Postgres
// (closed here: asking it would answer 503); a key verified before still
// passes; a key that just missed is refused without asking Postgres.
func TestFailedKeyChecksAreLimited(t *testing.T) {
	t.Parallel()
	h := setup(t)
	status, body := h.do(t, "GET", "/v1/sessions/s1", "key-acme", nil)
	require.Equal(t, http.StatusNotFound, status, body) // the key is verified and cached

	for i := range 20 {
		status, body := h.do(t, "GET", "/v1/sessions/s1", fmt.Sprintf("wrong-%d", i), nil)
		require.Equal(t, http.StatusUnauthorized, status, "miss %d: %v", i, body)
	}
	status, body = h.do(t, "GET", "/v1/sessions/s1", "key-acme", nil)
	require.Equal(t, http.StatusNotFound, status, "a verified key still passes: %v", body)

	h.store.Close()
	req, err := http.NewRequest(http.MethodGet, h.srv.URL+"/v1/sessions/s1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer wrong-new")
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", raw)
	require.Equal(t, "too_many_key_failures", errorCode(t, raw))
	wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	require.NoError(t, err)
	require.True(t, wait >= 1 && wait <= 60, "Retry-After %d", wait)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitKeyFailures))
}

func TestARepeatedWrongKeyIsRefusedWithoutPostgres(t *testing.T) {
	t.Parallel()
	h := setup(t)
	status, body := h.do(t, "GET", "/v1/sessions/s1", "wrong", nil)
	require.Equal(t, http.StatusUnauthorized, status, body)
	h.store.Close()
	status, body = h.do(t, "GET", "/v1/sessions/s1", "wrong", nil)
	require.Equal(t, http.StatusUnauthorized, status, "the miss is remembered: %v", body)
	status, body = h.do(t, "GET", "/v1/sessions/s1", "other-wrong", nil)
	require.Equal(t, http.StatusServiceUnavailable, status, "another key is looked up: %v", body)
}

// TestPreflightRefusesWindowsWithoutRoom: a context window or max output
// that is negative, absurd, or leaves no room for the thresholds is refused
// instead of answering negative thresholds.
func TestPreflightRefusesWindowsWithoutRoom(t *testing.T) {
	t.Parallel()
	h := setup(t)
	for _, c := range []struct {
		body string
		code string
		says string
	}{
		{`{"input_messages":[],"context_window":1}`, "bad_context_window", "smallest window that works is 53001"},
		{`{"input_messages":[],"context_window":40000}`, "bad_context_window", "leaves no room"},
		{`{"input_messages":[],"context_window":-5}`, "bad_context_window", "outside"},
		{`{"input_messages":[],"context_window":100000000}`, "bad_context_window", "outside 1..2097152"},
		{`{"input_messages":[],"max_output_tokens":-1}`, "bad_max_output_tokens", "outside"},
		{`{"input_messages":[],"max_output_tokens":10000000}`, "bad_max_output_tokens", "outside"},
		{`{"input_messages":[],"context_window":200000,"context_window":1}`, string(turn.ReasonDuplicateKey), "context_window"},
	} {
		status, body := h.do(t, "POST", "/v1/sessions/s1/preflight", "key-acme", []byte(c.body))
		require.Equal(t, http.StatusBadRequest, status, "%s: %v", c.body, body)
		e := body["error"].(map[string]any)
		require.Equal(t, c.code, e["code"], c.body)
		require.Contains(t, e["message"], c.says, c.body)
	}
	for _, w := range []int64{53_001, 1_000_000, 1_047_576} {
		status, body := h.do(t, "POST", "/v1/sessions/s1/preflight", "key-acme", fmt.Appendf(nil, `{"input_messages":[],"context_window":%d}`, w))
		require.Equal(t, http.StatusOK, status, "%d: %v", w, body)
		for _, k := range []string{"warning_threshold", "error_threshold", "autocompact_threshold", "blocking_threshold"} {
			require.Positive(t, body[k], "%d: %s", w, k)
		}
	}
}

// TestDuplicateKeysAreRefused: a turn event or another JSON body naming a
// key twice is refused, counted, and never published.
func TestDuplicateKeysAreRefused(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ev := encode(t, event("s1", 1))
	twice := bytes.Replace(ev, []byte(`"session_id":"s1"`), []byte(`"session_id":"s1","tenant_id":"acme","tenant_id":"globex"`), 1)
	status, body := h.do(t, "POST", "/v1/turns", "key-acme", twice)
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Equal(t, string(turn.ReasonDuplicateKey), body["error"].(map[string]any)["code"])
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.turns.refused", "reason", string(turn.ReasonDuplicateKey)))
	info, err := h.bus.JetStream().Stream(context.Background(), h.bus.StreamName(bus.StreamTurns))
	require.NoError(t, err)
	require.Zero(t, info.CachedInfo().State.Msgs)

	status, body = h.do(t, "POST", "/v1/sessions/s1/compact", "key-acme", []byte(`{"wait":false,"instructions":"a","instructions":"b"}`))
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Equal(t, string(turn.ReasonDuplicateKey), body["error"].(map[string]any)["code"])
}

// TestAVerifiedKeyHoldsWhilePostgresIsUnreachable: with Postgres gone (its
// announcements of revoked keys with it), a key verified before it went
// still holds, as a proxied round needs to go up fail-open; a key never
// verified cannot be, and gets a 503.
func TestAVerifiedKeyHoldsWhilePostgresIsUnreachable(t *testing.T) {
	t.Parallel()
	h := setup(t)
	preflight := func(key string) (int, map[string]any) {
		return h.do(t, "POST", "/v1/sessions/s1/preflight", key, []byte(`{"input_messages":[]}`))
	}
	status, body := preflight("key-acme")
	require.Equal(t, http.StatusOK, status, body)
	h.store.Close()
	// Past the second a key is trusted for while no revocation is heard,
	// the key still opens the route (which then fails to read the session).
	time.Sleep(1100 * time.Millisecond)
	status, body = preflight("key-acme")
	require.Equal(t, http.StatusInternalServerError, status, "the key verified before: %v", body)
	require.Equal(t, "reading session failed", body["error"].(map[string]any)["message"])
	status, body = preflight("key-globex")
	require.Equal(t, http.StatusServiceUnavailable, status, "a key never verified: %v", body)
	require.Contains(t, body["error"].(map[string]any)["message"], "could not verify the API key")
}
