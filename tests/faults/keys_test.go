package faults_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestARevokedKeyIsRefusedEverywhereWithinASecond: two gateway processes
// have verified a key (an API call, a console session, an MCP call made
// with it). The key is revoked through the first: the second refuses it
// within a second, on all three, though it had it cached.
func TestARevokedKeyIsRefusedEverywhereWithinASecond(t *testing.T) {
	t.Parallel()
	s := newSystem(t, systemOptions{})
	ctx := context.Background()
	key, secret, err := s.store.CreateAPIKey(ctx, tenant, store.NewAPIKey{Name: "leaked", Scopes: []string{store.ScopeRead, store.ScopeIngest}}, "test")
	require.NoError(t, err)

	a := s.start("gateway", nil)
	b := proctest.Mnemos(t, bins, "gateway-b", s.env, "-target=gateway")

	with := func(p *proctest.Process, method, path, body string, header ...string) int {
		req, err := http.NewRequestWithContext(ctx, method, p.URL()+path, strings.NewReader(body))
		require.NoError(t, err)
		for i := 0; i < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	apiCall := func(p *proctest.Process) int {
		return with(p, http.MethodGet, "/v1/sessions", "", "Authorization", "Bearer "+secret)
	}
	mcpCall := func(p *proctest.Process) int {
		return with(p, http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			"X-Api-Key", secret, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	}

	// A console session on b, signed in with the key.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := browser.PostForm(b.URL()+"/console/login", url.Values{"key": {secret}, "next": {"/console/sessions"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed in")
	consolePage := func() (int, string) {
		resp, err := browser.Get(b.URL() + "/console/sessions")
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}

	for _, p := range []*proctest.Process{a, b} {
		require.Equal(t, http.StatusOK, apiCall(p))
		require.Equal(t, http.StatusOK, mcpCall(p))
	}
	status, _ := consolePage()
	require.Equal(t, http.StatusOK, status, "the console session holds")

	// Revoked through a's API by the tenant's administrator.
	start := time.Now()
	require.Equal(t, http.StatusOK, with(a, http.MethodDelete, "/v1/keys/"+key.ID, "", "Authorization", "Bearer "+apiKey))
	for apiCall(b) != http.StatusUnauthorized {
		require.Less(t, time.Since(start), 5*time.Second, "b still takes the revoked key")
		time.Sleep(10 * time.Millisecond)
	}
	refused := time.Since(start)
	t.Logf("b refused the revoked key %s after the revocation's answer", refused)
	require.Less(t, refused, time.Second, "within a second of the revocation")
	require.Equal(t, http.StatusUnauthorized, apiCall(a))
	require.Equal(t, http.StatusUnauthorized, mcpCall(b), "MCP calls made with the key end")
	status, location := consolePage()
	require.Equal(t, http.StatusSeeOther, status, "the console session ends")
	require.Equal(t, "/console/login?ended=key", location)
	status, _ = consolePage()
	require.Equal(t, http.StatusSeeOther, status, "and stays ended: its cookie is cleared")

	// The tenant's other keys stand.
	require.Equal(t, http.StatusOK, with(b, http.MethodGet, "/v1/sessions", "", "Authorization", "Bearer "+apiKey))
}
