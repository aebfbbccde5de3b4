package gateway

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Admission bounds what the gateway holds at once, so that one tenant
// cannot take the process down: each tenant's expensive requests in flight
// (limits.Config.ConcurrentRequests, 429 past it), the bytes every request
// in flight expects to hold (Config.MaxInflightBytes, 503 past it) and the
// heavy requests (large context renders, large bodies) served at once
// (Config.HeavyRequests), which would otherwise take both cores of a small
// machine from every other tenant.
//
// The costs are estimates made before the work: a body's length times what
// decoding it holds, a context's stored size times what rendering it holds.

// Factors of the estimates, measured on the renders and turns of the
// hostile suite (tests/hostile).
const (
	// bodyFactor: a turn or pre-flight body is held as read, decoded into
	// messages, and (a turn) copied to the bus.
	bodyFactor = 4
	// renderPerByte and renderPerMessage: a context holds each stored
	// message as read, decoded, rendered and encoded; many tiny messages
	// cost their structures more than their bytes.
	renderPerByte    = 4
	renderPerMessage = 1536
	// renderBase covers what every render holds whatever the session: the
	// memory section, the recall candidates, the encoder's buffers.
	renderBase = 256 << 10
)

// admission is the gateway's state of what is in flight. Its hot path is
// atomic counters; the one lock guards the map of tenants' counters, never
// work.
type admission struct {
	budget   int64 // bytes; 0: no budget
	inflight atomic.Int64

	heavyAt   int64         // an estimate from which a request is heavy
	heavy     chan struct{} // one token per heavy request served; nil: no bound
	heavyWait time.Duration

	mu      sync.Mutex
	tenants map[string]*atomic.Int64 // tenant → expensive requests in flight
}

func newAdmission(cfg Config) *admission {
	a := &admission{budget: cfg.MaxInflightBytes, heavyAt: cfg.HeavyBytes, heavyWait: cfg.HeavyWait, tenants: map[string]*atomic.Int64{}}
	switch {
	case cfg.Heavy != nil:
		a.heavy = cfg.Heavy // shared with the process's other heavy work
	case cfg.HeavyRequests > 0:
		a.heavy = make(chan struct{}, cfg.HeavyRequests)
	}
	return a
}

func (a *admission) tenant(tenant string) *atomic.Int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.tenants[tenant]
	if n == nil {
		n = &atomic.Int64{}
		a.tenants[tenant] = n
	}
	return n
}

// isHeavy reports whether a request expected to hold cost bytes takes one
// of the heavy slots.
func (a *admission) isHeavy(cost int64) bool { return a.heavy != nil && cost >= a.heavyAt }

// reserve takes n bytes of the budget, or reports false when it cannot.
func (a *admission) reserve(n int64) bool {
	if a.budget <= 0 {
		return true
	}
	if a.inflight.Add(n) > a.budget {
		a.inflight.Add(-n)
		return false
	}
	return true
}

func (a *admission) release(n int64) {
	if a.budget > 0 {
		a.inflight.Add(-n)
	}
}

// turnAway answers a request admission refused in the route's dialect d:
// its body is left unread.
func turnAway(w http.ResponseWriter, r *http.Request, d httpapi.Dialect, e *httpapi.Error) {
	if e.Status != 0 {
		unread(w, r)
	}
	httpapi.Refuse(w, d, e)
}

// tenantSlot counts a request against its tenant's ConcurrentRequests in
// this process, or refuses it (429) past the limit.
func (g *Gateway) tenantSlot(ctx context.Context, tenant string, limit int) (release func(), f *httpapi.Error) {
	if limit <= 0 {
		return func() {}, nil
	}
	n := g.admission.tenant(tenant)
	if n.Add(1) > int64(limit) {
		n.Add(-1)
		g.cfg.Limits.Record(ctx, limits.LimitConcurrentRequests)
		return nil, &httpapi.Error{Status: http.StatusTooManyRequests, Code: limits.ReasonTooManyRequests, RetryAfter: "1", Message: fmt.Sprintf(
			"tenant %s has %d expensive requests (context, pre-flight, recall, compaction, turns, Messages API requests being managed) in flight in this process, its limit concurrent_requests; retry when one has been answered",
			tenant, limit)}
	}
	return func() { n.Add(-1) }, nil
}

