package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/gateway/proxy"
)

// answer is one response: status, error code and message, Retry-After.
type answer struct {
	status        int
	code, message string
	retryAfter    string
}

// send sends a request whose body is r (nil: none) with size as its
// Content-Length (-1: unknown, sent chunked) and reads the answer.
func (h *harness) send(t *testing.T, method, path, key string, r io.Reader, size int64) answer {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, r)
	require.NoError(t, err)
	if r != nil {
		req.ContentLength = size
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out api.ErrorBody
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	_ = json.Unmarshal(data, &out) // success bodies have no error
	return answer{status: resp.StatusCode, code: out.Error.Code, message: out.Error.Message, retryAfter: resp.Header.Get("Retry-After")}
}

// unsent sends only a request's head, announcing a body of size bytes that
// never comes, and reads the answer: an answer arrives only when the
// gateway decided without reading the body.
func (h *harness) unsent(t *testing.T, method, path, key string, size int) answer {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
	require.NoError(t, err)
	defer func() { _ = conn.Close() }() // the answer is read; nothing to report
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", method, path, key, size)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "an answer before the body was sent")
	defer resp.Body.Close()
	var out api.ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return answer{status: resp.StatusCode, code: out.Error.Code, message: out.Error.Message, retryAfter: resp.Header.Get("Retry-After")}
}

// held starts a turn whose body arrives only when the returned func is
// called: the request stays in flight until then. Its answer comes on the channel.
func (h *harness) held(t *testing.T, key, session string, size int64) (finish func(), answers <-chan answer) {
	t.Helper()
	pr, pw := io.Pipe()
	out := make(chan answer, 1)
	go func() { out <- h.send(t, http.MethodPost, "/v1/turns", key, pr, size) }()
	body := encode(t, event(session, 1))
	if size >= 0 {
		require.EqualValues(t, len(body), size, "the held turn's Content-Length")
	}
	return func() {
		_, _ = pw.Write(body)
		_ = pw.Close()
	}, out
}

// inFlight waits until the gateway's gauge shows want bytes in flight.
func (h *harness) inFlight(t *testing.T, want int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		n, _ := h.metrics.Gauge("mnemos.gateway.inflight_bytes", "", "")
		return n == want
	}, 10*time.Second, 10*time.Millisecond, "bytes in flight")
}

func TestExpensiveRequestsPastTheTenantsLimitAre429BeforeTheBodyIsRead(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.store.SetTenantSettings(ctx, "acme", []byte(`{"limits": {"concurrent_requests": 2}}`)))

	size := int64(len(encode(t, event("s1", 1))))
	var finish []func()
	var answers []<-chan answer
	for _, s := range []string{"s1", "s2"} {
		f, a := h.held(t, "key-acme", s, size)
		finish, answers = append(finish, f), append(answers, a)
	}
	h.inFlight(t, 2*4*size) // both admitted, each reserving its body four times

	// The third: its body never comes, so only an answer decided before
	// reading it can arrive. Every expensive route shares the limit.
	for _, path := range []string{"/v1/turns", "/v1/sessions/s1/preflight", "/v1/sessions/s1/import", "/v1/scopes/user:u-1/import"} {
		a := h.unsent(t, http.MethodPost, path, "key-acme", 1000)
		require.Equal(t, http.StatusTooManyRequests, a.status, path)
		require.Equal(t, limits.ReasonTooManyRequests, a.code)
		require.Contains(t, a.message, "concurrent_requests")
		require.Contains(t, a.message, "2 expensive requests")
		secs, err := strconv.Atoi(a.retryAfter)
		require.NoError(t, err, "Retry-After is whole seconds: %q", a.retryAfter)
		require.Positive(t, secs)
	}
	for _, path := range []string{"/v1/sessions/s1/context", "/v1/sessions/s1/recall", "/v1/sessions/s1/compact", "/v1/sessions/s1/export", "/v1/scopes/user:u-1/export"} {
		method := http.MethodPost
		if strings.HasSuffix(path, "context") || strings.HasSuffix(path, "export") {
			method = http.MethodGet
		}
		a := h.send(t, method, path, "key-acme", nil, 0)
		require.Equal(t, http.StatusTooManyRequests, a.status, path)
	}
	require.EqualValues(t, 9, h.metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitConcurrentRequests))

	// Another tenant is not held back; cheap routes of the same tenant neither.
	require.Equal(t, http.StatusAccepted, h.send(t, http.MethodPost, "/v1/turns", "key-globex", strings.NewReader(string(encode(t, event("g1", 1)))), -1).status)
	require.Equal(t, http.StatusNotFound, h.send(t, http.MethodGet, "/v1/sessions/nope", "key-acme", nil, 0).status)

	// Once the held requests are answered, the tenant's slots are free again.
	for i, f := range finish {
		f()
		require.Equal(t, http.StatusAccepted, (<-answers[i]).status)
	}
	h.inFlight(t, 0)
	require.Equal(t, http.StatusAccepted, h.send(t, http.MethodPost, "/v1/turns", "key-acme", strings.NewReader(string(encode(t, event("s3", 1)))), -1).status)
}

