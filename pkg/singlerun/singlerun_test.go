package singlerun_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/singlerun"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

const (
	tenant = "acme"
	kind   = "test-runs"
)

func setup(t *testing.T) *store.Store {
	t.Helper()
	st := pgtest.New(t)
	require.NoError(t, st.EnsureTenant(context.Background(), tenant, "Acme"))
	return st
}

func runs(t *testing.T, st *store.Store, lease time.Duration) *singlerun.Runs {
	t.Helper()
	r, err := singlerun.New(st, singlerun.Config{Kind: kind, Lease: lease, Log: bustest.Logger(t)})
	require.NoError(t, err)
	return r
}

func lease(t *testing.T, st *store.Store, key string) store.RunLease {
	t.Helper()
	var l store.RunLease
	require.NoError(t, st.InTx(context.Background(), tenant, func(tx *store.Tx) error {
		var err error
		l, err = tx.RunLease(context.Background(), kind, key)
		return err
	}))
	return l
}

// overlap counts the runs of each key and the most that ran at once.
type overlap struct {
	mu      sync.Mutex
	active  map[string]int
	most    map[string]int
	started map[string]int
}

func newOverlap() *overlap {
	return &overlap{active: map[string]int{}, most: map[string]int{}, started: map[string]int{}}
}

func (o *overlap) enter(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.active[key]++
	o.started[key]++
	o.most[key] = max(o.most[key], o.active[key])
}

func (o *overlap) leave(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.active[key]--
}

// TestRequestsWhileARunHoldsTheKeyCoalesceIntoOneTrailingRun: while a run
// holds a key, ten more requests return at once; the holder then runs
// exactly once more and lets the key go.
func TestRequestsWhileARunHoldsTheKeyCoalesceIntoOneTrailingRun(t *testing.T) {
	t.Parallel()
	st := setup(t)
	r := runs(t, st, 0)
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	work := func(context.Context, singlerun.Claim) error {
		if calls.Add(1) == 1 {
			close(started)
			<-release
		}
		return nil
	}
	done := make(chan error, 1)
	go func() {
		ran, err := r.Request(ctx, tenant, "scope-a", work, singlerun.Options{})
		if !ran {
			err = errors.Join(err, errors.New("the first request did not run"))
		}
		done <- err
	}()
	<-started
	for range 10 {
		ran, err := r.Request(ctx, tenant, "scope-a", work, singlerun.Options{})
		require.NoError(t, err)
		require.False(t, ran, "the key is held: the request is coalesced")
	}
	require.True(t, lease(t, st, "scope-a").Pending)
	// Another key is not held by the run of the first.
	ran, err := r.Request(ctx, tenant, "scope-b", func(context.Context, singlerun.Claim) error { return nil }, singlerun.Options{})
	require.NoError(t, err)
	require.True(t, ran)

	close(release)
	require.NoError(t, <-done)
	require.EqualValues(t, 2, calls.Load(), "the first run, then one trailing run for the ten requests")
	l := lease(t, st, "scope-a")
	require.False(t, l.Pending)
	require.Empty(t, l.Owner, "the key is free again")
	require.EqualValues(t, 2, l.Runs)
}

