package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/limits"
)

// Admission bounds what a process holds at once, so that one tenant cannot
// take it down: each tenant's expensive requests in flight
// (limits.Config.ConcurrentRequests, 429 past it), the bytes every request
// in flight expects to hold (AdmissionConfig.MaxInflightBytes, 503 past it)
// and the heavy requests (large context renders, large bodies) served at
// once (AdmissionConfig.HeavyRequests), which would otherwise take both
// cores of a small machine from every other tenant.
//
// The costs are estimates made before the work: a body's length times what
// decoding it holds (BodyFactor), a context's stored size times what
// rendering it holds. The hot path is atomic counters; the one lock guards
// the map of tenants' counters, never work.
type Admission struct {
	limits     *limits.Limiter
	log        *slog.Logger
	concurrent func(ctx context.Context, tenant string) (int, error)

	budget   int64 // bytes; 0: no budget
	inflight atomic.Int64

	heavyAt   int64         // an estimate from which a request is heavy
	heavy     chan struct{} // one token per heavy request served; nil: no bound
	heavyWait time.Duration

	mu      sync.Mutex
	tenants map[string]*atomic.Int64 // tenant → expensive requests in flight
}

// BodyFactor is what a turn or pre-flight body holds per byte, measured on
// the turns of the hostile suite (tests/hostile): the body as read, decoded
// into messages and (a turn) copied to the bus.
const BodyFactor = 4

// AdmissionConfig sets the bounds of an Admission.
type AdmissionConfig struct {
	// MaxInflightBytes is the process's budget of bytes its requests in
	// flight expect to hold; 0 means no budget.
	MaxInflightBytes int64
	// HeavyRequests bounds the requests expected to hold at least
	// HeavyBytes served at once (0: no bound); one more waits up to
	// HeavyWait for a slot, then answers 503.
	HeavyRequests int
	HeavyBytes    int64
	HeavyWait     time.Duration
	// Heavy, when set, are the process's slots for heavy work, shared
	// with other work of the process; HeavyRequests is then unused.
	Heavy cpu.Heavy
}

// NewAdmission admits by cfg; concurrent reads a tenant's limit of
// expensive requests in flight (0: none), lim records the limits reached
// (it may be nil).
func NewAdmission(cfg AdmissionConfig, concurrent func(ctx context.Context, tenant string) (int, error), lim *limits.Limiter, log *slog.Logger) *Admission {
	a := &Admission{limits: lim, log: log, concurrent: concurrent,
		budget: cfg.MaxInflightBytes, heavyAt: cfg.HeavyBytes, heavyWait: cfg.HeavyWait, tenants: map[string]*atomic.Int64{}}
	switch {
	case cfg.Heavy != nil:
		a.heavy = cfg.Heavy
	case cfg.HeavyRequests > 0:
		a.heavy = make(chan struct{}, cfg.HeavyRequests)
	}
	return a
}

// Inflight is the bytes the requests in flight expect to hold.
func (a *Admission) Inflight() int64 { return a.inflight.Load() }

// IsHeavy reports whether a request expected to hold cost bytes takes one
// of the heavy slots.
func (a *Admission) IsHeavy(cost int64) bool { return a.heavy != nil && cost >= a.heavyAt }

func (a *Admission) tenant(tenant string) *atomic.Int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.tenants[tenant]
	if n == nil {
		n = &atomic.Int64{}
		a.tenants[tenant] = n
	}
	return n
}

// TenantSlot counts a request against its tenant's limit of expensive
// requests in flight in this process, or refuses it (429) past it.
func (a *Admission) TenantSlot(ctx context.Context, tenant string, limit int) (release func(), e *Error) {
	if limit <= 0 {
		return func() {}, nil
	}
	n := a.tenant(tenant)
	if n.Add(1) > int64(limit) {
		n.Add(-1)
		a.limits.Record(ctx, limits.LimitConcurrentRequests)
		return nil, &Error{Status: http.StatusTooManyRequests, Code: limits.ReasonTooManyRequests, RetryAfter: "1", Message: fmt.Sprintf(
			"tenant %s has %d expensive requests (context, pre-flight, recall, compaction, turns, exports and imports, Messages API requests being managed) in flight in this process, its limit concurrent_requests; retry when one has been answered",
			tenant, limit)}
	}
	return func() { n.Add(-1) }, nil
}