func TestTheInflightBudgetAnswers503BeforeTheHeapGrows(t *testing.T) {
	t.Parallel()
	// Event bodies up to 256 KiB: one of unknown length reserves 4 × 256 KiB,
	// the whole budget.
	h := setupWith(t, func(c *gateway.Config) { c.MaxInflightBytes = 1 << 20 })

	finish, answered := h.held(t, "key-acme", "s1", -1)
	h.inFlight(t, 1<<20)

	// Another tenant's turn, however small, does not fit now: 503, before
	// its body is read.
	a := h.unsent(t, http.MethodPost, "/v1/turns", "key-globex", 100)
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, limits.ReasonOverloaded, a.code)
	require.Contains(t, a.message, "MNEMOS_MAX_INFLIGHT_BYTES")
	require.Equal(t, "1", a.retryAfter)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitInflightBytes))

	finish()
	require.Equal(t, http.StatusAccepted, (<-answered).status)
	h.inFlight(t, 0)
	body := encode(t, event("g1", 1))
	require.Equal(t, http.StatusAccepted, h.send(t, http.MethodPost, "/v1/turns", "key-globex", strings.NewReader(string(body)), int64(len(body))).status)
}

func TestARequestLargerThanTheWholeBudgetIs413(t *testing.T) {
	t.Parallel()
	h := setupWith(t, func(c *gateway.Config) { c.MaxInflightBytes = 512 << 10 })
	a := h.unsent(t, http.MethodPost, "/v1/turns", "key-acme", 200<<10)
	require.Equal(t, http.StatusRequestEntityTooLarge, a.status)
	require.Equal(t, string(turn.ReasonTooLarge), a.code)
	require.Contains(t, a.message, "whole budget")
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitInflightBytes))
}

