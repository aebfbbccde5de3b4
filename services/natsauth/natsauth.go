// Package natsauth lets a tenant's backends publish turns on NATS with a
// Mnemos API key, as they send them over HTTP: it answers nats-server's
// authorization requests (auth callout, subject $SYS.REQ.USER.AUTH).
//
// A client connects with the key as its password (any user name). The key
// is checked as the gateway checks it (httpapi.Keys): known, not revoked
// or expired, its tenant not suspended, and holding the ingest scope. The
// answer lets the connection publish on its tenant's turn subjects only
// (turn.completed.<tenant>.>) and receive on its tenant's inbox prefix
// (InboxPrefix), names the connection after the key's id, and ends it when
// the key expires. Refused, the client is told why.
//
// Revocation: Keys announces every key that changed (Keys.Watch); the
// service checks those of the connections it let in again, and closes the
// connections of a key that no longer holds (Conns), so a revoked
// publisher stops within a second, and its next connection is refused.
package natsauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Subject is where nats-server sends its authorization requests.
const Subject = "$SYS.REQ.USER.AUTH"

// queue is the queue group the answering processes share: one answers
// each request.
const queue = "mnemos-natsauth"

// InboxPrefix is the inbox prefix a tenant's connection receives its
// JetStream acknowledgements on: nats.CustomInboxPrefix(InboxPrefix(t)).
func InboxPrefix(tenant string) string { return "_INBOX_" + tenant }

// Keys checks API keys: httpapi.Keys.
type Keys interface {
	// ByHash is what the key of that hash grants, store.ErrNotFound when
	// it is unknown, revoked or expired (httpapi.ErrTenantSuspended too).
	ByHash(ctx context.Context, hash string) (store.KeyGrant, error)
	// Watch has f called with each key announced changed, "" for any.
	Watch(f func(hash string))
}

// Conns closes connections on the NATS server: natsembed.Server, or
// SystemConns for a server of its own. Without it, the open connections of
// a revoked key stay until they reconnect.
type Conns interface {
	// CloseUser closes the open connections named user and says how many.
	CloseUser(user string) (int, error)
}

// Config configures the service.
type Config struct {
	// Issuer is the account key pair whose public key the server trusts
	// for its auth callout (auth_callout.issuer); it signs every answer.
	Issuer nkeys.KeyPair
	// Account is the account a client let in is placed in: the one whose
	// JetStream holds the Mnemos streams ("$G" without accounts).
	Account string
	// Timeout bounds one key check; the server gives up on an answer
	// after its auth timeout (two seconds by default).
	Timeout time.Duration
	// Workers answer requests at once.
	Workers int
}

// DefaultConfig holds the defaults; Issuer has none.
func DefaultConfig() Config {
	return Config{Account: "$G", Timeout: 1500 * time.Millisecond, Workers: 16}
}

// Service answers authorization requests.
type Service struct {
	cfg      Config
	keys     Keys
	conns    Conns
	bus      *bus.Bus
	log      *slog.Logger
	requests metric.Int64Counter
	closed   metric.Int64Counter

	mu      sync.Mutex
	granted map[string]*grantedKey // by key id: the keys that let a connection in
	changed map[string]bool        // hashes announced and not checked yet; "" for every key
	wake    chan struct{}
}

// grantedKey is a key that let a connection in.
type grantedKey struct {
	hash string
	// forever is set when one of its connections has no end; else the
	// last of them ends at until (the expiry the server was given, or a
	// close scheduled since).
	forever bool
	until   time.Time
}

// outlives reports whether one of the key's connections lives past t.
func (g *grantedKey) outlives(t time.Time) bool { return g.forever || g.until.After(t) }

