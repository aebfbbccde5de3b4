// Package limits bounds what one tenant may send and hold: turn events per
// second (a token bucket with a burst), sessions active at once, the size of a
// turn and of a session, how far ahead a turn's seq may run, and how many
// expensive requests it may have in flight. The rate and the active sessions
// are asked of the one Limiter, whose state lives in Postgres so a limit holds
// across replicas; the sizes are checked where the input is read.
package limits

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Names of the limits: the `limit` label of mnemos_limits_exceeded_total.
const (
	LimitEventBytes         = "event_bytes"
	LimitEventsPerSecond    = "events_per_second"
	LimitActiveSessions     = "active_sessions"
	LimitTurnMessages       = "turn_messages"
	LimitSessionMessages    = "session_messages"
	LimitSeqWindow          = "seq_window"
	LimitConcurrentRequests = "concurrent_requests"
	// LimitInflightBytes is the process's budget of request bytes in
	// flight, shared by every tenant.
	LimitInflightBytes = "inflight_bytes"
	// LimitKeyFailures bounds failed API-key checks per client address.
	LimitKeyFailures = "key_failures"
)

// Reason codes of a refusal: HTTP error codes and dead-letter reasons.
const (
	ReasonRateLimited     = "rate_limited"
	ReasonTooManySessions = "too_many_sessions"
	// ReasonTooManyRequests: the tenant has ConcurrentRequests expensive
	// requests in flight already (429).
	ReasonTooManyRequests = "too_many_requests"
	// ReasonOverloaded: the process's budget of bytes in flight is spent (503).
	ReasonOverloaded = "overloaded"
)

// HeaderAdmitted marks a turn event an entry point already admitted (the
// gateway), so the accountant does not count it a second time. NATS
// publishers are trusted with the bus: the header saves work, it is not a
// security boundary.
const HeaderAdmitted = "Mnemos-Limits-Admitted"

// Config is one tenant's limits; a zero limit means none.
type Config struct {
	// EventsPerSecond is the sustained rate of turn events.
	EventsPerSecond float64 `json:"events_per_second"`
	// EventsBurst is how many events may arrive at once, above the rate,
	// after a quiet spell.
	EventsBurst int `json:"events_burst"`
	// ActiveSessions caps the sessions active at once: a new session beyond
	// it is refused while the active ones keep working.
	ActiveSessions int `json:"active_sessions"`
	// ActiveMinutes is how long a session stays active after its last turn.
	ActiveMinutes int `json:"active_minutes"`
	// TurnMessages caps the messages of one turn event (its input messages
	// and its response).
	TurnMessages int `json:"turn_messages"`
	// TurnBytes caps one encoded turn event. The process's
	// MNEMOS_MAX_EVENT_BYTES and the bus's max payload cap it too.
	TurnBytes int `json:"turn_bytes"`
	// SessionMessages caps the messages one session stores.
	SessionMessages int `json:"session_messages"`
	// SeqWindow is how far ahead of a session's applied seq a turn's seq
	// may be; a turn further ahead is refused (seq_too_far).
	SeqWindow int64 `json:"seq_window"`
	// ConcurrentRequests caps the tenant's expensive requests (context,
	// pre-flight, recall, compaction, turn ingest) in flight in one process.
	ConcurrentRequests int `json:"concurrent_requests"`
}

// The defaults of the size limits. A real agent never meets them: the
// longest Claude Code sessions hold a few thousand messages, and one round
// adds a handful.
const (
	DefaultTurnMessages       = 10_000
	DefaultTurnBytes          = 8 << 20
	DefaultSessionMessages    = 100_000
	DefaultSeqWindow          = 1_000
	DefaultConcurrentRequests = 4
)

// DefaultConfig holds the defaults: 200 events a second with bursts of
// 1,000; 1,000 sessions active within 30 minutes; 10,000 messages and 8 MiB
// a turn; 100,000 messages a session; seq at most 1,000 ahead; 4 expensive
// requests in flight.
func DefaultConfig() Config {
	return Config{
		EventsPerSecond: 200, EventsBurst: 1000, ActiveSessions: 1000, ActiveMinutes: 30,
		TurnMessages: DefaultTurnMessages, TurnBytes: DefaultTurnBytes, SessionMessages: DefaultSessionMessages,
		SeqWindow: DefaultSeqWindow, ConcurrentRequests: DefaultConcurrentRequests,
	}
}

