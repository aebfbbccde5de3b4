package ttlcache

import (
	"context"
	"errors"
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
