package httpapi

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/ttlcache"
)

// The headers an agent's client sends on the routes made for agents (the
// model proxy, /mcp): which session and memory scope a request is about,
// and the API key the way Anthropic clients send it.
const (
	// HeaderUser and HeaderProject name the memory scopes user:<id> and
	// project:<id>.
	HeaderUser    = "X-Mnemos-User"
	HeaderProject = "X-Mnemos-Project"
	// HeaderAgentSession names the agent's session (a memory write names
	// its session in HeaderSession instead); Claude Code sends
	// HeaderClaudeCodeSession by itself.
	HeaderAgentSession      = "X-Mnemos-Session"
	HeaderClaudeCodeSession = "X-Claude-Code-Session-Id"
	// HeaderAPIKey carries the API key when Authorization does not.
	HeaderAPIKey = "X-Api-Key" //nolint:gosec // a header name, not a credential
)

// KeysConfig sets how API keys are checked.
type KeysConfig struct {
	// CacheTTL is how long a verified key is trusted without asking
	// Postgres, and how long a key that failed is refused without asking.
	CacheTTL time.Duration
	// Failures failed checks from one client address within FailureWindow
	// make the address answer 429 until the window ends (0: no limit).
	Failures      int
	FailureWindow time.Duration
	// Now is the guard's clock (time.Now when nil).
	Now func() time.Time
}

// Keys resolves API keys to what they grant (their tenant and scopes) for
// every front door: the API, the model proxy, MCP and the console. A key
// verified is kept for CacheTTL, and forgotten at once when Postgres
// announces it changed (Listen); while no announcement can be heard, for
// at most unheardTTL, unless Postgres cannot be asked at all: then a key
// holds for CacheTTL after Postgres last verified it.
type Keys struct {
	cfg       KeysConfig
	st        *store.Store
	limits    *limits.Limiter
	log       *slog.Logger
	cache     *ttlcache.Cache[store.KeyGrant] // hex of the key's hash → grant, while listening
	unheard   *ttlcache.Cache[store.KeyGrant] // the same, while not
	guard     *keyGuard
	refused   metric.Int64Counter
	started   atomic.Bool
	listening atomic.Bool
	touched   sync.Map // key id → time.Time of the last use recorded
	verified  sync.Map // hex of the key's hash → verifiedGrant: Postgres's last answer

	watchMu  sync.Mutex
	watchers []func(hash string)
}

// unheardTTL bounds how long a process that hears no announcement of keys
// revoked trusts a key it verified: a revocation holds within it.
const unheardTTL = time.Second

