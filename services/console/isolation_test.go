package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// acmeData is what tenant A has, for the other tenant to try to reach.
type acmeData struct {
	session, scope, memory, dreamID string
}

func makeAcme(t *testing.T, h *harness) acmeData {
	t.Helper()
	d := acmeData{session: "acme-secret-session", scope: "project:acme-secret", memory: "acme_release_day"}
	h.makeSession(t, tenantA, keyA, d.session)
	h.makeMemory(t, keyA, d.scope, d.memory)
	d.dreamID = h.makeProposal(t, tenantA, d.scope, d.memory)
	return d
}

// fill puts A's ids into a route's pattern and returns the method and path.
func (d acmeData) fill(pattern string) (string, string) {
	method, path, _ := strings.Cut(pattern, " ")
	path = strings.NewReplacer(
		"{id}", url.PathEscape(pickID(path, d)),
		"{scope}", url.PathEscape(d.scope),
		"{name}", url.PathEscape(d.memory),
	).Replace(path)
	return method, path
}

func pickID(path string, d acmeData) string {
	if strings.HasPrefix(path, "/console/dreams/") {
		return d.dreamID
	}
	return d.session
}

// TestTenantIsolation walks every signed-in console route with tenant A's
// ids: A reaches each one, tenant B (signed in with its own key and
// holding a valid CSRF token of its own) reaches none, sees none of A's
// names in any list or search, and changes nothing.
func TestTenantIsolation(t *testing.T) {
	h := setup(t)
	d := makeAcme(t, h)
	a := h.signIn(t, keyA)
	b := h.signIn(t, keyB)

	routes := h.console.routes()
	require.NotEmpty(t, routes)
	secrets := []string{d.session, d.scope, d.memory, d.dreamID}
	for _, r := range routes {
		method, path := d.fill(r.pattern)
		t.Run(method+" "+r.pattern, func(t *testing.T) {
			var status int
			var body string
			if method == http.MethodPost {
				form := url.Values{"csrf": {b.csrf}, "revision": {"1"}}
				status, body = b.post(t, path, form)
			} else {
				status, body = b.get(t, path)
			}
			switch {
			case strings.Contains(r.pattern, "{"):
				require.Equal(t, http.StatusNotFound, status, "tenant B reached %s %s: %s", method, path, body)
			case method == http.MethodPost:
				require.Equal(t, http.StatusBadRequest, status, "a form of B's own without its fields: %s", body)
			default:
				require.Equal(t, http.StatusOK, status, body)
			}
			for _, s := range secrets {
				require.NotContains(t, body, s, "tenant B's page %s shows tenant A's %s", path, s)
			}
			if method == http.MethodGet {
				status, body := a.get(t, path)
				require.Equal(t, http.StatusOK, status, "tenant A cannot open its own %s: %s", path, body)
			}
		})
	}
	// A's session cannot be found by id either.
	status, body := b.get(t, "/console/sessions?q="+d.session)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "No session")

	// Nor by search: A's scope searched by B is not found, with A's words
	// and of either source. In a scope both tenants use (A's session names
	// project:console; B keeps a memory there), B's search lists B's
	// memory alone and A's lists A's session, never B's memory.
	for _, source := range []string{"", "memory", "message"} {
		status, body = searchPage(t, b, d.scope, "releases thursdays", source)
		require.Equal(t, http.StatusNotFound, status, body)
		status, body = searchPage(t, b, "project:console", "refactor parser releases", source)
		require.Equal(t, http.StatusNotFound, status, "B has nothing in project:console yet: %s", body)
	}
	h.putMemory(t, keyB, "project:console", "globex_parser", "the parser refactor", "Refactor the parser; releases go out on Thursdays.")
	status, body = searchPage(t, b, "project:console", "refactor parser releases thursdays", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, []string{"memory /console/memories/project:console/globex_parser"}, renderedHits(body))
	for _, s := range secrets {
		require.NotContains(t, body, s, "tenant B's search shows tenant A's %s", s)
	}
	status, body = searchPage(t, a, "project:console", "refactor parser releases thursdays", "")
	require.Equal(t, http.StatusOK, status, body)
	hits := renderedHits(body)
	require.NotEmpty(t, hits)
	for _, hit := range hits {
		require.True(t, strings.HasPrefix(hit, "message /console/sessions/"+d.session+"#m"), "tenant A's search lists %s", hit)
	}
	require.NotContains(t, body, "globex_parser")
	status, body = searchPage(t, a, d.scope, "releases thursdays", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, []string{"memory /console/memories/" + d.scope + "/" + d.memory}, renderedHits(body))

	// Nothing of A's changed: the memory is at revision 2, the dream still a proposal.
	var m struct {
		Revision int64 `json:"revision"`
	}
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/scopes/"+d.scope+"/memories/"+d.memory, keyA, "", &m))
	require.Equal(t, int64(2), m.Revision)
	var dr struct {
		Status string `json:"status"`
	}
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/dreams/"+d.dreamID, keyA, "", &dr))
	require.Equal(t, "proposed", dr.Status)
}

