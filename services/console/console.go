// Package console is Mnemos's web console, served by the gateway at
// /console/: a tenant's sessions with their token timeline, memories with
// their revisions, each scope's search, dreams and model usage. Pages are
// rendered on the server with html/template and work without JavaScript;
// only the token chart runs a script (the vendored uPlot). Every read goes through pkg/store in the
// signed-in tenant's transaction, and every change through the services
// the API uses, so row-level security and the memory checks apply alike.
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/search"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Prefix is where the console is mounted.
const Prefix = "/console/"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// csp allows the console's own scripts and styles only: no inline script,
// no inline style sheet, no requests but to itself, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// KeyChecker checks API keys as the API's routes do; *httpapi.Keys is one.
// Grant resolves a key at sign-in, or says why not (the refusal's status
// and message); ByHash tells, at each request of a session, whether its
// key still holds (store.ErrNotFound when it was revoked or expired).
type KeyChecker interface {
	Grant(w http.ResponseWriter, r *http.Request, key string) (store.KeyGrant, *httpapi.Error)
	ByHash(ctx context.Context, hash string) (store.KeyGrant, error)
}

// Config is what the console reads and changes through.
type Config struct {
	Store    *store.Store
	Settings *tenantcfg.Cache
	Memories *memory.Store
	Dreams   *dream.Dreams
	// Search answers a scope page's search box: the gateway's searcher,
	// so the box ranks as GET /v1/scopes/{scope}/search does (nil shows
	// no box).
	Search *search.Searcher
	Keys   KeyChecker
	// Eraser erases a session or a scope for a tenant administrator.
	Eraser *erasure.Eraser
	// Secret signs session cookies and CSRF tokens (at least
	// MinSecretBytes); empty makes a random one, so sessions end when the
	// process does and are not shared between replicas.
	Secret []byte
	// SessionTTL is how long a sign-in lasts (8 hours when 0).
	SessionTTL time.Duration
	// ContextListBytes bounds the stored context a session page reads to
	// list its messages (8 MiB when 0): a larger one is left to GET
	// /v1/sessions/{id}/context, which the gateway's admission paces.
	ContextListBytes int64
	Now              func() time.Time
	Log              *slog.Logger
}

// MinSecretBytes is the shortest Config.Secret taken.
const MinSecretBytes = 32

// Console serves the pages.
type Console struct {
	cfg    Config
	secret []byte
	now    func() time.Time
	pages  map[string]*template.Template
	static http.Handler
}

// New builds the console and parses its templates.
func New(cfg Config) (*Console, error) {
	c := &Console{cfg: cfg, secret: cfg.Secret, now: cfg.Now}
	if c.now == nil {
		c.now = time.Now
	}
	if c.cfg.SessionTTL <= 0 {
		c.cfg.SessionTTL = 8 * time.Hour
	}
	if c.cfg.ContextListBytes <= 0 {
		c.cfg.ContextListBytes = 8 << 20
	}
	if c.cfg.Log == nil {
		c.cfg.Log = slog.Default()
	}
	if len(c.secret) == 0 {
		c.secret = make([]byte, MinSecretBytes)
		_, _ = rand.Read(c.secret)
	}
	if len(c.secret) < MinSecretBytes {
		return nil, fmt.Errorf("console.New: the secret is %d bytes; give at least %d", len(c.secret), MinSecretBytes)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("console.New: %w", err)
	}
	c.pages = pages
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("console.New: %w", err)
	}
	c.static = http.StripPrefix(Prefix+"static/", http.FileServerFS(sub))
	return c, nil
}

// pageNames are the templates that are whole pages (each with layout.html).
var pageNames = []string{"login", "sessions", "session", "scopes", "scope", "memory", "dreams", "dream", "usage", "keys", "error"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"when": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"pathEscape": url.PathEscape,
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

// Mux is where Register adds the routes (httpapi.Mux satisfies it).
type Mux interface {
	Handle(pattern string, handler http.Handler)
}

// Register adds the console's routes under Prefix.
func (c *Console) Register(mux Mux) {
	mux.Handle("GET /console/{$}", c.headers(http.HandlerFunc(c.home)))
	mux.Handle("GET /console/static/", c.headers(c.static))
	mux.Handle("GET /console/login", c.headers(http.HandlerFunc(c.loginForm)))
	mux.Handle("POST /console/login", c.headers(http.HandlerFunc(c.login)))
	mux.Handle("POST /console/logout", c.post(c.logout))
	for _, r := range c.routes() {
		if r.post {
			mux.Handle(r.pattern, c.post(r.handle))
		} else {
			mux.Handle(r.pattern, c.page(r.handle))
		}
	}
}

// route is one signed-in page or form of the console.
type route struct {
	pattern string
	post    bool
	handle  func(http.ResponseWriter, *http.Request, signedIn)
}

// routes lists the console's signed-in routes; the isolation test walks it.
func (c *Console) routes() []route {
	return []route{
		{"GET /console/sessions", false, c.sessions},
		{"GET /console/sessions/{id}", false, c.sessionPage},
		{"GET /console/memories", false, c.scopes},
		{"GET /console/memories/{scope}", false, c.scopePage},
		{"GET /console/memories/{scope}/{name}", false, c.memoryPage},
		{"POST /console/memories/{scope}/{name}/restore", true, c.restore},
		{"GET /console/dreams", false, c.dreams},
		{"GET /console/dreams/{id}", false, c.dreamPage},
		{"POST /console/dreams/{id}/approve", true, c.approve},
		{"POST /console/dreams/{id}/reject", true, c.reject},
		{"GET /console/usage", false, c.usage},
		{"GET /console/keys", false, c.keys},
		{"POST /console/keys", true, c.makeKey},
		{"POST /console/keys/{id}/revoke", true, c.revokeKey},
		{"POST /console/keys/{id}/rotate", true, c.rotateKey},
		{"POST /console/sessions/{id}/erase", true, c.eraseSession},
		{"POST /console/memories/{scope}/erase", true, c.eraseScope},
		{"GET /console/exports/memories/{scope}", false, c.exportScope},
		{"GET /console/exports/sessions/{id}", false, c.exportSession},
	}
}

// headers sets what every console answer carries: the strict CSP, no
// sniffing, no framing, no referrer, and no caching of pages.
func (c *Console) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if !strings.HasPrefix(r.URL.Path, Prefix+"static/") {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// page runs a signed-in GET; without a session it sends the browser to sign in.
func (c *Console) page(next func(http.ResponseWriter, *http.Request, signedIn)) http.Handler {
	return c.headers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.session(r)
		if !ok {
			http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if s.grant, ok = c.keyHolds(w, r, s); !ok {
			return
		}
		next(w, r, s)
	}))
}