// New builds the service; it answers on b's connection, which must be one
// of the server's auth users (they connect without a callout). conns may
// be nil; meter too.
func New(cfg Config, keys Keys, conns Conns, b *bus.Bus, log *slog.Logger, meter metric.Meter) (*Service, error) {
	defaults.Fill(&cfg, DefaultConfig())
	if cfg.Issuer == nil {
		return nil, errors.New("natsauth.New: Config.Issuer is required")
	}
	if pub, err := cfg.Issuer.PublicKey(); err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, errors.New("natsauth.New: Config.Issuer must be an account key pair (a seed starting SA)")
	}
	meter = defaults.Meter(meter)
	requests, err := meter.Int64Counter("mnemos.nats_auth.requests", metric.WithDescription("NATS connections the auth callout answered, by outcome."))
	if err != nil {
		return nil, fmt.Errorf("natsauth.New: %w", err)
	}
	closed, err := meter.Int64Counter("mnemos.nats_auth.closed", metric.WithDescription("NATS connections closed because their key no longer holds."))
	if err != nil {
		return nil, fmt.Errorf("natsauth.New: %w", err)
	}
	return &Service{
		cfg: cfg, keys: keys, conns: conns, bus: b, log: log, requests: requests, closed: closed,
		granted: map[string]*grantedKey{}, changed: map[string]bool{}, wake: make(chan struct{}, 1),
	}, nil
}

// Run answers authorization requests and closes the connections of keys
// that stop holding, until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	s.keys.Watch(s.announced)
	slots := make(chan struct{}, s.cfg.Workers)
	sub, err := s.bus.Conn().QueueSubscribe(Subject, queue, func(m *nats.Msg) {
		slots <- struct{}{}
		go func() { // bounded by slots, and each by Config.Timeout
			defer func() { <-slots }()
			s.answer(ctx, m)
		}()
	})
	if err != nil {
		return fmt.Errorf("natsauth: subscribing to %s: %w", Subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }() // the connection closing ends it too
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			s.recheck(ctx)
		}
	}
}

// answer answers one authorization request: a user's permissions, or why
// not.
func (s *Service) answer(ctx context.Context, m *nats.Msg) {
	req, err := jwt.DecodeAuthorizationRequestClaims(string(m.Data))
	if err != nil {
		// Not from a server (which signs its requests): no answer.
		s.count(ctx, "bad_request")
		s.log.Warn("an authorization request that does not decode", "err", err)
		return
	}
	resp := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	resp.Audience = req.Server.ID
	user, outcome := s.authorize(ctx, req)
	if outcome == "granted" {
		resp.Jwt = user
	} else {
		resp.Error = outcome
	}
	token, err := resp.Encode(s.cfg.Issuer)
	if err != nil {
		s.count(ctx, "error")
		s.log.Error("signing an authorization answer", "err", err)
		return
	}
	if err := m.Respond([]byte(token)); err != nil {
		s.log.Warn("answering an authorization request", "err", err)
	}
}

// The reasons a connection is refused, as the client reads them.
const (
	refusedNoKey     = "send a Mnemos API key with the ingest scope as the password"
	refusedUnknown   = "unknown, revoked or expired API key"
	refusedSuspended = "the API key's tenant is suspended"
	refusedScope     = "the API key lacks the scope ingest"
	refusedCheck     = "could not verify the API key; retry"
)

