package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/lease"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// renewals answers the n-th renewal (from 1) with answer(n).
func renewals(answer func(n int64) error) (func(context.Context) error, *atomic.Int64) {
	var n atomic.Int64
	return func(context.Context) error { return answer(n.Add(1)) }, &n
}

func TestHoldRenewsWhileWorkRunsAndReturnsItsResult(t *testing.T) {
	t.Parallel()
	renew, renewed := renewals(func(n int64) error {
		if n == 2 {
			return errors.New("connection reset") // passing: retried at the next tick
		}
		return nil
	})
	var progressed atomic.Int64
	h := lease.Holder{Every: time.Millisecond, Renew: renew, Progress: func() error { progressed.Add(1); return nil }}
	err := lease.Hold(context.Background(), h, func(ctx context.Context) error {
		for renewed.Load() < 5 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return nil
	})
	require.NoError(t, err, "a failed renewal is not a lost lease")
	require.GreaterOrEqual(t, progressed.Load(), int64(5), "progress before every renewal")

	want := errors.New("the model failed")
	err = lease.Hold(context.Background(), h, func(context.Context) error { return want })
	require.ErrorIs(t, err, want)
}

func TestALostLeaseCancelsTheWork(t *testing.T) {
	t.Parallel()
	lost := errors.New("the notes update's claim was lost")
	for name, tc := range map[string]struct {
		holder lease.Holder
		want   error
	}{
		"the holder's own error": {holder: lease.Holder{Lost: lost}, want: lost},
		"ErrLost by default":     {want: lease.ErrLost},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := tc.holder
			h.Every = time.Millisecond
			h.Renew, _ = renewals(func(n int64) error {
				if n == 3 {
					return fmt.Errorf("renew: %w", store.ErrNotFound)
				}
				return nil
			})
			err := lease.Hold(context.Background(), h, func(ctx context.Context) error {
				<-ctx.Done() // work that would run for ever
				return ctx.Err()
			})
			require.ErrorIs(t, err, tc.want)
		})
	}

	// Work that failed of its own before the loss keeps its error.
	h := lease.Holder{Every: time.Millisecond}
	h.Renew, _ = renewals(func(int64) error { return store.ErrNotFound })
	own := errors.New("postgres is down")
	err := lease.Hold(context.Background(), h, func(ctx context.Context) error {
		<-ctx.Done()
		return own
	})
	require.ErrorIs(t, err, own)
	require.NotErrorIs(t, err, lease.ErrLost)
}

func TestHoldEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	renew, _ := renewals(func(int64) error { return nil })
	err := lease.Hold(ctx, lease.Holder{Every: time.Hour, Renew: renew}, func(ctx context.Context) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled, "the caller's cancellation is not a lost lease")
}