// expensive wraps a route that may hold much memory or a core: it counts
// the request against its tenant's ConcurrentRequests, deciding before the
// body is read, and answers 429 past it.
func (g *Gateway) expensive(next func(http.ResponseWriter, *http.Request, string)) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, tenant string) {
		ctx := r.Context()
		set, err := g.settings.For(ctx, tenant)
		if err != nil {
			g.internal(w, "reading tenant settings", err)
			return
		}
		release, f := g.tenantSlot(ctx, tenant, set.Limits.ConcurrentRequests)
		if f != nil {
			turnAway(w, r, httpapi.Mnemos, f)
			return
		}
		defer release()
		next(w, r, tenant)
	}
}

// withBody wraps a route whose cost is its body: it admits the body's
// length (the route's limit when the length is unknown or larger) times
// bodyFactor (admitCost).
func (g *Gateway) withBody(limit func() int64, next func(http.ResponseWriter, *http.Request, string)) func(http.ResponseWriter, *http.Request, string) {
	return func(w http.ResponseWriter, r *http.Request, tenant string) {
		size := limit()
		if r.ContentLength >= 0 && r.ContentLength < size {
			size = r.ContentLength
		}
		cost := size * bodyFactor
		release, ok := g.admitCost(w, r, httpapi.Mnemos, cost, fmt.Sprintf("a body of %d bytes", size))
		if !ok {
			return
		}
		defer release()
		if g.admission.isHeavy(cost) {
			// Reading, decoding and checking a large body takes a core for
			// a while: it gets what other requests leave.
			limits.Background(func() { next(w, r, tenant) })
			return
		}
		next(w, r, tenant)
	}
}

// unread marks a refusal of a request whose body is left unread: the
// connection closes after the answer, so the server neither waits for the
// body nor reads any of it (net/http would otherwise read up to 256 KiB
// before answering, to keep the connection).
func unread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
}

// eventLimit is the largest turn event the gateway reads: its own limit, or
// the bus's max payload when smaller.
func (g *Gateway) eventLimit() int64 {
	limit := int64(g.cfg.MaxEventBytes)
	if mp := g.bus.MaxPayload(); mp > 0 && mp < limit {
		limit = mp
	}
	return limit
}

// budget reserves cost bytes of the process's budget for a request, or
// refuses it: 413 when what (the request's cost, described) is more than
// the whole budget, 503 overloaded when the budget is spent for now.
func (g *Gateway) budget(ctx context.Context, cost int64, what string) *httpapi.Error {
	a := g.admission
	if a.budget <= 0 {
		return nil
	}
	if cost > a.budget {
		g.cfg.Limits.Record(ctx, limits.LimitInflightBytes)
		return &httpapi.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: fmt.Sprintf(
			"%s would hold about %s, more than this process's whole budget of %s in flight (MNEMOS_MAX_INFLIGHT_BYTES)",
			what, mib(cost), mib(a.budget))}
	}
	if !a.reserve(cost) {
		g.cfg.Limits.Record(ctx, limits.LimitInflightBytes)
		return &httpapi.Error{Status: http.StatusServiceUnavailable, Code: limits.ReasonOverloaded, RetryAfter: "1", Message: fmt.Sprintf(
			"this process's budget of %s in flight (MNEMOS_MAX_INFLIGHT_BYTES) cannot take %s (about %s) now; retry shortly",
			mib(a.budget), what, mib(cost))}
	}
	return nil
}

// renderAdmission admits the render of a session's context by its stored
// size (reserve): a refusal, or an error when the session cannot be sized.
// A heavy render's ctx carries the pacer it renders by (Config.HeavyWork,
// HeavyRest).
func (g *Gateway) renderAdmission(ctx context.Context, tenant, id string) (_ context.Context, release func(), f *httpapi.Error, err error) {
	var size store.ContextSize
	err = g.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		size, err = tx.ContextSize(ctx, id)
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	cost := renderCost(size)
	release, f = g.reserve(ctx, cost, fmt.Sprintf("the context of session %s (%d messages, %d KiB stored)", id, size.Messages, size.Bytes>>10))
	if f != nil {
		return nil, nil, f, nil
	}
	if g.admission.isHeavy(cost) && g.cfg.HeavyRest > 0 {
		ctx = limits.WithPacer(ctx, limits.NewPacer(g.cfg.HeavyWork, g.cfg.HeavyRest))
	}
	return ctx, release, nil, nil
}

