package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// of counts the round trips of what fn does.
func (c *roundTrips) of(t *testing.T, fn func() error) (queries, batches int64) {
	t.Helper()
	c.queries.Store(0)
	c.batches.Store(0)
	require.NoError(t, fn())
	return c.queries.Load(), c.batches.Load()
}

// A transaction's BEGIN goes with its first round trip, whatever that is,
// and a transaction that sends nothing sends neither BEGIN nor COMMIT.
func TestATransactionSendsItsBeginWithItsFirstRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, trips := countedStore(t, 1)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))

	queries, batches := trips.of(t, func() error {
		return st.InTx(ctx, "acme", func(tx *store.Tx) error {
			s, err := tx.LockSession(ctx, "s1", "main")
			if err != nil {
				return err
			}
			s.TokenCount = 42
			return tx.PipelineCommit(ctx, func(p *store.Tx) error { return p.SaveSessions(ctx, s) })
		})
	})
	require.Equal(t, [2]int64{0, 2}, [2]int64{queries, batches}, "BEGIN with the lock, the save with COMMIT")

	queries, batches = trips.of(t, func() error {
		return st.InTx(ctx, "acme", func(tx *store.Tx) error {
			r := store.NewReads("acme")
			got := store.Queue(r, func(tx *store.Tx) (sessionstate.Session, error) { return tx.Session(ctx, "s1") })
			if err := tx.Read(ctx, r); err != nil {
				return err
			}
			s, err := got.Get()
			if err != nil {
				return err
			}
			s.TokenCount++
			return tx.PipelineCommit(ctx, func(p *store.Tx) error { return p.SaveSessions(ctx, s) })
		})
	})
	require.Equal(t, [2]int64{0, 2}, [2]int64{queries, batches}, "BEGIN with the reads, the save with COMMIT")

	queries, batches = trips.of(t, func() error {
		return st.InTx(ctx, "acme", func(*store.Tx) error { return nil })
	})
	require.Equal(t, [2]int64{0, 0}, [2]int64{queries, batches}, "a transaction that sends nothing")

	s, err := st.GetSession(ctx, "acme", "s1")
	require.NoError(t, err)
	s.TokenCount = 44
	queries, batches = trips.of(t, func() error {
		return st.InTx(ctx, "acme", func(tx *store.Tx) error {
			return tx.PipelineCommit(ctx, func(p *store.Tx) error { return p.SaveSessions(ctx, s) })
		})
	})
	require.Equal(t, [2]int64{0, 1}, [2]int64{queries, batches}, "a transaction of writes alone is one round trip")

	var count int64
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		s, err := tx.Session(ctx, "s1")
		count = s.TokenCount
		return err
	}))
	require.Equal(t, int64(44), count, "each transaction committed")
	// (That the tenant it sets lasts for the transaction alone is
	// TestTenantSettingIsTransactionLocal's.)
}

// A relay's round is two round trips: its claim sent with BEGIN, its
// deletion with COMMIT. The rows it published are gone after it.
func TestARelayRoundIsTwoRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, trips := countedStore(t, 1)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	trips.queries.Store(0)
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		return tx.Enqueue(ctx, store.OutboxEvent{Subject: "turn.accounted.acme.s1", MsgID: "m1", Payload: []byte("{}")})
	}))
	require.Eventually(t, func() bool { return trips.queries.Load() == 2 }, 10*time.Second, time.Millisecond,
		"the enqueue's COMMIT, then the NOTIFY that wakes the relays")
	var published []string
	queries, batches := trips.of(t, func() error {
		n, err := st.RelayOutbox(ctx, 10, func(_ context.Context, es []store.OutboxEvent) ([]int64, error) {
			var done []int64
			for _, e := range es {
				published = append(published, e.MsgID)
				done = append(done, e.ID)
			}
			return done, nil
		})
		require.Equal(t, 1, n)
		return err
	})
	require.Equal(t, []string{"m1"}, published)
	require.Equal(t, [2]int64{0, 2}, [2]int64{queries, batches}, "the claim with BEGIN, the deletion with COMMIT")
	backlog, err := st.OutboxBacklog(ctx)
	require.NoError(t, err)
	require.Zero(t, backlog, "the published row is deleted")
}

// A pipeline's Tx only queues writes: a read, a pipeline or a commit asked
// of it inside the pipeline is refused, never run outside the transaction.
func TestAPipelinesTxOnlyQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := countedStore(t, 1)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	for name, inside := range map[string]func(p *store.Tx) error{
		"read":     func(p *store.Tx) error { return p.Read(ctx, store.NewReads("acme")) },
		"pipeline": func(p *store.Tx) error { return p.Pipeline(ctx, func(*store.Tx) error { return nil }) },
		"commit":   func(p *store.Tx) error { return p.PipelineCommit(ctx, func(*store.Tx) error { return nil }) },
	} {
		err := st.InTx(ctx, "acme", func(tx *store.Tx) error {
			return tx.Pipeline(ctx, inside)
		})
		require.ErrorContains(t, err, "not in a transaction", name)
	}
}

// A batch's transaction (InTxWaiting) runs on generic plans and bounds its
// lock waits, set with its tenant in one statement; the next transaction on
// the same connection plans as Postgres decides again.
func TestABatchTransactionRunsOnGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, trips := countedStore(t, 1) // one connection: what a transaction leaves on it, the next one sees
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))

	setting := func(tx *store.Tx, name string) string {
		var v string
		require.NoError(t, tx.QueryRowForTest(ctx, "SELECT current_setting($1)", name).Scan(&v))
		return v
	}
	var plans, wait, tenant string
	trips.reset()
	require.NoError(t, st.InTxWaiting(ctx, "acme", 250*time.Millisecond, func(tx *store.Tx) error {
		plans, wait, tenant = setting(tx, "plan_cache_mode"), setting(tx, "lock_timeout"), setting(tx, "mnemos.tenant_id")
		return nil
	}))
	require.Equal(t, "force_generic_plan", plans)
	require.Equal(t, "250ms", wait)
	require.Equal(t, "acme", tenant)
	require.Equal(t, 1, trips.count("set_config("), "the tenant, the wait and the plans in one statement")

	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		plans, wait = setting(tx, "plan_cache_mode"), setting(tx, "lock_timeout")
		return nil
	}))
	require.Equal(t, "auto", plans, "only the batch's transaction")
	require.Equal(t, "0", wait)
}
