package ttlcache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGetLoadsOncePerTTLAndForgetsFailures(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	c := New[int](time.Minute, 2)
	c.now = func() time.Time { return now }
	loads := 0
	load := func(_ context.Context, key string) (int, error) {
		loads++
		if key == "bad" {
			return 0, errors.New("no")
		}
		return len(key), nil
	}
	ctx := context.Background()
	for range 3 {
		v, err := c.Get(ctx, "abc", load)
		require.NoError(t, err)
		require.Equal(t, 3, v)
	}
	require.Equal(t, 1, loads, "cached within the TTL")

	now = now.Add(time.Minute)
	_, _ = c.Get(ctx, "abc", load)
	require.Equal(t, 2, loads, "expired at the TTL")

	_, err := c.Get(ctx, "bad", load)
	require.Error(t, err)
	_, err = c.Get(ctx, "bad", load)
	require.Error(t, err)
	require.Equal(t, 4, loads, "failures are not remembered")

	_, _ = c.Get(ctx, "de", load)
	_, _ = c.Get(ctx, "fgh", load) // the third key: the cache starts over
	require.Len(t, c.entries, 1)
}

// TestAZeroTTLLoadsEveryTime: a cache made with a TTL of zero answers
// each Get from a new load, even within one instant of the clock.
func TestAZeroTTLLoadsEveryTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	c := New[int](0, 10)
	c.now = func() time.Time { return now }
	loads := 0
	load := func(context.Context, string) (int, error) {
		loads++
		return loads, nil
	}
	for want := 1; want <= 3; want++ {
		v, err := c.Get(context.Background(), "k", load)
		require.NoError(t, err)
		require.Equal(t, want, v)
	}
	_, cached := c.Peek("k")
	require.False(t, cached)
}

// TestConcurrentMissesShareOneLoad: a burst of requests for an expired key
// asks the loader once; a caller that gives up does not fail the others,
// and a load that panics answers an error.
func TestConcurrentMissesShareOneLoad(t *testing.T) {
	t.Parallel()
	c := New[int](time.Minute, 10)
	var loads atomic.Int64
	release := make(chan struct{})
	load := func(ctx context.Context, key string) (int, error) {
		loads.Add(1)
		<-release
		return len(key), ctx.Err()
	}

	// One caller gives up before the load ends.
	gone, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error)
	go func() {
		_, err := c.Get(gone, "four", load)
		gaveUp <- err
	}()
	var wg sync.WaitGroup
	got := make([]int, 50)
	errs := make([]error, 50)
	for i := range got {
		wg.Go(func() { got[i], errs[i] = c.Get(context.Background(), "four", load) })
	}
	require.Eventually(t, func() bool { return loads.Load() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-gaveUp, context.Canceled, "the caller that gave up returns before the load ends")
	close(release)
	wg.Wait()
	for i := range got {
		require.NoError(t, errs[i])
		require.Equal(t, 4, got[i])
	}
	require.Equal(t, int64(1), loads.Load(), "one load for the burst")
	v, err := c.Get(context.Background(), "four", load)
	require.NoError(t, err)
	require.Equal(t, 4, v)
	require.Equal(t, int64(1), loads.Load(), "the shared load's value was cached")

	_, err = c.Get(context.Background(), "boom", func(context.Context, string) (int, error) { panic("bug") })
	require.ErrorContains(t, err, "panicked")
}

// TestStaleOnErrorStandsInForAFailedLoad: past its TTL a value answers a
// failed load for as long as StaleOnError allows, and the next Get loads
// again; without it, or later, the failure is the answer.
func TestStaleOnErrorStandsInForAFailedLoad(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	down := errors.New("store unreachable")
	failing := false
	loads := 0
	load := func(context.Context, string) (string, error) {
		loads++
		if failing {
			return "", down
		}
		return fmt.Sprintf("v%d", loads), nil
	}
	ctx := context.Background()
	for _, stale := range []time.Duration{0, 10 * time.Minute} {
		c := New[string](time.Minute, 10).StaleOnError(stale)
		c.now = func() time.Time { return now }
		loads, failing = 0, false
		v, err := c.Get(ctx, "k", load)
		require.NoError(t, err)
		require.Equal(t, "v1", v)

		failing = true
		now = now.Add(2 * time.Minute) // expired, and the store is down
		v, err = c.Get(ctx, "k", load)
		if stale == 0 {
			require.ErrorIs(t, err, down, "no stale value without StaleOnError")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, "v1", v, "the last value stands in")
		_, _ = c.Get(ctx, "k", load)
		require.Equal(t, 3, loads, "each Get tried the store again")

		now = now.Add(10 * time.Minute) // past the stale window
		_, err = c.Get(ctx, "k", load)
		require.ErrorIs(t, err, down)

		failing = false
		v, err = c.Get(ctx, "k", load)
		require.NoError(t, err)
		require.Equal(t, "v5", v, "back: a fresh value")
	}
}

// TestForgetOutrunsALoadInFlight: a value forgotten is loaded anew, and
// a load that began before the forgetting answers its caller but is not
// kept: a revoked key read just before its revocation is not trusted on.
func TestForgetOutrunsALoadInFlight(t *testing.T) {
	t.Parallel()
	c := New[string](time.Hour, 10)
	ctx := context.Background()
	var version string
	release := make(chan struct{})
	started := make(chan struct{})
	slow := func(context.Context, string) (string, error) {
		close(started)
		<-release
		return "before", nil
	}
	done := make(chan string)
	go func() {
		v, _ := c.Get(ctx, "k", slow)
		done <- v
	}()
	<-started
	c.Forget("k") // the change lands while the old value is on its way
	version = "after"
	close(release)
	require.Equal(t, "before", <-done, "the caller of the old load gets its answer")
	v, err := c.Get(ctx, "k", func(context.Context, string) (string, error) { return version, nil })
	require.NoError(t, err)
	require.Equal(t, "after", v, "the old load was not kept")

	c.ForgetAll()
	v, err = c.Get(ctx, "k", func(context.Context, string) (string, error) { return "again", nil })
	require.NoError(t, err)
	require.Equal(t, "again", v)
}