// admitCost admits a request expected to hold cost bytes (reserve), or
// answers its refusal. release gives back what was taken; ok false means
// an answer was written.
func (g *Gateway) admitCost(w http.ResponseWriter, r *http.Request, d httpapi.Dialect, cost int64, what string) (release func(), ok bool) {
	release, f := g.reserve(r.Context(), cost, what)
	if f != nil {
		turnAway(w, r, d, f)
		return nil, false
	}
	return release, true
}

// reserve admits a request expected to hold cost bytes: a heavy one first
// waits, boundedly, for one of the few heavy slots (its decoding or
// rendering takes a core), then every one reserves its cost of the budget.
// release gives back what was taken.
func (g *Gateway) reserve(ctx context.Context, cost int64, what string) (release func(), f *httpapi.Error) {
	a := g.admission
	var held bool
	if a.isHeavy(cost) {
		timer := time.NewTimer(a.heavyWait)
		defer timer.Stop()
		select {
		case a.heavy <- struct{}{}:
			held = true
		case <-timer.C:
			g.cfg.Limits.Record(ctx, limits.LimitInflightBytes)
			return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: limits.ReasonOverloaded, RetryAfter: "2", Message: fmt.Sprintf(
				"%s is a heavy request (about %s), and this process already serves its %d heavy requests (of at least %s) at once; retry shortly",
				what, mib(cost), cap(a.heavy), mib(a.heavyAt))}
		case <-ctx.Done():
			return nil, &httpapi.Error{} // the client left
		}
	}
	if f := g.budget(ctx, cost, what); f != nil {
		if held {
			<-a.heavy
		}
		return nil, f
	}
	return func() {
		a.release(cost)
		if held {
			<-a.heavy
		}
	}, nil
}

// mib formats a size in MiB for a message.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// renderCost estimates what rendering a context of size holds at its peak.
func renderCost(size store.ContextSize) int64 {
	return renderBase + size.Messages*renderPerMessage + size.Bytes*renderPerByte
}

// observeInflight reports the bytes in flight on a gauge.
func (g *Gateway) observeInflight(m metric.Meter) error {
	_, err := m.Int64ObservableGauge("mnemos.gateway.inflight_bytes",
		metric.WithDescription("Bytes the gateway's requests in flight expect to hold, against MNEMOS_MAX_INFLIGHT_BYTES."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(g.admission.inflight.Load())
			return nil
		}))
	if err != nil {
		return err
	}
	return g.observeContextCache(m)
}

// observeContextCache reports the context cache's reads, by whether the
// session was cached, the messages it fetched, and the bytes it holds.
func (g *Gateway) observeContextCache(m metric.Meter) error {
	reads, err := m.Int64ObservableCounter("mnemos.gateway.context_cache.reads",
		metric.WithDescription("Context reads by whether the session's messages were cached (result=hit) or read whole (result=miss)."))
	if err != nil {
		return err
	}
	fetched, err := m.Int64ObservableCounter("mnemos.gateway.context_cache.fetched_messages",
		metric.WithDescription("Messages context reads fetched from Postgres; a cached session fetches only those stored since."))
	if err != nil {
		return err
	}
	held, err := m.Int64ObservableGauge("mnemos.gateway.context_cache.bytes",
		metric.WithDescription("Bytes the context cache holds, against ContextCacheBytes (MNEMOS_CONTEXT_CACHE_BYTES)."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := g.contexts.Stats()
		o.ObserveInt64(reads, st.Hits, metric.WithAttributes(attribute.String("result", "hit")))
		o.ObserveInt64(reads, st.Misses, metric.WithAttributes(attribute.String("result", "miss")))
		o.ObserveInt64(fetched, st.Fetched)
		o.ObserveInt64(held, st.Bytes)
		return nil
	}, reads, fetched, held)
	return err
}