// post runs a signed-in form: a session and its CSRF token are required,
// and a cross-site request has neither, so it is refused with 403.
func (c *Console) post(next func(http.ResponseWriter, *http.Request, signedIn)) http.Handler {
	return c.headers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		s, ok := c.session(r)
		if !ok {
			c.fail(w, r, signedIn{}, http.StatusForbidden, "Sign in first: this form needs a console session.")
			return
		}
		if !c.checkCSRF(r, s) {
			c.fail(w, r, s, http.StatusForbidden, "The form's CSRF token is missing or not this session's; reload the page and try again.")
			return
		}
		if s.grant, ok = c.keyHolds(w, r, s); !ok {
			return
		}
		next(w, r, s)
	}))
}

// keyHolds reports whether the session's key is still active, else ends
// the session and sends the browser to sign in again (or answers 503 when
// the key cannot be checked).
func (c *Console) keyHolds(w http.ResponseWriter, r *http.Request, s signedIn) (store.KeyGrant, bool) {
	grant, err := c.cfg.Keys.ByHash(r.Context(), s.key)
	switch {
	case err == nil:
		return grant, true
	case errors.Is(err, store.ErrNotFound):
		clearSession(w, r)
		http.Redirect(w, r, Prefix+"login?ended=key", http.StatusSeeOther)
	default:
		c.cfg.Log.Error("console: checking a session's API key", "err", err)
		c.fail(w, r, signedIn{}, http.StatusServiceUnavailable, "Could not check this session's API key; try again.")
	}
	return store.KeyGrant{}, false
}

// view is what every page template gets.
type view struct {
	Title  string
	Nav    string // the section of the menu that is current
	Tenant string
	CSRF   string
	Flash  string
	Admin  bool // the session's key holds the admin scope
	Data   any
}

// render writes a page, or a 500 when its template fails (before any byte
// is sent, so a half page is never shown).
func (c *Console) render(w http.ResponseWriter, status int, name string, v view) {
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, v); err != nil {
		c.cfg.Log.Error("console: rendering a page failed", "page", name, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// signedView is a page's view for a signed-in tenant.
func (c *Console) signedView(s signedIn, nav, title string, data any) view {
	return view{Title: title, Nav: nav, Tenant: s.tenant, CSRF: c.csrfToken(s), Admin: s.grant.Has(store.ScopeAdmin), Data: data}
}

// fail renders the error page with a message for people.
func (c *Console) fail(w http.ResponseWriter, _ *http.Request, s signedIn, status int, msg string) {
	v := view{Title: http.StatusText(status), Data: msg}
	if s.tenant != "" {
		v = c.signedView(s, "", http.StatusText(status), msg)
	}
	c.render(w, status, "error", v)
}

// internal logs err and renders a 500 that does not show it.
func (c *Console) internal(w http.ResponseWriter, r *http.Request, s signedIn, what string, err error) {
	c.cfg.Log.Error("console: "+what+" failed", "tenant", s.tenant, "err", err)
	c.fail(w, r, s, http.StatusInternalServerError, "Something failed while "+what+"; it was logged. Try again.")
}

func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.session(r); ok {
		http.Redirect(w, r, Prefix+"sessions", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// loginData is the sign-in form's.
type loginData struct {
	Next  string
	Error string
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	c.render(w, http.StatusOK, "login", view{Title: "Sign in", Data: loginData{Next: safeNext(r.URL.Query().Get("next"))}})
}

// login checks the API key through the gateway's key path (its cache and
// failure limit) and starts a session for its tenant.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	key := strings.TrimSpace(r.PostFormValue("key"))
	next := safeNext(r.PostFormValue("next"))
	if key == "" {
		c.render(w, http.StatusUnauthorized, "login", view{Title: "Sign in", Data: loginData{Next: next, Error: "Enter an API key."}})
		return
	}
	grant, refused := c.cfg.Keys.Grant(w, r, key)
	if refused == nil {
		refused = httpapi.MissingScope(grant, store.ScopeRead)
	}
	if refused != nil {
		c.render(w, refused.Status, "login", view{Title: "Sign in", Data: loginData{Next: next, Error: "Not signed in: " + refused.Message + "."}})
		return
	}
	c.setSession(w, r, signedIn{tenant: grant.Tenant, key: httpapi.KeyHash(key), nonce: newNonce(), expires: c.now().Add(c.cfg.SessionTTL)})
	http.Redirect(w, r, next, http.StatusSeeOther) //nolint:gosec // safeNext keeps it a path under /console/
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ signedIn) {
	clearSession(w, r)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// safeNext keeps a post-sign-in redirect inside the console, so the
// sign-in form cannot be used to send a browser elsewhere.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix + "sessions"
	}
	return next
}