// Budget reserves cost bytes of the process's budget for a request, or
// refuses it: 413 when what (the request's cost, described) is more than
// the whole budget, 503 overloaded when the budget is spent for now.
// Release gives the bytes back.
func (a *Admission) Budget(ctx context.Context, cost int64, what string) *Error {
	if a.budget <= 0 {
		return nil
	}
	if cost > a.budget {
		a.limits.Record(ctx, limits.LimitInflightBytes)
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf(
			"%s would hold about %s, more than this process's whole budget of %s in flight (MNEMOS_MAX_INFLIGHT_BYTES)",
			what, mib(cost), mib(a.budget))}
	}
	if a.inflight.Add(cost) > a.budget {
		a.inflight.Add(-cost)
		a.limits.Record(ctx, limits.LimitInflightBytes)
		return &Error{Status: http.StatusServiceUnavailable, Code: limits.ReasonOverloaded, RetryAfter: "1", Message: fmt.Sprintf(
			"this process's budget of %s in flight (MNEMOS_MAX_INFLIGHT_BYTES) cannot take %s (about %s) now; retry shortly",
			mib(a.budget), what, mib(cost))}
	}
	return nil
}

// Release gives back n bytes Budget reserved.
func (a *Admission) Release(n int64) {
	if a.budget > 0 {
		a.inflight.Add(-n)
	}
}

// Reserve admits a request expected to hold cost bytes: a heavy one first
// waits, boundedly, for one of the few heavy slots (its decoding or
// rendering takes a core), then every one reserves its cost of the budget.
// release gives back what was taken; a refusal of Status 0 means the client
// left while it waited.
func (a *Admission) Reserve(ctx context.Context, cost int64, what string) (release func(), e *Error) {
	var held bool
	if a.IsHeavy(cost) {
		timer := time.NewTimer(a.heavyWait)
		defer timer.Stop()
		select {
		case a.heavy <- struct{}{}:
			held = true
		case <-timer.C:
			a.limits.Record(ctx, limits.LimitInflightBytes)
			return nil, &Error{Status: http.StatusServiceUnavailable, Code: limits.ReasonOverloaded, RetryAfter: "2", Message: fmt.Sprintf(
				"%s is a heavy request (about %s), and this process already serves its %d heavy requests (of at least %s) at once; retry shortly",
				what, mib(cost), cap(a.heavy), mib(a.heavyAt))}
		case <-ctx.Done():
			return nil, &Error{} // the client left
		}
	}
	if e := a.Budget(ctx, cost, what); e != nil {
		if held {
			<-a.heavy
		}
		return nil, e
	}
	return func() {
		a.Release(cost)
		if held {
			<-a.heavy
		}
	}, nil
}

// Admit admits a request expected to hold cost bytes (Reserve), or answers
// its refusal in d. ok false means an answer was written.
func (a *Admission) Admit(w http.ResponseWriter, r *http.Request, d Dialect, cost int64, what string) (release func(), ok bool) {
	release, e := a.Reserve(r.Context(), cost, what)
	if e != nil {
		TurnAway(w, r, d, e)
		return nil, false
	}
	return release, true
}

// Expensive wraps a route that may hold much memory or a core: it counts
// the request against its tenant's limit of expensive requests in flight,
// deciding before the body is read, and answers 429 in d past it.
func (a *Admission) Expensive(d Dialect, next Handler) Handler {
	return func(w http.ResponseWriter, r *http.Request, tenant string) {
		ctx := r.Context()
		limit, err := a.concurrent(ctx, tenant)
		if err != nil {
			Internal(w, d, a.log, "reading tenant settings", err)
			return
		}
		release, e := a.TenantSlot(ctx, tenant, limit)
		if e != nil {
			TurnAway(w, r, d, e)
			return
		}
		defer release()
		next(w, r, tenant)
	}
}

// WithBody wraps a route whose cost is its body: it admits the body's
// length (limit's when the length is unknown or larger) times BodyFactor,
// and runs a heavy one's work on a thread of its own (cpu.Apart).
func (a *Admission) WithBody(d Dialect, limit func() int64, next Handler) Handler {
	return func(w http.ResponseWriter, r *http.Request, tenant string) {
		size := limit()
		if r.ContentLength >= 0 && r.ContentLength < size {
			size = r.ContentLength
		}
		cost := size * BodyFactor
		release, ok := a.Admit(w, r, d, cost, fmt.Sprintf("a body of %d bytes", size))
		if !ok {
			return
		}
		defer release()
		if a.IsHeavy(cost) {
			// Reading, decoding and checking a large body takes a core for
			// a while, on a thread of its own; the heavy slot bounds how
			// many do at once.
			cpu.Apart(func() { next(w, r, tenant) })
			return
		}
		next(w, r, tenant)
	}
}

// TurnAway answers a request admission refused, in d, with its body left
// unread: the connection closes after the answer, so the server neither
// waits for the body nor reads any of it (net/http would otherwise read up
// to 256 KiB before answering, to keep the connection).
func TurnAway(w http.ResponseWriter, r *http.Request, d Dialect, e *Error) {
	if e.Status != 0 && r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	Refuse(w, d, e)
}

// mib formats a size in MiB for a message.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
