package llm_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// fake is a provider answering from a list of results, one per attempt
// (the last repeats), and counting its calls.
type fake struct {
	mu      sync.Mutex
	results []result
	calls   int
}

type result struct {
	resp llm.Response
	err  error
}

func (f *fake) Name() string { return "fake" }

func (f *fake) Complete(ctx context.Context, _ llm.Request) (llm.Response, error) {
	f.mu.Lock()
	r := f.results[min(f.calls, len(f.results)-1)]
	f.calls++
	f.mu.Unlock()
	if errors.Is(r.err, context.DeadlineExceeded) {
		<-ctx.Done()
		return llm.Response{}, ctx.Err()
	}
	return r.resp, r.err
}

func (f *fake) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func ok(text string, u llm.Usage) result {
	return result{resp: llm.Response{Text: text, Model: "m-1", Usage: u}}
}

func fail(kind llm.ErrorKind) result {
	return result{err: &llm.Error{Kind: kind, Err: errors.New("scripted")}}
}

// sleeps is a Sleep that returns at once and keeps the delays.
type sleeps struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

func req() llm.Request { return llm.Request{Tenant: "acme", Task: llm.TaskNotes} }

func TestGuardBackoffGrowsWithinBounds(t *testing.T) {
	t.Parallel()
	p := &fake{results: []result{fail(llm.KindServer)}}
	s := &sleeps{}
	g := llm.Guard(p, llm.GuardOptions{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: 3 * time.Second, Sleep: s.sleep})
	_, err := g.Complete(context.Background(), req())
	require.Equal(t, llm.KindServer, llm.KindOf(err))
	require.Equal(t, 5, p.count())
	delays := s.all()
	require.Len(t, delays, 4)
	for i, full := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
		require.GreaterOrEqual(t, delays[i], full/2, "delay %d", i)
		require.LessOrEqual(t, delays[i], full, "delay %d", i)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempt int
		full    time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second},
		{40, time.Second},
	} {
		for range 20 {
			d := llm.Backoff(tc.attempt, 100*time.Millisecond, time.Second)
			require.GreaterOrEqual(t, d, tc.full/2, "attempt %d", tc.attempt)
			require.LessOrEqual(t, d, tc.full, "attempt %d", tc.attempt)
		}
	}
	require.Zero(t, llm.Backoff(1, 0, time.Second))
}

func TestGuardDefaultsToFourAttempts(t *testing.T) {
	t.Parallel()
	p := &fake{results: []result{fail(llm.KindRateLimited)}}
	s := &sleeps{}
	_, err := llm.Guard(p, llm.GuardOptions{Sleep: s.sleep}).Complete(context.Background(), req())
	require.Equal(t, llm.KindRateLimited, llm.KindOf(err))
	require.Equal(t, llm.DefaultMaxAttempts, p.count())
	for _, d := range s.all() {
		require.LessOrEqual(t, d, llm.DefaultMaxDelay)
		require.GreaterOrEqual(t, d, llm.DefaultBaseDelay/2)
	}
}

func TestGuardDoesNotRetryWhatCannotSucceed(t *testing.T) {
	t.Parallel()
	for _, kind := range []llm.ErrorKind{llm.KindPromptTooLong, llm.KindRequest, llm.KindAuth, llm.KindBadResponse, llm.KindUnsupported} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			p := &fake{results: []result{fail(kind)}}
			s := &sleeps{}
			_, err := llm.Guard(p, llm.GuardOptions{Sleep: s.sleep}).Complete(context.Background(), req())
			require.Equal(t, kind, llm.KindOf(err))
			require.Equal(t, 1, p.count())
			require.Empty(t, s.all())
		})
	}
}

func TestGuardRetryAfterIsCapped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		retryAfter time.Duration
		want       time.Duration
	}{
		{"honoured", 2 * time.Second, 2 * time.Second},
		{"capped", time.Hour, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &fake{results: []result{{err: &llm.Error{Kind: llm.KindRateLimited, RetryAfter: tc.retryAfter, Err: errors.New("429")}}, ok("x", llm.Usage{})}}
			s := &sleeps{}
			_, err := llm.Guard(p, llm.GuardOptions{MaxDelay: 10 * time.Second, Sleep: s.sleep}).Complete(context.Background(), req())
			require.NoError(t, err)
			require.Equal(t, []time.Duration{tc.want}, s.all())
		})
	}
}

func TestGuardStopsWhenTheCallerGivesUp(t *testing.T) {
	t.Parallel()
	p := &fake{results: []result{fail(llm.KindServer)}}
	ledger := llm.NewMemoryLedger(0)
	ctx, cancel := context.WithCancel(context.Background())
	sleep := func(ctx context.Context, _ time.Duration) error {
		cancel() // the caller gives up while the guard waits
		return ctx.Err()
	}
	_, err := llm.Guard(p, llm.GuardOptions{Sleep: sleep, Recorder: ledger}).Complete(ctx, req())
	require.Equal(t, llm.KindServer, llm.KindOf(err), "the last provider error is returned")
	require.Equal(t, 1, p.count())
	calls := ledger.Calls()
	require.Len(t, calls, 1, "recorded although the context is cancelled")
	require.Equal(t, 1, calls[0].Attempts)
}