// TestOneRunPerKeyAcrossReplicas: two replicas, each with its own pool,
// get many requests for three keys at once. No key ever runs twice at the
// same time, and the last run of every key starts after its last request.
func TestOneRunPerKeyAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx := context.Background()
	var replicas []*singlerun.Runs
	for i := range 2 {
		st, err := store.Open(ctx, store.Config{URL: url, MaxConns: 8})
		require.NoError(t, err)
		t.Cleanup(st.Close)
		if i == 0 {
			require.NoError(t, st.EnsureTenant(ctx, tenant, "Acme"))
		}
		replicas = append(replicas, runs(t, st, 0))
	}

	o := newOverlap()
	var (
		mu           sync.Mutex
		lastRequest  = map[string]time.Time{}
		lastRunStart = map[string]time.Time{}
	)
	work := func(_ context.Context, c singlerun.Claim) error {
		o.enter(c.Key)
		defer o.leave(c.Key)
		mu.Lock()
		lastRunStart[c.Key] = time.Now()
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		return nil
	}
	errs := make(chan error, 60)
	var wg sync.WaitGroup
	for i := range 60 {
		wg.Go(func() {
			key := fmt.Sprintf("key-%d", i%3)
			mu.Lock()
			if now := time.Now(); now.After(lastRequest[key]) {
				lastRequest[key] = now
			}
			mu.Unlock()
			_, err := replicas[i%2].Request(ctx, tenant, key, work, singlerun.Options{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for k := range 3 {
		key := fmt.Sprintf("key-%d", k)
		require.Equal(t, 1, o.most[key], "%s never ran twice at once", key)
		require.GreaterOrEqual(t, o.started[key], 1)
		require.False(t, lastRunStart[key].Before(lastRequest[key]), "%s: a run started after the last request", key)
	}
}

// TestALostLeaseCancelsTheWork: when another worker takes the key over,
// the holder's work is cancelled, its result dropped, and Check refuses
// its last write.
func TestALostLeaseCancelsTheWork(t *testing.T) {
	t.Parallel()
	st := setup(t)
	r := runs(t, st, 600*time.Millisecond)
	ctx := context.Background()
	var checked error
	running := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := r.Request(ctx, tenant, "scope-a", func(ctx context.Context, c singlerun.Claim) error {
			close(running)
			<-ctx.Done()
			checked = st.InTx(context.Background(), tenant, func(tx *store.Tx) error { return c.Check(context.Background(), tx) })
			return ctx.Err()
		}, singlerun.Options{})
		done <- err
	}()
	<-running
	_, err := pgtest.Admin(t, st).Exec(ctx, `UPDATE run_leases SET owner = 'another-worker' WHERE tenant_id = $1 AND kind = $2 AND key = 'scope-a'`, tenant, kind)
	require.NoError(t, err)
	select {
	case err := <-done:
		require.NoError(t, err, "a lost run is dropped, not failed")
	case <-time.After(30 * time.Second):
		t.Fatal("the work was not cancelled")
	}
	require.ErrorIs(t, checked, singlerun.ErrLost)
	require.Equal(t, "another-worker", lease(t, st, "scope-a").Owner, "the new holder keeps the key")
}

// TestAFailedRunLetsGoAndKeepsWhatIsPending: a run that fails returns its
// error and frees the key; what was requested meanwhile stays pending.
func TestAFailedRunLetsGoAndKeepsWhatIsPending(t *testing.T) {
	t.Parallel()
	st := setup(t)
	r := runs(t, st, 0)
	ctx := context.Background()
	boom := errors.New("boom")
	ran, err := r.Request(ctx, tenant, "scope-a", func(ctx context.Context, _ singlerun.Claim) error {
		coalesced, err := r.Request(ctx, tenant, "scope-a", nil, singlerun.Options{})
		require.NoError(t, err)
		require.False(t, coalesced)
		return boom
	}, singlerun.Options{})
	require.True(t, ran)
	require.ErrorIs(t, err, boom)
	l := lease(t, st, "scope-a")
	require.Empty(t, l.Owner)
	require.True(t, l.Pending)
}

// TestStoppingLeavesTheTrailingRunToTheSweep: a worker that is stopping
// finishes the run under way but starts no trailing run; the sweep (of
// another worker) runs it, and then finds nothing more.
func TestStoppingLeavesTheTrailingRunToTheSweep(t *testing.T) {
	t.Parallel()
	st := setup(t)
	r := runs(t, st, 0)
	ctx := context.Background()
	stop := make(chan struct{})
	var calls atomic.Int64
	work := func(ctx context.Context, _ singlerun.Claim) error {
		if calls.Add(1) == 1 {
			_, err := r.Request(ctx, tenant, "scope-a", nil, singlerun.Options{})
			require.NoError(t, err)
			close(stop)
		}
		return nil
	}
	ran, err := r.Request(ctx, tenant, "scope-a", work, singlerun.Options{Stopping: stop})
	require.NoError(t, err)
	require.True(t, ran)
	require.EqualValues(t, 1, calls.Load(), "no trailing run while stopping")
	l := lease(t, st, "scope-a")
	require.True(t, l.Pending)
	require.Empty(t, l.Owner)

	other := runs(t, st, 0)
	var swept []string
	n, err := other.Sweep(ctx, func(_ context.Context, c singlerun.Claim) error {
		swept = append(swept, c.Tenant+"/"+c.Key)
		return nil
	}, singlerun.Options{})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"acme/scope-a"}, swept)
	require.False(t, lease(t, st, "scope-a").Pending)
	n, err = other.Sweep(ctx, func(context.Context, singlerun.Claim) error { return nil }, singlerun.Options{})
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to sweep")
}

// TestSweepTakesOverAnExpiredLease: workers died holding keys, one with a
// request pending, one mid-run with none (a sweep's run, or a trailing
// run, whose requests were acknowledged long ago); once their leases run
// out the sweep runs both keys, while a live lease and an idle key are
// left alone.
func TestSweepTakesOverAnExpiredLease(t *testing.T) {
	t.Parallel()
	st := setup(t)
	ctx := context.Background()
	_, err := pgtest.Admin(t, st).Exec(ctx, `
		INSERT INTO run_leases (tenant_id, kind, key, owner, lease_until, pending) VALUES
		($1, $2, 'dead', 'a-dead-worker', now() - interval '1 second', true),
		($1, $2, 'died-mid-run', 'a-dead-worker', now() - interval '2 seconds', false),
		($1, $2, 'alive', 'a-live-worker', now() + interval '1 hour', true),
		($1, $2, 'idle', '', NULL, false),
		($1, 'another-kind', 'dead', 'a-dead-worker', now() - interval '1 second', true)`, tenant, kind)
	require.NoError(t, err)
	r := runs(t, st, 0)
	var swept []string
	n, err := r.Sweep(ctx, func(_ context.Context, c singlerun.Claim) error {
		swept = append(swept, c.Key)
		return nil
	}, singlerun.Options{})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []string{"died-mid-run", "dead"}, swept, "longest expired first")
	require.Equal(t, "a-live-worker", lease(t, st, "alive").Owner)
	require.Empty(t, lease(t, st, "died-mid-run").Owner, "the sweep's run let the key go")
	n, err = r.Sweep(ctx, func(context.Context, singlerun.Claim) error { return nil }, singlerun.Options{})
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to sweep")
	ran, err := r.Request(ctx, tenant, "alive", nil, singlerun.Options{})
	require.NoError(t, err)
	require.False(t, ran, "a live lease holds its key")
}

func TestNewNeedsAKind(t *testing.T) {
	t.Parallel()
	_, err := singlerun.New(nil, singlerun.Config{})
	require.Error(t, err)
}

// TestUnfinishedWorkIsLeftPending: work that stops before it is done
// leaves the key free with a run pending, which the sweep makes.
func TestUnfinishedWorkIsLeftPending(t *testing.T) {
	t.Parallel()
	st := setup(t)
	r := runs(t, st, 0)
	ctx := context.Background()
	ran, err := r.Request(ctx, tenant, "scope-a", func(context.Context, singlerun.Claim) error { return singlerun.ErrUnfinished }, singlerun.Options{})
	require.NoError(t, err)
	require.True(t, ran)
	l := lease(t, st, "scope-a")
	require.True(t, l.Pending)
	require.Empty(t, l.Owner)
	n, err := r.Sweep(ctx, func(context.Context, singlerun.Claim) error { return nil }, singlerun.Options{})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.False(t, lease(t, st, "scope-a").Pending)
}