// Validate reports limits that cannot work.
func (c Config) Validate() error {
	var errs []error
	if c.EventsPerSecond < 0 || math.IsNaN(c.EventsPerSecond) || math.IsInf(c.EventsPerSecond, 0) {
		errs = append(errs, fmt.Errorf("limits.events_per_second must be 0 (no limit) or positive, not %v", c.EventsPerSecond))
	}
	if c.EventsPerSecond > 0 && c.EventsBurst < 1 {
		errs = append(errs, fmt.Errorf("limits.events_burst must be at least 1 with a rate limit, not %d", c.EventsBurst))
	}
	if c.ActiveSessions < 0 {
		errs = append(errs, fmt.Errorf("limits.active_sessions must be 0 (no cap) or positive, not %d", c.ActiveSessions))
	}
	if c.ActiveSessions > 0 && c.ActiveMinutes < 1 {
		errs = append(errs, fmt.Errorf("limits.active_minutes must be at least 1 with a session cap, not %d", c.ActiveMinutes))
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"turn_messages", int64(c.TurnMessages)}, {"turn_bytes", int64(c.TurnBytes)},
		{"session_messages", int64(c.SessionMessages)}, {"seq_window", c.SeqWindow},
		{"concurrent_requests", int64(c.ConcurrentRequests)},
	} {
		if f.v < 0 {
			errs = append(errs, fmt.Errorf("limits.%s must be 0 (no limit) or positive, not %d", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// Exceeded is a refusal: a limit of the tenant was reached.
type Exceeded struct {
	// Limit is which limit (LimitEventsPerSecond, …); Reason the code
	// (ReasonRateLimited, …).
	Limit  string
	Reason string
	Detail string
	// RetryAfter is when trying again may succeed.
	RetryAfter time.Duration
}

func (e *Exceeded) Error() string { return e.Reason + ": " + e.Detail }

// RetryAfterSeconds is RetryAfter for a Retry-After header: whole seconds,
// rounded up, at least 1.
func (e *Exceeded) RetryAfterSeconds() string {
	return strconv.FormatInt(max(int64(math.Ceil(e.RetryAfter.Seconds())), 1), 10)
}

// AsExceeded reports whether err is, or wraps, an *Exceeded.
func AsExceeded(err error) (*Exceeded, bool) {
	var e *Exceeded
	ok := errors.As(err, &e)
	return e, ok
}

// ConfigFunc returns a tenant's limits (its settings over the process's defaults).
type ConfigFunc func(ctx context.Context, tenant string) (Config, error)

// Options tune how often a Limiter asks Postgres. The zero value is the default.
type Options struct {
	// LeaseTTL is how long tokens taken from the shared bucket may be
	// spent locally before they are dropped (default 1s), so no replica
	// hoards them.
	LeaseTTL time.Duration
	// SessionRefresh is how long a session found active is admitted without
	// asking again (default 1 minute, at most a tenth of the window).
	SessionRefresh time.Duration
	// Now is the local clock (time.Now).
	Now func() time.Time
}

// bucketEvents names the shared bucket of turn events.
const bucketEvents = "events"

// Limiter enforces every tenant's limits. It is safe for concurrent use;
// one serves a whole process.
type Limiter struct {
	store  *store.Store
	config ConfigFunc
	opts   Options

	mu       sync.Mutex
	leases   map[string]*lease    // tenant → tokens held locally
	sessions map[string]time.Time // tenant/session → confirmed active at

	exceeded  metric.Int64Counter
	unchecked metric.Int64Counter
}

// lease is tokens taken from a tenant's shared bucket and not spent yet.
type lease struct {
	mu     sync.Mutex
	tokens int
	at     time.Time
	// emptyUntil: the shared bucket had no token; refuse without asking
	// until then.
	emptyUntil time.Time
}

// New builds the process's limiter over st; config gives each tenant's
// limits. meter may be nil.
func New(st *store.Store, config ConfigFunc, meter metric.Meter, opts Options) (*Limiter, error) {
	meter = defaults.Meter(meter)
	exceeded, err := meter.Int64Counter("mnemos.limits.exceeded",
		metric.WithDescription("Requests and events refused because a tenant reached a limit, by limit."))
	if err != nil {
		return nil, fmt.Errorf("limits.New: %w", err)
	}
	unchecked, err := meter.Int64Counter("mnemos.limits.unchecked",
		metric.WithDescription("Events admitted without checking a limit because Postgres could not be reached, by limit."))
	if err != nil {
		return nil, fmt.Errorf("limits.New: %w", err)
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = time.Second
	}
	if opts.SessionRefresh <= 0 {
		opts.SessionRefresh = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Limiter{
		store: st, config: config, opts: opts,
		leases: map[string]*lease{}, sessions: map[string]time.Time{},
		exceeded: exceeded, unchecked: unchecked,
	}, nil
}

// Admit counts one turn event of a tenant's session against the tenant's
// limits. It returns an *Exceeded when the event is over one, and another
// error when the limits could not be checked (store.ErrUnknownTenant for a
// tenant that does not exist). When Postgres cannot be reached a limit is
// not checked and the event is admitted (counted in
// mnemos_limits_unchecked_total): the limits protect the system's capacity,
// and refusing every event while Postgres restarts would turn away what
// JetStream can hold until it is back.
// A nil *Limiter admits everything.
func (l *Limiter) Admit(ctx context.Context, tenant, session string) error {
	if l == nil {
		return nil
	}
	cfg, err := l.config(ctx, tenant)
	if err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	took := false
	if cfg.EventsPerSecond > 0 {
		if err := l.takeEvent(ctx, tenant, cfg); err != nil {
			return err
		}
		took = true
	}
	if cfg.ActiveSessions > 0 {
		if err := l.admitSession(ctx, tenant, session, cfg); err != nil {
			if took {
				l.giveBack(tenant) // the event was not let in: its token is not spent
			}
			return err
		}
	}
	return nil
}

// Record counts a limit exceeded outside the Limiter (an event too large).
func (l *Limiter) Record(ctx context.Context, limit string) {
	if l == nil {
		return
	}
	l.exceeded.Add(ctx, 1, metric.WithAttributes(attribute.String("limit", limit)))
}

func (l *Limiter) refuse(ctx context.Context, e *Exceeded) error {
	l.Record(ctx, e.Limit)
	return e
}

// takeEvent spends one token of the tenant's event bucket, taking a few
// more from the shared bucket when none is held.
func (l *Limiter) takeEvent(ctx context.Context, tenant string, cfg Config) error {
	ls := l.lease(tenant)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	now := l.opts.Now()
	if ls.tokens > 0 && now.Sub(ls.at) < l.opts.LeaseTTL {
		ls.tokens--
		return nil
	}
	if now.Before(ls.emptyUntil) {
		return l.refuse(ctx, rateExceeded(cfg, ls.emptyUntil.Sub(now)))
	}
	// A twentieth of a second's worth at a time: few round trips, and
	// little held where another replica cannot use it.
	want := int(max(1, min(float64(cfg.EventsBurst), math.Ceil(cfg.EventsPerSecond/20))))
	granted, left, err := l.store.TakeTokens(ctx, tenant, bucketEvents, cfg.EventsPerSecond, float64(cfg.EventsBurst), want)
	if store.IsUnavailable(err) {
		l.unchecked.Add(ctx, 1, metric.WithAttributes(attribute.String("limit", LimitEventsPerSecond)))
		return nil
	}
	if err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	ls.tokens, ls.at = granted, now
	if granted == 0 {
		wait := time.Duration((1 - left) / cfg.EventsPerSecond * float64(time.Second))
		ls.emptyUntil = now.Add(wait)
		return l.refuse(ctx, rateExceeded(cfg, wait))
	}
	ls.tokens--
	return nil
}

func rateExceeded(cfg Config, wait time.Duration) *Exceeded {
	return &Exceeded{
		Limit: LimitEventsPerSecond, Reason: ReasonRateLimited, RetryAfter: wait,
		Detail: fmt.Sprintf("the tenant sends more than %g turn events a second (bursts of %d); retry after %s",
			cfg.EventsPerSecond, cfg.EventsBurst, wait.Round(time.Millisecond)),
	}
}

// giveBack returns one token to the tenant's lease.
func (l *Limiter) giveBack(tenant string) {
	ls := l.lease(tenant)
	ls.mu.Lock()
	ls.tokens++
	ls.mu.Unlock()
}

func (l *Limiter) lease(tenant string) *lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	ls, ok := l.leases[tenant]
	if !ok {
		ls = &lease{}
		l.leases[tenant] = ls
	}
	return ls
}

// admitSession admits a session that is active, or a new one while the
// tenant has a free slot.
func (l *Limiter) admitSession(ctx context.Context, tenant, session string, cfg Config) error {
	window := time.Duration(cfg.ActiveMinutes) * time.Minute
	refresh := min(l.opts.SessionRefresh, window/10)
	key := tenant + "\x00" + session
	now := l.opts.Now()
	l.mu.Lock()
	at, ok := l.sessions[key]
	l.mu.Unlock()
	if ok && now.Sub(at) < refresh {
		return nil
	}
	a, err := l.store.AdmitSession(ctx, tenant, session, cfg.ActiveSessions, window)
	if store.IsUnavailable(err) {
		l.unchecked.Add(ctx, 1, metric.WithAttributes(attribute.String("limit", LimitActiveSessions)))
		return nil
	}
	if err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	if !a.Admitted {
		return l.refuse(ctx, &Exceeded{
			Limit: LimitActiveSessions, Reason: ReasonTooManySessions, RetryAfter: a.RetryAfter,
			Detail: fmt.Sprintf("the tenant has %d sessions active within %d minutes, its cap; sessions already active keep working, a new one may start after %s",
				a.Active, cfg.ActiveMinutes, a.RetryAfter.Round(time.Second)),
		})
	}
	l.mu.Lock()
	if len(l.sessions) >= maxRemembered {
		clear(l.sessions) // they are asked about again, once each
	}
	l.sessions[key] = now
	l.mu.Unlock()
	return nil
}

// maxRemembered bounds the sessions remembered as active.
const maxRemembered = 100_000
