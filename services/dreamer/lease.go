package dreamer

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// PG is Sessions and Leases on Postgres.
type PG struct {
	DB *store.Store
}

// scopeFilter is the memory_scope a session names the scope with.
func scopeFilter(s memory.Scope) map[string]string {
	return map[string]string{string(s.Kind): s.ID}
}

// ClaimScan implements Sessions.
func (p PG) ClaimScan(ctx context.Context, tenant string, scope memory.Scope, now, scannedAfter time.Time) (bool, error) {
	var ok bool
	err := p.DB.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		ok, err = tx.ClaimDreamScan(ctx, scope.String(), now, scannedAfter)
		return err
	})
	return ok, err
}

// CountSessions implements Sessions.
func (p PG) CountSessions(ctx context.Context, tenant string, scope memory.Scope, since time.Time, atMost int) (int, error) {
	var n int
	err := p.DB.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		n, err = tx.CountSessionsTouching(ctx, scopeFilter(scope), since, atMost)
		return err
	})
	return n, err
}

// abandoned is why a dream whose dreamer stopped without ending it failed.
const abandoned = "its dreamer stopped without finishing it and its lease ran out; nothing was applied"

// Take implements Leases. In one transaction, under the scope's row lock:
// a lease held until after r.Now is left alone (HeldBy), and so is a scope
// consolidated since the scan read it (Consolidated); otherwise a dream
// that held it and never ended (its dreamer died) is ended failed, or
// killed when a kill was asked for; the dream is recorded running (a
// scheduled one created, a requested one started), the lease is given to
// it, earlier proposals of the scope are superseded and dream.starting is
// announced.
func (p PG) Take(ctx context.Context, r LeaseRequest) (Lease, error) {
	out := Lease{LeaseRequest: r}
	err := p.DB.InTx(ctx, r.Tenant, func(tx *store.Tx) error {
		out = Lease{LeaseRequest: r}
		s, err := tx.LockDreamScope(ctx, r.Scope.String())
		if err != nil {
			return err
		}
		out.LastConsolidatedAt = s.LastConsolidatedAt
		if dream.LeaseHeld(s, r.Now) {
			out.HeldBy = s.LeaseDreamID
			return nil
		}
		if r.Trigger == dream.TriggerScheduled && !s.LastConsolidatedAt.Equal(r.SeenConsolidatedAt) {
			out.Consolidated = true // a dream ended while the scan looked: the gates were read too early
			return nil
		}
		if s.LeaseDreamID != "" && s.LeaseDreamID != r.DreamID {
			if err := endAbandoned(ctx, tx, s.LeaseDreamID, r.Now); err != nil {
				return err
			}
		}
		if r.Trigger == dream.TriggerManual {
			started, err := tx.StartDream(ctx, r.DreamID, r.Holder, r.Now)
			if err != nil {
				return err
			}
			if !started {
				out.NotWaiting = true
				return nil
			}
		} else if err := tx.InsertDream(ctx, store.Dream{
			DreamID: r.DreamID, Scope: r.Scope.String(), Trigger: r.Trigger, Status: string(dream.StatusRunning),
			Holder: r.Holder, StartedAt: r.Now, CreatedAt: r.Now,
		}); err != nil {
			return err
		}
		if err := tx.SetDreamLease(ctx, r.Scope.String(), r.Holder, r.DreamID, r.Now, r.Now.Add(r.Stale)); err != nil {
			return err
		}
		superseded, err := tx.SupersedeDreamProposals(ctx, r.Scope.String(), r.DreamID, r.Now)
		if err != nil {
			return err
		}
		out.Taken = true
		ev := events.Dream{DreamID: r.DreamID, Scope: r.Scope.String(), Trigger: r.Trigger, At: r.Now}
		if len(superseded) > 0 {
			ev.Reason = "supersedes the proposals of dreams " + strings.Join(superseded, ", ")
		}
		return dream.Enqueue(ctx, tx, bus.KindDreamStarting, ev)
	})
	return out, err
}

// endAbandoned ends a dream whose lease ran out while it was running.
func endAbandoned(ctx context.Context, tx *store.Tx, id string, now time.Time) error {
	d, err := tx.LockDream(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if dream.Status(d.Status).Ended() {
		return nil
	}
	status, kind := dream.StatusFailed, bus.KindDreamFailed
	if !d.KillRequestedAt.IsZero() {
		status, kind = dream.StatusKilled, bus.KindDreamKilled
	}
	if err := tx.FinishDream(ctx, id, store.DreamOutcome{Status: string(status), DreamWork: store.DreamWork{Error: abandoned}, At: now}); err != nil {
		return err
	}
	return dream.Enqueue(ctx, tx, kind, events.Dream{DreamID: id, Scope: d.Scope, Trigger: d.Trigger, Reason: abandoned, At: now})
}