// NewKeys checks keys with st, recording an address blocked for its
// failures on lim (which may be nil) and counting refused requests on meter
// (mnemos.requests.refused).
func NewKeys(cfg KeysConfig, st *store.Store, lim *limits.Limiter, log *slog.Logger, meter metric.Meter) (*Keys, error) {
	refused, err := meter.Int64Counter("mnemos.requests.refused", metric.WithDescription("Requests the gateway refused for a bad id, header or credential, by error code."))
	if err != nil {
		return nil, fmt.Errorf("httpapi.NewKeys: %w", err)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Keys{
		cfg: cfg, st: st, limits: lim, log: log, refused: refused,
		cache:   ttlcache.New[store.KeyGrant](cfg.CacheTTL, 10_000),
		unheard: ttlcache.New[store.KeyGrant](min(cfg.CacheTTL, unheardTTL), 10_000),
		guard:   newKeyGuard(cfg.Failures, cfg.FailureWindow, cfg.CacheTTL, cfg.Now),
	}, nil
}

// Listen keeps the process hearing of keys revoked, expiring sooner,
// rescoped or deleted anywhere (store.ListenKeys), and forgets each, until
// ctx ends. When its connection fails it forgets every key, trusts a key
// for at most unheardTTL meanwhile, and listens again a second later. A
// process listens once: a second call waits for ctx.
func (k *Keys) Listen(ctx context.Context) {
	if !k.started.CompareAndSwap(false, true) {
		<-ctx.Done()
		return
	}
	for ctx.Err() == nil {
		err := k.st.ListenKeys(ctx, func() {
			k.cache.ForgetAll() // what was announced before this was not heard
			k.verified.Clear()
			k.listening.Store(true)
			k.announce("")
		}, func(hash string) {
			k.cache.Forget(hash)
			k.unheard.Forget(hash)
			k.verified.Delete(hash)
			k.announce(hash)
		})
		k.listening.Store(false)
		if err != nil && ctx.Err() == nil {
			k.log.Warn("not hearing of revoked API keys; checking every request in Postgres meanwhile", "err", err)
		}
		if ctx.Err() == nil {
			k.announce("") // once a second while not hearing
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// Watch has f called with the hash (KeyHash) of every key Postgres
// announces changed, once this process forgot it, and with "" when any
// key may have changed unheard: as listening starts, and every second
// while it cannot. f runs on the listening goroutine: it must return
// quickly. For who holds on to what a key granted beyond one request (the
// NATS connections an auth callout let in).
func (k *Keys) Watch(f func(hash string)) {
	k.watchMu.Lock()
	defer k.watchMu.Unlock()
	k.watchers = append(k.watchers, f)
}

func (k *Keys) announce(hash string) {
	k.watchMu.Lock()
	watchers := slices.Clone(k.watchers)
	k.watchMu.Unlock()
	for _, f := range watchers {
		f(hash)
	}
}

// Forget drops every key verified: a key this process revoked or rotated
// is refused by it at once, before Postgres's announcement comes back. A
// nil Keys (a process that checks no keys) has nothing to forget.
func (k *Keys) Forget() {
	if k == nil {
		return
	}
	k.cache.ForgetAll()
	k.unheard.ForgetAll()
	k.verified.Clear()
}

// Refused counts a request refused before any route logic ran (a bad id, an
// ambiguous or refused credential) by its code, and answers it in d. A nil
// Keys answers it uncounted.
func (k *Keys) Refused(w http.ResponseWriter, r *http.Request, d Dialect, e *Error) {
	if k == nil {
		Refuse(w, d, e)
		return
	}
	k.refused.Add(r.Context(), 1, metric.WithAttributes(attribute.String("code", e.Code)))
	Refuse(w, d, e)
}

// Handler is a route's handler once its tenant is known.
type Handler func(w http.ResponseWriter, r *http.Request, tenant string)

// KeyOf reads a request's API key, or refuses the request.
type KeyOf func(r *http.Request) (string, *Error)

// Auth resolves the request's API key (keyOf) to what it grants and calls
// next with its tenant and the grant in the request's context (GrantOf),
// or answers why not in d: 401 for no key or an unknown, revoked or
// expired one, 403 (counted) for a key without scope, 400 (counted) for an
// ambiguous one, 429 (counted) for an address past its failures.
func (k *Keys) Auth(d Dialect, keyOf KeyOf, scope string, next Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, e := keyOf(r)
		var grant store.KeyGrant
		if e == nil {
			grant, e = k.Grant(w, r, key)
		}
		if e == nil {
			e = MissingScope(grant, scope)
		}
		switch {
		case e == nil:
		case e.Status == http.StatusUnauthorized || e.Status == http.StatusServiceUnavailable:
			Refuse(w, d, e)
			return
		default:
			k.Refused(w, r, d, e)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), grantKey{}, grant)), grant.Tenant)
	})
}

// MissingScope is the 403 for a request grant lacks scope for, or nil.
func MissingScope(grant store.KeyGrant, scope string) *Error {
	if grant.Has(scope) {
		return nil
	}
	return &Error{Status: http.StatusForbidden, Code: "missing_scope",
		Message: fmt.Sprintf("this API key (%s) lacks the scope %q; it holds %s", grant.KeyID, scope, strings.Join(grant.Scopes, ", "))}
}

type grantKey struct{}

// GrantOf is what the request's key grants, as Auth found it.
func GrantOf(ctx context.Context) (store.KeyGrant, bool) {
	g, ok := ctx.Value(grantKey{}).(store.KeyGrant)
	return g, ok
}

type actorKey struct{}