func TestHeavyRequestsBeyondTheirSlotsAre503(t *testing.T) {
	t.Parallel()
	// Every request is heavy here, and one is served at a time.
	h := setupWith(t, func(c *gateway.Config) {
		c.HeavyRequests, c.HeavyBytes, c.HeavyWait = 1, 1, 300*time.Millisecond
	})
	ctx := context.Background()
	for tenant, session := range map[string]string{"acme": "s1", "globex": "g1"} {
		require.NoError(t, h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			_, err := tx.LockSession(ctx, session, turn.MainAgent)
			return err
		}))
	}
	// acme's session is at its blocking limit with a compaction in flight:
	// its context request renders again and again while it waits.
	_, err := pgtest.Admin(t, h.store).Exec(ctx, "UPDATE sessions SET token_count = 10000000, compaction_in_flight = true WHERE tenant_id = 'acme'")
	require.NoError(t, err)
	waiting := make(chan answer, 1)
	go func() { waiting <- h.send(t, http.MethodGet, "/v1/sessions/s1/context?wait=3s", "key-acme", nil, 0) }()
	require.Eventually(t, func() bool {
		n, _ := h.metrics.Gauge("mnemos.gateway.inflight_bytes", "", "")
		return n > 0
	}, 10*time.Second, 10*time.Millisecond)

	a := h.send(t, http.MethodGet, "/v1/sessions/g1/context", "key-globex", nil, 0)
	require.Equal(t, http.StatusServiceUnavailable, a.status)
	require.Equal(t, limits.ReasonOverloaded, a.code)
	require.Contains(t, a.message, "heavy request")
	require.NotEmpty(t, a.retryAfter)

	require.Equal(t, "compaction_pending", (<-waiting).code)
	require.Equal(t, http.StatusOK, h.send(t, http.MethodGet, "/v1/sessions/g1/context", "key-globex", nil, 0).status)
}

// anthropicAnswer reads an answer in the Messages API's error shape.
func anthropicAnswer(t *testing.T, resp *http.Response) (status int, kind, message, retryAfter string) {
	t.Helper()
	defer resp.Body.Close()
	var out struct {
		Type  string `json:"type"`
		Error struct {
			Type, Message string
		} `json:"error"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, "error", out.Type)
	return resp.StatusCode, out.Error.Type, out.Error.Message, resp.Header.Get("Retry-After")
}

// TestMessagesAPIRequestsAreAdmittedLikeTheOthers: a Messages API request
// counts against its tenant's concurrent_requests while its body is read
// and managed, and against the process's budget; a refusal comes before the
// body is read, in the Messages API's error shape.
func TestMessagesAPIRequestsAreAdmittedLikeTheOthers(t *testing.T) {
	t.Parallel()
	up := llmtest.NewAnthropicServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Text("answered") })
	h := setupWith(t, func(c *gateway.Config) {
		c.Upstream = proxy.Upstream{URL: up.URL, Key: "upstream-key"}
		c.MaxInflightBytes = 4 << 20 // a body of up to 1 MiB fits
	})
	ctx := context.Background()
	require.NoError(t, h.store.SetTenantSettings(ctx, "acme", []byte(`{"limits": {"concurrent_requests": 1}}`)))

	// acme's one slot is held by a request whose body is still coming.
	body := `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`
	pr, pw := io.Pipe()
	held := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/messages", pr)
		req.ContentLength = int64(len(body))
		req.Header.Set("x-api-key", "key-acme")
		req.Header.Set("X-Mnemos-Session", "held")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			held <- resp
		}
		close(held)
	}()
	h.inFlight(t, 4*int64(len(body)))

	conn := func(size int) *http.Response {
		c, err := net.Dial("tcp", strings.TrimPrefix(h.srv.URL, "http://"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
		_, err = fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: gateway\r\nx-api-key: key-acme\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "an answer before the body was sent")
		return resp
	}
	status, kind, message, retry := anthropicAnswer(t, conn(1000))
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "rate_limit_error", kind)
	require.Contains(t, message, "concurrent_requests")
	require.Equal(t, "1", retry)
	require.Equal(t, http.StatusTooManyRequests, h.unsent(t, http.MethodPost, "/v1/turns", "key-acme", 1000).status,
		"turns and Messages API requests share the tenant's limit")

	_, _ = pw.Write([]byte(body))
	_ = pw.Close()
	resp := <-held
	require.NotNil(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the held request is answered once its body came")
	_ = resp.Body.Close()
	h.inFlight(t, 0)

	// A body larger than the whole budget can hold: 413 before it is read.
	status, kind, message, _ = anthropicAnswer(t, conn(2<<20))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, "request_too_large", kind)
	require.Contains(t, message, "MNEMOS_MAX_INFLIGHT_BYTES")
}
