package dreamer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/services/dreamer"
)

// counting counts what the gates ask of Postgres, and asks it.
type counting struct {
	pg                    dreamer.PG
	claims, counts, takes atomic.Int32
}

func (c *counting) ClaimScan(ctx context.Context, tenant string, scope memory.Scope, now, after time.Time) (bool, error) {
	c.claims.Add(1)
	return c.pg.ClaimScan(ctx, tenant, scope, now, after)
}

func (c *counting) CountSessions(ctx context.Context, tenant string, scope memory.Scope, since time.Time, atMost int) (int, error) {
	c.counts.Add(1)
	return c.pg.CountSessions(ctx, tenant, scope, since, atMost)
}

func (c *counting) Take(ctx context.Context, r dreamer.LeaseRequest) (dreamer.Lease, error) {
	c.takes.Add(1)
	return c.pg.Take(ctx, r)
}

func (c *counting) queries() [3]int32 {
	return [3]int32{c.claims.Load(), c.counts.Load(), c.takes.Load()}
}

// TestGatesStopAtTheFirstThatFails runs the gates with an injected clock
// and counts the queries each makes: a scope that fails a gate never
// reaches the ones after it — a disabled tenant or a scope consolidated
// within 24 hours costs no query at all; a scope scanned within 10 minutes
// costs at most the scan claim; too few sessions never reach the lease.
// Every outcome is counted in mnemos_dream_gate_total{gate,outcome}.
func TestGatesStopAtTheFirstThatFails(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	start := time.Now().UTC()
	h.clock.set(start)
	var now atomic.Pointer[time.Time]
	now.Store(&start)
	advance := func(d time.Duration) {
		next := now.Load().Add(d)
		now.Store(&next)
	}
	c := &counting{pg: dreamer.PG{DB: h.store}}
	svc := h.newService(fast("gates"), builtin.New(nil), dreamer.Options{Now: func() time.Time { return *now.Load() }, Sessions: c, Leases: c})
	g := svc.Gates()
	gate := func(name, outcome string) int64 {
		return h.metrics.SumAll("mnemos.dream.gate", "gate", name, "outcome", outcome)
	}
	check := func(cand dreamer.Candidate) dreamer.Admission {
		t.Helper()
		adm, err := g.Check(context.Background(), cand)
		require.NoError(t, err)
		return adm
	}
	cand := dreamer.Candidate{Tenant: tenant, Scope: scope}

	// Disabled: nothing else is looked at.
	require.NoError(t, h.store.SetTenantSettings(context.Background(), tenant, []byte(`{"dreaming": {"enabled": false}}`)))
	require.Eventually(t, func() bool { return check(cand).Failed == dreamer.GateEnabled }, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, [3]int32{}, c.queries())
	// Consolidated 23 hours ago: the time gate stops it, no query is made.
	recent := cand
	recent.LastConsolidatedAt = start.Add(-23 * time.Hour)
	require.NoError(t, h.store.SetTenantSettings(context.Background(), tenant, []byte(`{}`)))
	require.Eventually(t, func() bool { return check(recent).Failed == dreamer.GateTime }, 5*time.Second, 20*time.Millisecond)
	timeFailed := gate(dreamer.GateTime, dreamer.GateFailed)
	for range 3 {
		require.Equal(t, dreamer.GateTime, check(recent).Failed)
	}
	require.Equal(t, [3]int32{}, c.queries(), "a scope failing the time gate never reaches the scan, the session count or the lease")
	require.EqualValues(t, timeFailed+3, gate(dreamer.GateTime, dreamer.GateFailed))
	before := c.queries()

	// Consolidated 25 hours ago, scanned 5 minutes ago (the listing says so): stopped without a query.
	old := cand
	old.LastConsolidatedAt = start.Add(-25 * time.Hour).Truncate(time.Microsecond)
	h.consolidatedAt(old.LastConsolidatedAt)
	scanned := old
	scanned.LastScanAt = start.Add(-5 * time.Minute)
	require.Equal(t, dreamer.GateScan, check(scanned).Failed)
	require.Equal(t, before, c.queries())

	// Not scanned lately, but only 3 sessions: the scan is claimed, the sessions counted, no lease asked for.
	for _, id := range []string{"s1", "s2", "s3"} {
		h.session(id, map[string]string{"user": "u-42", "project": "repo-x"})
	}
	h.session("elsewhere", map[string]string{"user": "u-7"})
	h.session("elsewhere-2", map[string]string{"project": "u-42"})
	require.Equal(t, dreamer.GateSessions, check(old).Failed)
	require.Equal(t, [3]int32{before[0] + 1, before[1] + 1, before[2]}, c.queries())

	// At once again: another replica's scan (or this one's) holds the slot; only the claim is tried.
	require.Equal(t, dreamer.GateScan, check(old).Failed)
	require.Equal(t, [3]int32{before[0] + 2, before[1] + 1, before[2]}, c.queries())

	// Eleven minutes on, with five sessions, every gate passes; but a scan
	// that read the scope before its latest consolidation does not take it.
	h.session("s4", map[string]string{"user": "u-42"})
	h.session("s5", map[string]string{"user": "u-42"})
	advance(11 * time.Minute)
	early := old
	early.LastConsolidatedAt = old.LastConsolidatedAt.Add(-time.Hour)
	require.Equal(t, dreamer.GateLease, check(early).Failed)
	require.Empty(t, h.dreams())
	advance(11 * time.Minute)
	adm := check(old)
	require.Empty(t, adm.Failed)
	require.True(t, adm.Lease.Taken)
	require.Equal(t, "gates", adm.Lease.Holder)
	require.Equal(t, [3]int32{before[0] + 4, before[1] + 3, before[2] + 2}, c.queries())
	d := h.dream(adm.Lease.DreamID, "running")
	require.Equal(t, "scheduled", d.Trigger)

	// Another instance eleven minutes later still finds the lease held.
	other := h.newService(fast("other"), builtin.New(nil), dreamer.Options{Now: func() time.Time { return now.Load().Add(11 * time.Minute) }, Sessions: c, Leases: c})
	adm2, err := other.Gates().Check(context.Background(), old)
	require.NoError(t, err)
	require.Equal(t, dreamer.GateLease, adm2.Failed)

	// Sessions are counted since the last consolidation only.
	n, err := c.pg.CountSessions(context.Background(), tenant, scope, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = c.pg.CountSessions(context.Background(), tenant, scope, time.Time{}, 3)
	require.NoError(t, err)
	require.Equal(t, 3, n, "counting stops at what the gate needs")

	require.EqualValues(t, 1, gate(dreamer.GateLease, dreamer.GatePassed))
	require.EqualValues(t, 2, gate(dreamer.GateLease, dreamer.GateFailed))
	require.EqualValues(t, 1, gate(dreamer.GateSessions, dreamer.GateFailed))
	require.EqualValues(t, 3, gate(dreamer.GateSessions, dreamer.GatePassed))
	require.EqualValues(t, 2, gate(dreamer.GateScan, dreamer.GateFailed))
	require.Positive(t, gate(dreamer.GateEnabled, dreamer.GateFailed))
}
