package dreamer

import (
	"context"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// The gates a scope passes, cheapest first, before the dreamer consolidates
// it: the values of mnemos_dream_gate_total{gate}.
const (
	// GateEnabled: the tenant lets the dreamer run (its settings, cached).
	GateEnabled = "enabled"
	// GateTime: at least dreaming.min_hours since the scope's last
	// consolidation (read with the scope, no query of its own).
	GateTime = "time"
	// GateScan: the scope's sessions were not counted in the last
	// dreaming.scan_interval_seconds (claiming the scan is one write).
	GateScan = "scan"
	// GateSessions: at least dreaming.min_sessions sessions naming the scope
	// were active since its last consolidation (one indexed count).
	GateSessions = "sessions"
	// GateLease: the scope's lease is free, or its holder's has run out.
	GateLease = "lease"
)

// Outcomes of a gate, the values of mnemos_dream_gate_total{outcome}.
const (
	GatePassed = "pass"
	GateFailed = "fail"
	// GateError: the gate could not be checked (Postgres); the scope waits
	// for the next scan.
	GateError = "error"
)

// Candidate is a scope the scan considers.
type Candidate struct {
	Tenant             string
	Scope              memory.Scope
	LastConsolidatedAt time.Time
	LastScanAt         time.Time
}

// Sessions is what the scan and session gates ask of Postgres.
type Sessions interface {
	// ClaimScan records that the scope's sessions are counted now, unless
	// they were counted after scannedAfter; it reports whether it did.
	ClaimScan(ctx context.Context, tenant string, scope memory.Scope, now, scannedAfter time.Time) (bool, error)
	// CountSessions counts the sessions naming the scope active after since
	// (zero: ever), no further than atMost.
	CountSessions(ctx context.Context, tenant string, scope memory.Scope, since time.Time, atMost int) (int, error)
}

// Leases takes scopes' leases.
type Leases interface {
	// Take takes the scope's lease for a dream, as LeaseRequest says.
	Take(ctx context.Context, r LeaseRequest) (Lease, error)
}

// LeaseRequest asks for a scope's lease.
type LeaseRequest struct {
	Tenant string
	Scope  memory.Scope
	// Holder names the dreamer instance; DreamID the dream that will run:
	// a new one (scheduled), or a requested one to start (manual).
	Holder  string
	DreamID string
	Trigger string
	Now     time.Time
	// Stale is how long the lease lasts unless renewed.
	Stale time.Duration
	// SeenConsolidatedAt is the scope's consolidation time the gates saw
	// (scheduled dreams): a scope consolidated since is not taken.
	SeenConsolidatedAt time.Time
}

// Lease is a scope's lease as Take left it.
type Lease struct {
	LeaseRequest
	// Taken is set when the lease is the dream's now; otherwise HeldBy names
	// the dream that holds it, NotWaiting says the requested dream was not
	// waiting any more (killed, or started elsewhere), or Consolidated that
	// the scope was consolidated after the gates read it.
	Taken        bool
	HeldBy       string
	NotWaiting   bool
	Consolidated bool
	// LastConsolidatedAt is the scope's (zero: never).
	LastConsolidatedAt time.Time
}

// Gates decide whether a scope is consolidated now. Each gate is checked in
// order and the first that fails stops the others, so a scope that fails a
// cheap gate never costs an expensive one; every outcome is counted.
type Gates struct {
	Settings func(ctx context.Context, tenant string) (tenantcfg.Dreaming, error)
	Now      func() time.Time
	Sessions Sessions
	Leases   Leases
	// Holder names the dreamer instance in the leases it takes.
	Holder string
	// NewID names the dream a lease is taken for.
	NewID func() string
	// Count counts a gate's outcome.
	Count func(ctx context.Context, gate, outcome string)
}

// Admission is what the gates decided for a scope.
type Admission struct {
	// Failed names the gate that stopped the scope ("" when all passed).
	Failed string
	// Lease is the lease taken when all passed.
	Lease Lease
}

// Check runs the gates for c. An error is a gate that could not be
// checked; it is counted as such.
func (g *Gates) Check(ctx context.Context, c Candidate) (Admission, error) {
	pass := func(gate string) { g.Count(ctx, gate, GatePassed) }
	fail := func(gate string) (Admission, error) {
		g.Count(ctx, gate, GateFailed)
		return Admission{Failed: gate}, nil
	}
	broken := func(gate string, err error) (Admission, error) {
		g.Count(ctx, gate, GateError)
		return Admission{Failed: gate}, fmt.Errorf("dreamer: gate %s of %s %s: %w", gate, c.Tenant, c.Scope, err)
	}

	set, err := g.Settings(ctx, c.Tenant)
	if err != nil {
		return broken(GateEnabled, err)
	}
	if !set.Enabled {
		return fail(GateEnabled)
	}
	pass(GateEnabled)

	now := g.Now()
	if !c.LastConsolidatedAt.IsZero() && now.Sub(c.LastConsolidatedAt) < set.MinInterval() {
		return fail(GateTime)
	}
	pass(GateTime)

	scannedAfter := now.Add(-set.ScanInterval())
	if c.LastScanAt.After(scannedAfter) {
		return fail(GateScan) // known from the listing: no need to ask
	}
	claimed, err := g.Sessions.ClaimScan(ctx, c.Tenant, c.Scope, now, scannedAfter)
	if err != nil {
		return broken(GateScan, err)
	}
	if !claimed {
		return fail(GateScan)
	}
	pass(GateScan)

	if set.MinSessions > 0 {
		n, err := g.Sessions.CountSessions(ctx, c.Tenant, c.Scope, c.LastConsolidatedAt, set.MinSessions)
		if err != nil {
			return broken(GateSessions, err)
		}
		if n < set.MinSessions {
			return fail(GateSessions)
		}
	}
	pass(GateSessions)

	l, err := g.Leases.Take(ctx, LeaseRequest{
		Tenant: c.Tenant, Scope: c.Scope, Holder: g.Holder, DreamID: g.NewID(), Trigger: dream.TriggerScheduled,
		Now: now, Stale: set.LeaseStale(), SeenConsolidatedAt: c.LastConsolidatedAt,
	})
	if err != nil {
		return broken(GateLease, err)
	}
	if !l.Taken {
		return fail(GateLease)
	}
	pass(GateLease)
	return Admission{Lease: l}, nil
}