// WithActor names who makes the request for the audit log in place of a
// tenant's key: the operator API's requests, made with an operator key.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// Actor names who made a request for the audit log: its key.
func Actor(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok {
		return a
	}
	if g, ok := GrantOf(ctx); ok {
		return "key:" + g.KeyID
	}
	return "api"
}

// Grant resolves key to what it grants: from the cache of verified keys,
// else from Postgres, unless the client's address failed too many checks
// lately (429, with Retry-After set on w) or the key failed recently (401).
// A key of a suspended tenant is refused with 403 tenant_suspended.
func (k *Keys) Grant(w http.ResponseWriter, r *http.Request, key string) (store.KeyGrant, *Error) {
	hash := KeyHash(key)
	if g, ok := k.cached().Peek(hash); ok && k.live(g) {
		return k.granted(g)
	}
	addr := clientAddr(r)
	if wait, blocked := k.guard.blocked(addr); blocked {
		k.limits.Record(r.Context(), limits.LimitKeyFailures)
		retry := strconv.Itoa(int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", retry)
		return store.KeyGrant{}, &Error{Status: http.StatusTooManyRequests, Code: "too_many_key_failures", RetryAfter: retry,
			Message: fmt.Sprintf("more than %d failed API key checks from this address within %s; retry later", k.cfg.Failures, k.cfg.FailureWindow)}
	}
	unknown := &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "unknown, revoked or expired API key"}
	if k.guard.knownMiss(hash) {
		k.guard.miss(addr, hash)
		return store.KeyGrant{}, unknown
	}
	g, err := k.lookup(r.Context(), hash)
	if errors.Is(err, store.ErrNotFound) {
		k.guard.miss(addr, hash)
		return store.KeyGrant{}, unknown
	}
	if err != nil {
		// Postgres cannot be asked: a key it verified within CacheTTL
		// still holds, so a proxied round can go up fail-open. No
		// revocation can be heard meanwhile: one is honoured CacheTTL
		// after the key was last verified at the latest.
		if g, ok := k.recentlyVerified(hash); ok {
			k.log.Warn("api key lookup failed; trusting the key as verified within the key cache's TTL", "tenant", g.Tenant, "err", err)
			return k.granted(g)
		}
		k.log.Error("api key lookup failed", "err", err)
		return store.KeyGrant{}, &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "could not verify the API key; retry"}
	}
	return k.granted(g)
}

// granted answers a key verified: its grant, or 403 when its tenant is
// suspended.
func (k *Keys) granted(g store.KeyGrant) (store.KeyGrant, *Error) {
	if g.Suspended {
		return store.KeyGrant{}, &Error{Status: http.StatusForbidden, Code: "tenant_suspended", Message: "tenant " + g.Tenant + " is suspended: its API keys are refused until an operator resumes it"}
	}
	k.touch(g)
	return g, nil
}

// ErrTenantSuspended is ByHash's error for a key of a suspended tenant:
// it is store.ErrNotFound too, as the key grants nothing meanwhile.
var ErrTenantSuspended = fmt.Errorf("the key's tenant is suspended: %w", store.ErrNotFound)

// ByHash is what the key of that hash (KeyHash) grants, or
// store.ErrNotFound when it is unknown, revoked or expired, or
// ErrTenantSuspended: how a console session checks, at each request, that
// its key still holds.
func (k *Keys) ByHash(ctx context.Context, hash string) (store.KeyGrant, error) {
	g, err := k.lookup(ctx, hash)
	switch {
	case err != nil:
		return store.KeyGrant{}, err
	case g.Suspended:
		return store.KeyGrant{}, ErrTenantSuspended
	}
	return g, nil
}

