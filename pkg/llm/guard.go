package llm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Budget decides whether a tenant may make another call.
type Budget interface {
	// Allow returns nil when tenant may call, else why not.
	Allow(ctx context.Context, tenant string) error
}

// Recorder keeps every call's usage.
type Recorder interface {
	Record(ctx context.Context, c Call) error
}

// Pricer says what a call cost, by its tenant's prices.
type Pricer interface {
	Cost(ctx context.Context, c Call) (USD, error)
}

// Call is one guarded call as recorded: all its attempts together.
type Call struct {
	Tenant   string
	Task     Task
	Provider string
	// Model is the model that answered, else the one asked for (may be "").
	Model string
	// Usage is the sum over the attempts that reported any.
	Usage Usage
	// Cost is what Usage cost, by the Pricer (0 without one).
	Cost     USD
	Attempts int
	Duration time.Duration
	// At is when the call started.
	At time.Time
	// ErrorKind is the kind of the final error; "" when the call succeeded
	// or failed with an error that is not an *Error (Err tells).
	ErrorKind ErrorKind
	// Err is the final error, nil when the call succeeded.
	Err error
	// Forked reports that the call followed the agent's own request
	// (Request.Prefix), to read the provider's prompt cache.
	Forked bool
}

// Outcome names how the call ended, for metrics and logs: "ok", the error
// kind, or "error" for an error of no kind (a cancelled call, say).
func (c Call) Outcome() string {
	switch {
	case c.Err == nil:
		return "ok"
	case c.ErrorKind != "":
		return string(c.ErrorKind)
	default:
		return "error"
	}
}

// ErrBudgetExhausted is what a Budget's refusal wraps when the tenant's
// daily budget, of tokens or of money, is spent.
var ErrBudgetExhausted = errors.New("budget exhausted")

// Defaults of GuardOptions.
const (
	DefaultTimeout     = 5 * time.Minute
	DefaultMaxAttempts = 4
	DefaultBaseDelay   = time.Second
	DefaultMaxDelay    = 30 * time.Second
)

// GuardOptions configure Guard. Every field is optional.
type GuardOptions struct {
	// Timeout bounds each attempt (DefaultTimeout; negative: no bound but
	// the caller's context).
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one call, the first included
	// (DefaultMaxAttempts).
	MaxAttempts int
	// BaseDelay is the wait before the first retry, doubled for each later
	// one up to MaxDelay, each with jitter (a delay d is drawn from
	// [d/2, d]). A Retry-After hint on the error replaces the backoff, still
	// capped at MaxDelay.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// Budget, when set, is asked before every call; a refusal is
	// KindBudget and the provider is not called.
	Budget Budget
	// Recorder, when set, records every call that reached the provider.
	Recorder Recorder
	// Pricer, when set, prices every call that reached the provider
	// (Call.Cost) before it is recorded and counted (mnemos.llm.cost).
	Pricer Pricer
	// Meter, when set, counts tokens (mnemos.llm.tokens) and calls
	// (mnemos.llm.calls), and times them (mnemos.llm.duration).
	Meter metric.Meter
	// TracerProvider, when set, makes a client span of every call, with
	// the GenAI semantic conventions' attributes (operation, provider,
	// model, token usage, error type) and the task.
	TracerProvider trace.TracerProvider
	// Sleep waits d, returning early with ctx's error when ctx is done.
	// Tests replace it so they never really wait.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock of Call.At and Call.Duration (time.Now).
	Now func() time.Time
}