// authorize checks the request's key and returns the user's JWT and
// "granted", or the reason it is refused.
func (s *Service) authorize(ctx context.Context, req *jwt.AuthorizationRequestClaims) (string, string) {
	key := req.ConnectOptions.Password
	if key == "" {
		s.count(ctx, "no_key")
		return "", refusedNoKey
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	hash := httpapi.KeyHash(key)
	grant, err := s.keys.ByHash(ctx, hash)
	switch {
	case errors.Is(err, httpapi.ErrTenantSuspended):
		s.count(ctx, "suspended")
		return "", refusedSuspended
	case errors.Is(err, store.ErrNotFound):
		s.count(ctx, "unknown")
		return "", refusedUnknown
	case err != nil:
		s.count(ctx, "error")
		s.log.Error("checking the API key of a NATS connection", "err", err)
		return "", refusedCheck
	case !grant.Has(store.ScopeIngest):
		s.count(ctx, "missing_scope")
		return "", refusedScope
	}
	user := jwt.NewUserClaims(req.UserNkey)
	user.Name = grant.KeyID // the connection's name on the server: CloseUser finds it by it
	user.Audience = s.cfg.Account
	user.Pub.Allow.Add(s.bus.Subject(bus.KindTurnCompleted, grant.Tenant, ">"))
	user.Sub.Allow.Add(InboxPrefix(grant.Tenant) + ".>")
	if grant.ExpiresAt != nil {
		user.Expires = grant.ExpiresAt.Unix() // the server ends the connection then
	}
	token, err := user.Encode(s.cfg.Issuer)
	if err != nil {
		s.count(ctx, "error")
		s.log.Error("signing a NATS user", "err", err)
		return "", refusedCheck
	}
	s.mu.Lock()
	g := s.granted[grant.KeyID]
	if g == nil {
		g = &grantedKey{hash: hash}
		s.granted[grant.KeyID] = g
	}
	switch {
	case grant.ExpiresAt == nil:
		g.forever = true
	case grant.ExpiresAt.After(g.until):
		g.until = *grant.ExpiresAt
	}
	s.mu.Unlock()
	s.count(ctx, "granted")
	return token, "granted"
}

func (s *Service) count(ctx context.Context, outcome string) {
	s.requests.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// announced notes a key announced changed ("" for every key) for Run to
// check: it runs on the announcing goroutine, so it only takes note.
func (s *Service) announced(hash string) {
	s.mu.Lock()
	s.changed[hash] = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// recheck checks again the keys announced that let a connection in, and
// closes the connections of those that no longer hold.
func (s *Service) recheck(ctx context.Context) {
	s.mu.Lock()
	check := map[string]string{} // key id → hash
	for id, g := range s.granted {
		if s.changed[""] || s.changed[g.hash] {
			check[id] = g.hash
		}
	}
	clear(s.changed)
	s.mu.Unlock()
	for id, hash := range check {
		tctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		grant, err := s.keys.ByHash(tctx, hash)
		cancel()
		switch {
		case err == nil && grant.Has(store.ScopeIngest):
			if grant.ExpiresAt != nil {
				s.endBy(ctx, id, *grant.ExpiresAt)
			}
			continue
		case err != nil && !errors.Is(err, store.ErrNotFound):
			if ctx.Err() == nil {
				s.log.Warn("checking again the API key of NATS connections; trying again", "key", id, "err", err)
				s.announced(hash)
			}
			continue
		}
		s.mu.Lock()
		delete(s.granted, id)
		s.mu.Unlock()
		s.closeKey(ctx, id)
		// A connection let in while the key was being revoked may have
		// joined after this: close once more a second later.
		time.AfterFunc(time.Second, func() { s.closeKey(ctx, id) })
	}
}

// endBy has the key's connections closed at its expiry, when that is
// sooner than they end now: a rotation brings the old key's expiry
// forward, past what the server was told as they connected.
func (s *Service) endBy(ctx context.Context, id string, expires time.Time) {
	s.mu.Lock()
	g := s.granted[id]
	sooner := g != nil && g.outlives(expires)
	if sooner {
		g.forever, g.until = false, expires
	}
	s.mu.Unlock()
	if sooner {
		time.AfterFunc(time.Until(expires), func() { s.closeKey(ctx, id) })
	}
}

// closeKey closes the open connections of the key id.
func (s *Service) closeKey(ctx context.Context, id string) {
	if s.conns == nil {
		return
	}
	n, err := s.conns.CloseUser(id)
	if err != nil {
		s.log.Warn("closing the NATS connections of a key that no longer holds", "key", id, "err", err)
	}
	if n > 0 {
		s.closed.Add(context.WithoutCancel(ctx), int64(n))
		s.log.Info("closed the NATS connections of a key that no longer holds", "key", id, "connections", n)
	}
}
