package ttlcache

import (
	"context"
	"errors"
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
