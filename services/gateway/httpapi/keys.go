package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
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

// Keys resolves API keys to their tenants for every front door: the API,
// the model proxy, MCP and the console's sign-in.
type Keys struct {
	cfg     KeysConfig
	lookup  func(ctx context.Context, key string) (string, error)
	limits  *limits.Limiter
	log     *slog.Logger
	cache   *ttlcache.Cache[string] // key → tenant
	guard   *keyGuard
	refused metric.Int64Counter
}

// NewKeys checks keys with st (TenantForAPIKey), recording an address
// blocked for its failures on lim (which may be nil) and counting refused
// requests on meter (mnemos.requests.refused).
func NewKeys(cfg KeysConfig, st *store.Store, lim *limits.Limiter, log *slog.Logger, meter metric.Meter) (*Keys, error) {
	refused, err := meter.Int64Counter("mnemos.requests.refused", metric.WithDescription("Requests the gateway refused for a bad id, header or credential, by error code."))
	if err != nil {
		return nil, fmt.Errorf("httpapi.NewKeys: %w", err)
	}
	return &Keys{
		cfg: cfg, lookup: st.TenantForAPIKey, limits: lim, log: log, refused: refused,
		cache: ttlcache.New[string](cfg.CacheTTL, 10_000),
		guard: newKeyGuard(cfg.Failures, cfg.FailureWindow, cfg.CacheTTL, cfg.Now),
	}, nil
}

// Refused counts a request refused before any route logic ran (a bad id, an
// ambiguous or refused credential) by its code, and answers it in d.
func (k *Keys) Refused(w http.ResponseWriter, r *http.Request, d Dialect, e *Error) {
	k.refused.Add(r.Context(), 1, metric.WithAttributes(attribute.String("code", e.Code)))
	Refuse(w, d, e)
}

// Handler is a route's handler once its tenant is known.
type Handler func(w http.ResponseWriter, r *http.Request, tenant string)

// KeyOf reads a request's API key, or refuses the request.
type KeyOf func(r *http.Request) (string, *Error)

// Auth resolves the request's API key (keyOf) to its tenant and calls next,
// or answers why not in d: 401 for no key or an unknown one, 400 (counted)
// for an ambiguous one, 429 (counted) for an address past its failures.
func (k *Keys) Auth(d Dialect, keyOf KeyOf, next Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, e := keyOf(r)
		var tenant string
		if e == nil {
			tenant, e = k.Tenant(w, r, key)
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
		next(w, r, tenant)
	})
}

// Tenant resolves key to its tenant: from the cache of verified keys, else
// from Postgres, unless the client's address failed too many checks lately
// (429, with Retry-After set on w) or the key failed recently (401).
func (k *Keys) Tenant(w http.ResponseWriter, r *http.Request, key string) (string, *Error) {
	if tenant, ok := k.cache.Peek(key); ok {
		return tenant, nil
	}
	addr := clientAddr(r)
	if wait, blocked := k.guard.blocked(addr); blocked {
		k.limits.Record(r.Context(), limits.LimitKeyFailures)
		retry := strconv.Itoa(int(math.Ceil(wait.Seconds())))
		w.Header().Set("Retry-After", retry)
		return "", &Error{Status: http.StatusTooManyRequests, Code: "too_many_key_failures", RetryAfter: retry,
			Message: fmt.Sprintf("more than %d failed API key checks from this address within %s; retry later", k.cfg.Failures, k.cfg.FailureWindow)}
	}
	unknown := &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "unknown or revoked API key"}
	if k.guard.knownMiss(key) {
		k.guard.miss(addr, key)
		return "", unknown
	}
	tenant, err := k.cache.Get(r.Context(), key, k.lookup)
	if errors.Is(err, store.ErrNotFound) {
		k.guard.miss(addr, key)
		return "", unknown
	}
	if err != nil {
		k.log.Error("api key lookup failed", "err", err)
		return "", &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "could not verify the API key; retry"}
	}
	return tenant, nil
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
