package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// cookieName is the console's session cookie. The __Host- prefix would
// pin it to a secure origin, which a plain-HTTP development server is not.
const cookieName = "mnemos_console"

// signedIn is a verified console session: the tenant its key named, the
// key's hash (httpapi.KeyHash: a session ends when its key is revoked or
// expires) and the nonce its CSRF tokens are derived from.
type signedIn struct {
	tenant  string
	key     string
	nonce   string
	expires time.Time
	grant   store.KeyGrant // what the key holds now: read at each request, never kept in the cookie
}

// sign makes a cookie value: tenant, expiry, nonce and key hash, then an
// HMAC of them under the console's secret, so a client can read but not
// forge it.
func (c *Console) sign(s signedIn) string {
	payload := base64.RawURLEncoding.EncodeToString([]byte(s.tenant)) + "." +
		strconv.FormatInt(s.expires.Unix(), 10) + "." + s.nonce + "." + s.key
	return payload + "." + c.mac("session", payload)
}

// mac is the HMAC-SHA256 of purpose and msg under the secret; purpose keeps
// a session signature from passing as a CSRF token and back.
func (c *Console) mac(purpose, msg string) string {
	h := hmac.New(sha256.New, c.secret)
	h.Write([]byte(purpose + "\x00" + msg))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

var errBadCookie = errors.New("console: bad session cookie")

// verify reads a cookie value back, refusing a forged, malformed or expired one.
func (c *Console) verify(v string) (signedIn, error) {
	parts := strings.Split(v, ".")
	if len(parts) != 5 {
		return signedIn{}, errBadCookie
	}
	payload := strings.Join(parts[:4], ".")
	if !hmac.Equal([]byte(parts[4]), []byte(c.mac("session", payload))) {
		return signedIn{}, errBadCookie
	}
	tenant, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return signedIn{}, errBadCookie
	}
	unix, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return signedIn{}, errBadCookie
	}
	s := signedIn{tenant: string(tenant), expires: time.Unix(unix, 0), nonce: parts[2], key: parts[3]}
	if !c.now().Before(s.expires) || s.tenant == "" || s.key == "" {
		return signedIn{}, errBadCookie
	}
	return s, nil
}

// csrfToken is the token every form of a signed-in page carries: derived
// from the session's nonce, so it is worth nothing in another session.
func (c *Console) csrfToken(s signedIn) string { return c.mac("csrf", s.nonce) }

// checkCSRF reports whether a POST carries its session's token. The
// cookie is SameSite=Strict already; the token also refuses a same-site
// page that posts without having read one.
func (c *Console) checkCSRF(r *http.Request, s signedIn) bool {
	got := r.PostFormValue("csrf")
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(c.csrfToken(s))) == 1
}

// newNonce is a fresh random session nonce.
func newNonce() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// setSession writes the signed session cookie: HttpOnly (no script reads
// it), SameSite=Strict (no cross-site request carries it), and Secure when
// the browser reached the console over TLS (here or at a proxy): a
// development server on plain HTTP must still be able to sign in.
func (c *Console) setSession(w http.ResponseWriter, r *http.Request, s signedIn) {
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // Secure whenever the request came over TLS; see above
		Name: cookieName, Value: c.sign(s), Path: Prefix, Expires: s.expires,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	})
}

// overTLS reports whether the browser's request came over TLS, to this
// server or to a proxy in front of it.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// clearSession removes the cookie (sign out).
func clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{ //nolint:gosec // as setSession
		Name: cookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	})
}

// session reads the request's console session, if any.
func (c *Console) session(r *http.Request) (signedIn, bool) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return signedIn{}, false
	}
	s, err := c.verify(ck.Value)
	return s, err == nil
}