func (o GuardOptions) withDefaults() GuardOptions {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = DefaultBaseDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	o.Meter = defaults.Meter(o.Meter)
	if o.TracerProvider == nil {
		o.TracerProvider = tracenoop.NewTracerProvider()
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Guard wraps p with what every model call needs, in one place: the
// tenant's budget checked first, a timeout on each attempt, retries of
// retryable errors (rate limits, server errors, timeouts) with exponential
// backoff and jitter, a bounded number of attempts, the call's usage
// recorded once, and counted, whether it succeeded or not, and the answer
// cleared of NUL characters (withoutNUL), which no service could store.
func Guard(p Provider, opts GuardOptions) Provider {
	o := opts.withDefaults()
	return &guarded{p: p, o: o, m: newGuardMetrics(o.Meter), tracer: o.TracerProvider.Tracer(tracerName)}
}

type guarded struct {
	p      Provider
	o      GuardOptions
	m      guardMetrics
	tracer trace.Tracer
}

// Name is the wrapped provider's name.
func (g *guarded) Name() string { return g.p.Name() }

// Complete calls the wrapped provider as Guard describes. A failure to
// record the call is returned (joined to the call's own error, if any)
// with the response, which the caller may still use.
func (g *guarded) Complete(ctx context.Context, req Request) (Response, error) {
	ctx, span := g.startSpan(ctx, req)
	defer span.End()
	if g.o.Budget != nil {
		if err := g.o.Budget.Allow(ctx, req.Tenant); err != nil {
			g.m.refused(ctx, req, g.p.Name())
			err = budgetError(req.Tenant, err)
			g.endSpan(span, req, Call{ErrorKind: KindBudget, Err: err}, Response{})
			return Response{}, err
		}
	}

	start := g.o.Now()
	var (
		resp     Response
		err      error
		total    Usage
		attempts int
	)
	for {
		attempts++
		resp, err = g.attempt(ctx, req)
		total = total.Add(resp.Usage)
		if err == nil || !Retryable(err) || attempts >= g.o.MaxAttempts || ctx.Err() != nil {
			break
		}
		if g.o.Sleep(ctx, g.delay(attempts, err)) != nil {
			break
		}
	}
	resp.Usage = total
	resp = withoutNUL(req, resp)

	call := Call{
		Tenant:    req.Tenant,
		Task:      req.Task,
		Provider:  g.p.Name(),
		Model:     resp.Model,
		Usage:     total,
		Attempts:  attempts,
		Duration:  g.o.Now().Sub(start),
		At:        start,
		ErrorKind: KindOf(err),
		Err:       err,
		Forked:    resp.Forked,
	}
	if call.Model == "" {
		call.Model = req.Model
	}
	var perr error
	if g.o.Pricer != nil {
		// A call that could not be priced is recorded at no cost, and the
		// caller is told.
		if call.Cost, perr = g.o.Pricer.Cost(context.WithoutCancel(ctx), call); perr != nil {
			call.Cost, perr = 0, fmt.Errorf("llm: price the call: %w", perr)
		}
	}
	g.endSpan(span, req, call, resp)
	g.m.call(ctx, call)
	if g.o.Recorder != nil {
		// The call happened even when the caller has given up on it.
		if rerr := g.o.Recorder.Record(context.WithoutCancel(ctx), call); rerr != nil {
			return resp, errors.Join(err, perr, fmt.Errorf("llm: record usage: %w", rerr))
		}
	}
	if perr != nil {
		return resp, errors.Join(err, perr)
	}
	return resp, err
}

// attempt makes one call under the attempt timeout. A provider that
// returned a bare deadline error for the attempt's own deadline gets it
// classified as KindTimeout, so it is retried.
func (g *guarded) attempt(ctx context.Context, req Request) (Response, error) {
	actx := ctx
	if g.o.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, g.o.Timeout)
		defer cancel()
	}
	resp, err := g.p.Complete(actx, req)
	if err != nil && KindOf(err) == "" && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		err = &Error{Kind: KindTimeout, Err: err}
	}
	if err != nil {
		trace.SpanFromContext(ctx).AddEvent("attempt failed", trace.WithAttributes(
			semconv.ErrorTypeKey.String(errorType(err)), attribute.String("exception.message", err.Error())))
	}
	return resp, err
}

// delay is the wait after the attempt-th failed attempt (1-based).
func (g *guarded) delay(attempt int, err error) time.Duration {
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return min(e.RetryAfter, g.o.MaxDelay)
	}
	return Backoff(attempt, g.o.BaseDelay, g.o.MaxDelay)
}