// TestCSRF refuses every form posted without the session's token: none, a
// wrong one, another tenant's, or no session at all (a cross-site post
// carries no cookie under SameSite=Strict, and could not read a token).
func TestCSRF(t *testing.T) {
	h := setup(t)
	scope, name := "project:csrf", "release_day"
	h.makeMemory(t, keyA, scope, name)
	dreamID := h.makeProposal(t, tenantA, scope, name)
	a := h.signIn(t, keyA)
	b := h.signIn(t, keyB)
	anonymous := &browserless{h: h, client: &http.Client{CheckRedirect: a.client.CheckRedirect}}

	restore := "/console/memories/" + url.PathEscape(scope) + "/" + name + "/restore"
	approve := "/console/dreams/" + dreamID + "/approve"
	reject := "/console/dreams/" + dreamID + "/reject"
	for _, c := range []struct {
		name string
		as   *browserless
		csrf string
	}{
		{"no token", a, ""},
		{"a wrong token", a, "not-a-token"},
		{"another session's token", a, b.csrf},
		{"no session", anonymous, a.csrf},
	} {
		t.Run(c.name, func(t *testing.T) {
			form := url.Values{"revision": {"1"}}
			if c.csrf != "" {
				form.Set("csrf", c.csrf)
			}
			status, _ := c.as.post(t, restore, form)
			require.Equal(t, http.StatusForbidden, status)
			status, _ = c.as.post(t, approve, form)
			require.Equal(t, http.StatusForbidden, status)
			status, _ = c.as.post(t, reject, form)
			require.Equal(t, http.StatusForbidden, status)
			status, _ = c.as.post(t, "/console/logout", form)
			require.Equal(t, http.StatusForbidden, status)
		})
	}
	var m struct {
		Revision int64 `json:"revision"`
	}
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/scopes/"+scope+"/memories/"+name, keyA, "", &m))
	require.Equal(t, int64(2), m.Revision, "a refused form changed the memory")

	var dr struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/dreams/"+dreamID, keyA, "", &dr))
	require.Equal(t, "proposed", dr.Status, "a refused form changed the dream")

	// With its token each form works: the proposal is rejected, applying
	// nothing, and cannot be approved after.
	status, _ := a.post(t, reject, url.Values{"csrf": {a.csrf}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/dreams/"+dreamID, keyA, "", &dr))
	require.Equal(t, "killed", dr.Status)
	require.Contains(t, dr.Error, "rejected")
	status, _ = a.post(t, approve, url.Values{"csrf": {a.csrf}})
	require.Equal(t, http.StatusConflict, status)
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/scopes/"+scope+"/memories/"+name, keyA, "", &m))
	require.Equal(t, int64(2), m.Revision, "the rejected proposal deleted nothing")

	status, _ = a.post(t, restore, url.Values{"revision": {"1"}, "csrf": {a.csrf}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/scopes/"+scope+"/memories/"+name, keyA, "", &m))
	require.Equal(t, int64(3), m.Revision)
}

// TestSignIn covers the session cookie: a bad key signs nobody in, pages
// send a signed-out browser to sign in, a forged cookie counts for
// nothing, and the answers carry the strict CSP.
func TestSignIn(t *testing.T) {
	h := setup(t)
	anon := &browserless{h: h, client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	status, body := anon.post(t, "/console/login", url.Values{"key": {"not-a-key"}})
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, body, "unknown, revoked or expired API key")

	resp, err := anon.client.Get(h.srv.URL + "/console/sessions")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Location"), "/console/login"))
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")

	a := h.signIn(t, keyA)
	u, err := url.Parse(h.srv.URL + "/console/")
	require.NoError(t, err)
	cookies := a.client.Jar.Cookies(u)
	require.Len(t, cookies, 1)
	// Another tenant's name in a cookie signed with A's signature is refused.
	v, err := h.console.verify(cookies[0].Value)
	require.NoError(t, err)
	require.Equal(t, tenantA, v.tenant)
	forged := strings.Replace(cookies[0].Value, cookies[0].Value[:strings.Index(cookies[0].Value, ".")], "Z2xvYmV4", 1) // base64("globex")
	_, err = h.console.verify(forged)
	require.Error(t, err)

	// Signed out, the cookie is gone and pages ask to sign in again.
	status, _ = a.post(t, "/console/logout", url.Values{"csrf": {a.csrf}})
	require.Equal(t, http.StatusSeeOther, status)
	status, _ = a.get(t, "/console/sessions")
	require.Equal(t, http.StatusSeeOther, status)
}

// TestSafeNext keeps the sign-in form's redirect inside the console.
func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/console/sessions/abc?x=1": "/console/sessions/abc?x=1",
		"":                          "/console/sessions",
		"https://evil.example/":     "/console/sessions",
		"//evil.example/console/":   "/console/sessions",
		"/v1/sessions":              "/console/sessions",
		"/console/\\evil":           "/console/sessions",
	} {
		require.Equal(t, want, safeNext(in), in)
	}
}

// TestSharedSecret: consoles given one secret (gateway replicas) accept
// each other's cookies and CSRF tokens; another secret accepts neither,
// and a short one is refused.
func TestSharedSecret(t *testing.T) {
	secret := []byte(strings.Repeat("k", MinSecretBytes))
	one, err := New(Config{Secret: secret})
	require.NoError(t, err)
	two, err := New(Config{Secret: secret})
	require.NoError(t, err)
	other, err := New(Config{})
	require.NoError(t, err)
	s := signedIn{tenant: tenantA, key: "ab12", nonce: newNonce(), expires: time.Now().Add(time.Hour)}
	got, err := two.verify(one.sign(s))
	require.NoError(t, err)
	require.Equal(t, tenantA, got.tenant)
	require.Equal(t, "ab12", got.key, "the session names its key")
	require.Equal(t, one.csrfToken(s), two.csrfToken(got))
	_, err = other.verify(one.sign(s))
	require.Error(t, err)
	require.NotEqual(t, one.csrfToken(s), other.csrfToken(s))
	// An expired session counts for nothing.
	_, err = one.verify(one.sign(signedIn{tenant: tenantA, key: "ab12", nonce: newNonce(), expires: time.Now().Add(-time.Second)}))
	require.Error(t, err)
	_, err = New(Config{Secret: []byte("short")})
	require.Error(t, err)
}