func TestGuardTimesOutEachAttempt(t *testing.T) {
	t.Parallel()
	// The provider returns the bare context error of the attempt deadline.
	p := &fake{results: []result{{err: context.DeadlineExceeded}, ok("late but fine", llm.Usage{})}}
	s := &sleeps{}
	resp, err := llm.Guard(p, llm.GuardOptions{Timeout: 10 * time.Millisecond, Sleep: s.sleep}).Complete(context.Background(), req())
	require.NoError(t, err)
	require.Equal(t, "late but fine", resp.Text)
	require.Equal(t, 2, p.count())
	require.Len(t, s.all(), 1)
}

func TestGuardSumsUsageOverAttemptsAndRecordsOnce(t *testing.T) {
	t.Parallel()
	// A failed attempt that still reported usage (an answer that was cut).
	first := result{resp: llm.Response{Usage: llm.Usage{InputTokens: 50, OutputTokens: 5}},
		err: &llm.Error{Kind: llm.KindServer, Err: errors.New("cut")}}
	p := &fake{results: []result{first, ok("done", llm.Usage{InputTokens: 50, OutputTokens: 20, CacheReadTokens: 30})}}
	ledger := llm.NewMemoryLedger(0)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	g := llm.Guard(p, llm.GuardOptions{Recorder: ledger, Sleep: (&sleeps{}).sleep, Now: clock})
	require.Equal(t, "fake", g.Name())
	resp, err := g.Complete(context.Background(), req())
	require.NoError(t, err)
	want := llm.Usage{InputTokens: 100, OutputTokens: 25, CacheReadTokens: 30}
	require.Equal(t, want, resp.Usage)
	require.Equal(t, []llm.Call{{
		Tenant: "acme", Task: llm.TaskNotes, Provider: "fake", Model: "m-1", Usage: want, Attempts: 2,
		Duration: time.Second, At: time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC),
	}}, ledger.Calls())
	require.Equal(t, int64(155), ledger.Spent("acme"))
}

type failingRecorder struct{}

func (failingRecorder) Record(context.Context, llm.Call) error { return errors.New("database down") }

func TestGuardReturnsARecordingFailure(t *testing.T) {
	t.Parallel()
	p := &fake{results: []result{ok("done", llm.Usage{InputTokens: 1})}}
	resp, err := llm.Guard(p, llm.GuardOptions{Recorder: failingRecorder{}}).Complete(context.Background(), req())
	require.ErrorContains(t, err, "database down")
	require.Equal(t, "done", resp.Text, "the answer is still there")

	p = &fake{results: []result{fail(llm.KindAuth)}}
	_, err = llm.Guard(p, llm.GuardOptions{Recorder: failingRecorder{}}).Complete(context.Background(), req())
	require.ErrorContains(t, err, "database down")
	require.Equal(t, llm.KindAuth, llm.KindOf(err), "the call's own error keeps its kind")
}

type refusing struct{ err error }

func (r refusing) Allow(context.Context, string) error { return r.err }

func TestGuardBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"plain error", errors.New("over the monthly quota")},
		{"already a budget error", &llm.Error{Kind: llm.KindBudget, Err: errors.New("spent")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &fake{results: []result{ok("never", llm.Usage{})}}
			ledger := llm.NewMemoryLedger(0)
			_, err := llm.Guard(p, llm.GuardOptions{Budget: refusing{tc.err}, Recorder: ledger}).Complete(context.Background(), req())
			require.Equal(t, llm.KindBudget, llm.KindOf(err))
			require.ErrorIs(t, err, tc.err)
			require.Zero(t, p.count())
			require.Empty(t, ledger.Calls(), "no call was made")
		})
	}
}

func TestGuardMetrics(t *testing.T) {
	t.Parallel()
	reader := telemetrytest.New(t)
	p := &fake{results: []result{fail(llm.KindRateLimited), ok("a", llm.Usage{InputTokens: 10, OutputTokens: 2, CacheReadTokens: 100, CacheWriteTokens: 7})}}
	opts := llm.GuardOptions{Meter: reader.Meter(), Sleep: (&sleeps{}).sleep}
	_, err := llm.Guard(p, opts).Complete(context.Background(), req())
	require.NoError(t, err)

	p2 := &fake{results: []result{fail(llm.KindPromptTooLong)}}
	_, err = llm.Guard(p2, opts).Complete(context.Background(), req())
	require.Error(t, err)

	opts.Budget = refusing{errors.New("no")}
	_, err = llm.Guard(p2, opts).Complete(context.Background(), req())
	require.Error(t, err)

	for kind, want := range map[string]int64{"input": 10, "output": 2, "cache_read": 100, "cache_write": 7} {
		require.Equal(t, want, reader.Sum("mnemos.llm.tokens", "kind", kind), kind)
	}
	require.Equal(t, int64(119), reader.Sum("mnemos.llm.tokens", "tenant", "acme"))
	require.Equal(t, int64(119), reader.Sum("mnemos.llm.tokens", "task", "notes"))
	require.Equal(t, int64(1), reader.Sum("mnemos.llm.calls", "outcome", "ok"), "one call, however many attempts")
	require.Equal(t, int64(1), reader.Sum("mnemos.llm.calls", "outcome", "prompt_too_long"))
	require.Equal(t, int64(1), reader.Sum("mnemos.llm.calls", "outcome", "budget_exhausted"))
	require.Equal(t, int64(3), reader.Sum("mnemos.llm.calls", "", ""))
}

func TestCallOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		call llm.Call
		want string
	}{
		{llm.Call{}, "ok"},
		{llm.Call{Err: errors.New("x"), ErrorKind: llm.KindServer}, "server"},
		{llm.Call{Err: context.Canceled}, "error"},
	} {
		require.Equal(t, tc.want, tc.call.Outcome())
	}
}