// lookup is what the key of that hash grants, its tenant suspended or not,
// or store.ErrNotFound when it is unknown, revoked or expired.
func (k *Keys) lookup(ctx context.Context, hash string) (store.KeyGrant, error) {
	load := func(ctx context.Context, hash string) (store.KeyGrant, error) {
		raw, err := hex.DecodeString(hash)
		if err != nil {
			return store.KeyGrant{}, store.ErrNotFound
		}
		g, err := k.st.LookupAPIKeyHash(ctx, raw)
		if err == nil {
			k.verified.Store(hash, verifiedGrant{grant: g, at: k.cfg.Now()})
		} else if errors.Is(err, store.ErrNotFound) {
			k.verified.Delete(hash)
		}
		return g, err
	}
	g, err := k.cached().Get(ctx, hash, load)
	if err == nil && !k.live(g) {
		return store.KeyGrant{}, store.ErrNotFound
	}
	return g, err
}

// cached is the cache of verified keys for now: the long one while
// revocations are heard, else the brief one.
func (k *Keys) cached() *ttlcache.Cache[store.KeyGrant] {
	if k.listening.Load() {
		return k.cache
	}
	return k.unheard
}

// verifiedGrant is what Postgres last said a key grants, and when.
type verifiedGrant struct {
	grant store.KeyGrant
	at    time.Time
}

// recentlyVerified is what Postgres last said the key of hash grants, when
// it said so within CacheTTL and the grant has not expired.
func (k *Keys) recentlyVerified(hash string) (store.KeyGrant, bool) {
	v, ok := k.verified.Load(hash)
	if !ok {
		return store.KeyGrant{}, false
	}
	vg := v.(verifiedGrant)
	return vg.grant, k.cfg.Now().Sub(vg.at) < k.cfg.CacheTTL && k.live(vg.grant)
}

// KeyHash is the hex of a key's hash, as keys are cached and announced.
func KeyHash(key string) string { return hex.EncodeToString(store.HashAPIKey(key)) }

// live reports whether a grant has not expired.
func (k *Keys) live(g store.KeyGrant) bool {
	return g.ExpiresAt == nil || k.cfg.Now().Before(*g.ExpiresAt)
}

// touchEvery is how often a process records that a key is in use.
const touchEvery = time.Minute

// touch records, in the background and at most once a touchEvery, that the
// key of g was used.
func (k *Keys) touch(g store.KeyGrant) {
	now := k.cfg.Now()
	if last, ok := k.touched.Load(g.KeyID); ok && now.Sub(last.(time.Time)) < touchEvery {
		return
	}
	k.touched.Store(g.KeyID, now)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := k.st.TouchAPIKey(ctx, g.Tenant, g.KeyID); err != nil {
			k.log.Warn("recording an API key's use", "key", g.KeyID, "err", err)
		}
	}()
}

// BearerKey reads the API key of 'Authorization: Bearer <key>'.
func BearerKey(r *http.Request) (string, *Error) {
	const prefix = "Bearer "
	if n := len(r.Header.Values("Authorization")); n > 1 {
		return "", &Error{Status: http.StatusBadRequest, Code: "ambiguous_credentials", Message: fmt.Sprintf("%d Authorization headers; send the API key once", n)}
	}
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || h[:len(prefix)] != prefix {
		return "", &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "send the API key as 'Authorization: Bearer <key>'"}
	}
	return h[len(prefix):], nil
}

// AgentKey reads the API key of an agent's request: 'Authorization: Bearer
// <key>' or 'x-api-key: <key>' (both only when they agree).
func AgentKey(r *http.Request) (string, *Error) {
	keys := r.Header.Values(HeaderAPIKey)
	if len(keys) > 1 {
		return "", &Error{Status: http.StatusBadRequest, Code: "ambiguous_credentials", Message: fmt.Sprintf("%d %s headers; send the API key once", len(keys), HeaderAPIKey)}
	}
	if len(r.Header.Values("Authorization")) == 0 {
		if len(keys) == 0 || keys[0] == "" {
			return "", &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "send the API key as 'Authorization: Bearer <key>' or 'x-api-key: <key>'"}
		}
		return keys[0], nil
	}
	key, e := BearerKey(r)
	if e == nil && len(keys) == 1 && keys[0] != key {
		return "", &Error{Status: http.StatusBadRequest, Code: "ambiguous_credentials", Message: "Authorization and " + HeaderAPIKey + " name different keys; send one"}
	}
	return key, e
}
