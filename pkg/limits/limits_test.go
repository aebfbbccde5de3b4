package limits_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// replicas builds n limiters over one database, as n processes would run,
// every tenant with cfg.
func replicas(t *testing.T, n int, cfg limits.Config, opts ...limits.Options) ([]*limits.Limiter, *store.Store, *telemetrytest.Reader) {
	t.Helper()
	st := pgtest.New(t)
	require.NoError(t, st.EnsureTenant(context.Background(), "acme", "Acme"))
	require.NoError(t, st.EnsureTenant(context.Background(), "globex", "Globex"))
	metrics := telemetrytest.New(t)
	out := make([]*limits.Limiter, n)
	for i := range out {
		var o limits.Options
		if len(opts) > 0 {
			o = opts[0]
		}
		l, err := limits.New(st, func(context.Context, string) (limits.Config, error) { return cfg, nil }, metrics.Meter(), o)
		require.NoError(t, err)
		out[i] = l
	}
	return out, st, metrics
}

func TestRateHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	// A burst of 40 and a trickle of a token a minute: however the replicas
	// share them, 40 events are admitted in all, not 40 each.
	ls, _, metrics := replicas(t, 3, limits.Config{EventsPerSecond: 1.0 / 60, EventsBurst: 40})
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 90 {
		wg.Go(func() {
			err := ls[i%3].Admit(context.Background(), "acme", "s1")
			ex, ok := limits.AsExceeded(err)
			switch {
			case err == nil:
				admitted.Add(1)
			case ok:
				refused.Add(1)
				require.Equal(t, limits.ReasonRateLimited, ex.Reason)
				require.Equal(t, limits.LimitEventsPerSecond, ex.Limit)
				require.Positive(t, ex.RetryAfter)
				require.Contains(t, ex.Error(), "rate_limited: ")
			default:
				t.Errorf("admit: %v", err)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 40, admitted.Load())
	require.EqualValues(t, 50, refused.Load())
	require.EqualValues(t, 50, metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitEventsPerSecond))

	// Each tenant has its own bucket.
	require.NoError(t, ls[0].Admit(context.Background(), "globex", "s1"))
}

func TestRateRefills(t *testing.T) {
	t.Parallel()
	ls, _, _ := replicas(t, 1, limits.Config{EventsPerSecond: 20, EventsBurst: 5})
	l := ls[0]
	ctx := context.Background()
	n := 0
	var err error
	for err = l.Admit(ctx, "acme", "s1"); err == nil; err = l.Admit(ctx, "acme", "s1") {
		n++
		require.Less(t, n, 1000, "the bucket never ran dry")
	}
	require.GreaterOrEqual(t, n, 5, "the burst comes first")
	ex, ok := limits.AsExceeded(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, "1", ex.RetryAfterSeconds(), "a token comes back within 50 ms: Retry-After rounds up to a second")
	require.Eventually(t, func() bool { return l.Admit(ctx, "acme", "s1") == nil }, 10*time.Second, 20*time.Millisecond)
}

func TestSessionCapHoldsAcrossReplicas(t *testing.T) {
	t.Parallel()
	ls, st, metrics := replicas(t, 3, limits.Config{ActiveSessions: 5, ActiveMinutes: 30})
	ctx := context.Background()
	var mu sync.Mutex
	var admitted []string
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			session := fmt.Sprintf("s%d", i)
			err := ls[i%3].Admit(ctx, "acme", session)
			if ex, ok := limits.AsExceeded(err); ok {
				require.Equal(t, limits.ReasonTooManySessions, ex.Reason)
				require.Greater(t, ex.RetryAfter, 29*time.Minute)
				return
			}
			require.NoError(t, err)
			mu.Lock()
			admitted = append(admitted, session)
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, admitted, 5)
	require.EqualValues(t, 15, metrics.Sum("mnemos.limits.exceeded", "limit", limits.LimitActiveSessions))

	// The admitted sessions keep working on every replica; the others stay out.
	for _, l := range ls {
		for _, s := range admitted {
			require.NoError(t, l.Admit(ctx, "acme", s))
		}
		_, ok := limits.AsExceeded(l.Admit(ctx, "acme", "late-comer"))
		require.True(t, ok)
	}
	// Another tenant is not capped by acme's sessions.
	require.NoError(t, ls[0].Admit(ctx, "globex", "s0"))

	// A session idle past the window frees its slot for a new one.
	_, err := pgtest.Admin(t, st).Exec(ctx, "UPDATE active_sessions SET active_at = now() - interval '31 minutes' WHERE tenant_id = 'acme' AND session_id = $1", admitted[0])
	require.NoError(t, err)
	require.NoError(t, ls[1].Admit(ctx, "acme", "late-comer"))
	var rows int
	require.NoError(t, pgtest.Admin(t, st).QueryRow(ctx, "SELECT count(*) FROM active_sessions WHERE tenant_id = 'acme'").Scan(&rows))
	require.Equal(t, 5, rows, "the expired row was pruned")
}

func TestRefusedSessionDoesNotSpendARateToken(t *testing.T) {
	t.Parallel()
	// Tokens held locally do not expire during the test, however slow the machine.
	ls, _, _ := replicas(t, 1, limits.Config{EventsPerSecond: 1.0 / 60, EventsBurst: 2, ActiveSessions: 1, ActiveMinutes: 30}, limits.Options{LeaseTTL: time.Hour})
	l := ls[0]
	ctx := context.Background()
	require.NoError(t, l.Admit(ctx, "acme", "s1"))
	ex, ok := limits.AsExceeded(l.Admit(ctx, "acme", "s2"))
	require.True(t, ok)
	require.Equal(t, limits.ReasonTooManySessions, ex.Reason)
	require.NoError(t, l.Admit(ctx, "acme", "s1"), "the second token is still there")
	ex, ok = limits.AsExceeded(l.Admit(ctx, "acme", "s1"))
	require.True(t, ok)
	require.Equal(t, limits.ReasonRateLimited, ex.Reason)
}

func TestNoLimits(t *testing.T) {
	t.Parallel()
	var none *limits.Limiter
	require.NoError(t, none.Admit(context.Background(), "acme", "s1"))
	none.Record(context.Background(), limits.LimitEventBytes)

	ls, _, _ := replicas(t, 1, limits.Config{})
	for range 100 {
		require.NoError(t, ls[0].Admit(context.Background(), "acme", "s1"), "zero limits are none")
	}
	l, err := limits.New(nil, func(context.Context, string) (limits.Config, error) {
		return limits.Config{}, store.ErrUnknownTenant
	}, nil, limits.Options{})
	require.NoError(t, err)
	require.True(t, errors.Is(l.Admit(context.Background(), "ghost", "s1"), store.ErrUnknownTenant))
}

func TestValidate(t *testing.T) {
	t.Parallel()
	require.NoError(t, limits.DefaultConfig().Validate())
	require.NoError(t, limits.Config{}.Validate())
	for _, bad := range []limits.Config{
		{EventsPerSecond: -1},
		{EventsPerSecond: 10, EventsBurst: 0},
		{ActiveSessions: -1},
		{ActiveSessions: 3},
	} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}
}