// Backoff is the delay after the attempt-th failure (1-based): base doubled
// attempt-1 times, capped at limit, then drawn from [d/2, d] so that many
// callers retrying at once spread out.
func Backoff(attempt int, base, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1) //nolint:gosec // jitter needs no cryptographic randomness
}

func budgetError(tenant string, err error) error {
	if KindOf(err) == KindBudget {
		return err
	}
	return &Error{Kind: KindBudget, Err: fmt.Errorf("llm: tenant %q: %w", tenant, err)}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// guardMetrics are the instruments Guard counts with.
type guardMetrics struct {
	tokens   metric.Int64Counter
	cost     metric.Int64Counter
	calls    metric.Int64Counter
	duration metric.Float64Histogram
}

// newGuardMetrics makes the instruments. An instrument the meter refuses
// (an SDK's error for a bad name, which these are not) is replaced by a
// no-op one: metrics never stop a call.
func newGuardMetrics(m metric.Meter) guardMetrics {
	fallback := defaults.Meter(nil)
	tokens, err := m.Int64Counter("mnemos.llm.tokens", metric.WithUnit("{token}"),
		metric.WithDescription("LLM tokens used, by tenant, task, provider and kind (input, output, cache_read, cache_write)."))
	if err != nil {
		tokens, _ = fallback.Int64Counter("mnemos.llm.tokens")
	}
	cost, err := m.Int64Counter("mnemos.llm.cost", metric.WithUnit("{nanodollar}"),
		metric.WithDescription("What LLM calls cost by the tenant's prices, in nano-dollars (10^-9 USD), by tenant, task, provider and model."))
	if err != nil {
		cost, _ = fallback.Int64Counter("mnemos.llm.cost")
	}
	calls, err := m.Int64Counter("mnemos.llm.calls", metric.WithUnit("{call}"),
		metric.WithDescription("LLM calls, by tenant, task, provider, outcome (ok or the error kind) and whether the call forked the agent's request."))
	if err != nil {
		calls, _ = fallback.Int64Counter("mnemos.llm.calls")
	}
	duration, err := m.Float64Histogram("mnemos.llm.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of LLM calls, retries and their waits included, by task, provider and outcome."))
	if err != nil {
		duration, _ = fallback.Float64Histogram("mnemos.llm.duration")
	}
	return guardMetrics{tokens: tokens, cost: cost, calls: calls, duration: duration}
}

func (m guardMetrics) call(ctx context.Context, c Call) {
	base := []attribute.KeyValue{
		attribute.String("tenant", c.Tenant),
		attribute.String("task", string(c.Task)),
		attribute.String("provider", c.Provider),
	}
	m.calls.Add(ctx, 1, metric.WithAttributes(append(base, attribute.String("outcome", c.Outcome()), attribute.Bool("forked", c.Forked))...))
	if c.Cost > 0 {
		m.cost.Add(ctx, int64(c.Cost), metric.WithAttributes(append(base, attribute.String("model", c.Model))...))
	}
	m.duration.Record(ctx, c.Duration.Seconds(), metric.WithAttributes(
		attribute.String("task", string(c.Task)), attribute.String("provider", c.Provider), attribute.String("outcome", c.Outcome())))
	for _, k := range []struct {
		kind string
		n    int64
	}{
		{"input", c.Usage.InputTokens},
		{"output", c.Usage.OutputTokens},
		{"cache_read", c.Usage.CacheReadTokens},
		{"cache_write", c.Usage.CacheWriteTokens},
	} {
		if k.n > 0 {
			m.tokens.Add(ctx, k.n, metric.WithAttributes(append(base, attribute.String("kind", k.kind))...))
		}
	}
}

func (m guardMetrics) refused(ctx context.Context, req Request, provider string) {
	m.calls.Add(ctx, 1, metric.WithAttributes(
		attribute.String("tenant", req.Tenant),
		attribute.String("task", string(req.Task)),
		attribute.String("provider", provider),
		attribute.String("outcome", string(KindBudget)),
	))
}
