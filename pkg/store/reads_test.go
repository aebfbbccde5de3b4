package store_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// roundTrips counts what a pool sends: statements one by one, and batches.
type roundTrips struct {
	queries, batches atomic.Int64
	mu               sync.Mutex
	batched          []string // the statements of the batches, in order
}

func (c *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.queries.Add(1)
	return ctx
}
func (c *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.batches.Add(1)
	return ctx
}
func (c *roundTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batched = append(c.batched, d.SQL)
}

// reset forgets what was counted so far.
func (c *roundTrips) reset() {
	c.queries.Store(0)
	c.batches.Store(0)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batched = nil
}

// count is how many of the batches' statements so far contain s.
func (c *roundTrips) count(s string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, sql := range c.batched {
		if strings.Contains(sql, s) {
			n++
		}
	}
	return n
}
func (c *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// countedStore opens a store of at most maxConns connections whose round
// trips are counted.
func countedStore(t testing.TB, maxConns int32) (*store.Store, *roundTrips) {
	t.Helper()
	trips := &roundTrips{}
	st, err := store.Open(context.Background(), store.Config{URL: pgtest.URL(t), MaxConns: maxConns, Tracer: trips})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	return st, trips
}

func TestReadsGoTogetherAsTheirTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// One connection: what the reads leave on it, the next query sees.
	st, trips := countedStore(t, 1)
	for tenant, count := range map[string]int64{"acme": 42, "beta": 7} {
		require.NoError(t, st.EnsureTenant(ctx, tenant, tenant))
		require.NoError(t, st.InTx(ctx, tenant, func(tx *store.Tx) error {
			s, err := tx.LockSession(ctx, "s1", "main")
			if err != nil {
				return err
			}
			s.TokenCount, s.State = count, "ok"
			return tx.SaveSessions(ctx, s)
		}))
	}
	require.NoError(t, st.InTx(ctx, "beta", func(tx *store.Tx) error {
		_, err := tx.LockSession(ctx, "only-beta", "main")
		return err
	}))

	trips.queries.Store(0)
	trips.batches.Store(0)
	reads := store.NewReads("acme")
	s1 := store.Queue(reads, func(tx *store.Tx) (sessionstate.Session, error) { return tx.Session(ctx, "s1") })
	other := store.Queue(reads, func(tx *store.Tx) (sessionstate.Session, error) { return tx.Session(ctx, "only-beta") })
	cuts := store.Queue(reads, func(tx *store.Tx) ([]store.Replacement, error) {
		return tx.ReplacementsOfKinds(ctx, "s1", store.ReplaceMicrocompact)
	})
	tenant := store.Queue(reads, func(tx *store.Tx) (string, error) {
		var during string
		err := tx.QueryRowForTest(ctx, "SELECT current_setting('mnemos.tenant_id')").Scan(&during)
		return during, err
	})
	_, err := s1.Get()
	require.Error(t, err, "a read has no result before it is sent")
	require.NoError(t, st.Read(ctx, reads))
	require.Zero(t, trips.queries.Load(), "nothing is sent statement by statement")
	require.EqualValues(t, 1, trips.batches.Load(), "one round trip")

	during, err := tenant.Get()
	require.NoError(t, err)
	require.Equal(t, "acme", during, "the reads run as their tenant (row-level security)")
	got, err := s1.Get()
	require.NoError(t, err)
	require.EqualValues(t, 42, got.TokenCount, "acme's session, not beta's")
	_, err = other.Get()
	require.ErrorIs(t, err, store.ErrNotFound, "another tenant's session is not there for acme (row-level security)")
	decided, err := cuts.Get()
	require.NoError(t, err)
	require.Empty(t, decided)

	var after string
	require.NoError(t, st.Pool().QueryRow(ctx, "SELECT coalesce(current_setting('mnemos.tenant_id', true), '')").Scan(&after))
	require.Empty(t, after, "the tenant setting must not outlive the reads on a pooled connection")

	require.Error(t, st.Read(ctx, reads), "reads are sent once")
}

func TestAReadThatDecidesOnWhatItReadIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.New(t)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		_, err := tx.LockSession(ctx, "s1", "main")
		return err
	}))

	reads := store.NewReads("acme")
	// Queued, the first statement finds nothing; sent, it finds the
	// session, and the read makes a statement it did not queue.
	deciding := store.Queue(reads, func(tx *store.Tx) (int64, error) {
		s, err := tx.Session(ctx, "s1")
		if err != nil {
			return 0, err
		}
		return tx.MessageTokensAfter(ctx, s.SessionID, 0)
	})
	after := store.Queue(reads, func(tx *store.Tx) (sessionstate.Session, error) { return tx.Session(ctx, "s1") })
	err := st.Read(ctx, reads)
	require.ErrorContains(t, err, "more statements than it queued")
	_, err = deciding.Get()
	require.Error(t, err)
	_, err = after.Get()
	require.Error(t, err, "the reads after it are not answered with another's results")

	// The connection it used is fine for the next reads.
	reads = store.NewReads("acme")
	s := store.Queue(reads, func(tx *store.Tx) (sessionstate.Session, error) { return tx.Session(ctx, "s1") })
	require.NoError(t, st.Read(ctx, reads))
	got, err := s.Get()
	require.NoError(t, err)
	require.Equal(t, "s1", got.SessionID)
}

// TestReadsInATransaction: a batch of turns locks its sessions (creating
// the new ones) and reads what it decides from in one round trip of its
// transaction; what the statements wrote commits with it, and a statement's
// error is its Future's.
func TestReadsInATransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, trips := countedStore(t, 2)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	hash := []byte{1, 2, 3}
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		if _, err := tx.LockSession(ctx, "s1", "main"); err != nil {
			return err
		}
		_, err := tx.InsertMessage(ctx, store.Message{SessionID: "s1", UUID: "m1", Seq: 1, Role: "user",
			Content: []byte(`[{"type":"text","text":"hello"}]`), ContentHash: hash, EstimateTokens: 2, BytesThrough: 30})
		return err
	}))

	var locked map[string]sessionstate.Session
	var known map[string]map[string][]byte
	var prior [2]float64
	var queries, batches int64
	var tenantSet int
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		trips.reset()
		reads := store.NewReads("acme")
		l := store.Queue(reads, func(tx *store.Tx) (map[string]sessionstate.Session, error) {
			return tx.LockFreeSessions(ctx, []string{"s1", "s2"}, []string{"main", "main"}, []bool{false, true})
		})
		k := store.Queue(reads, func(tx *store.Tx) (map[string]map[string][]byte, error) {
			return tx.MessageHashesOf(ctx, []string{"s1", "s2"}, []string{"m1", "m9"})
		})
		p := store.Queue(reads, func(tx *store.Tx) ([2]float64, error) {
			prose, dense, err := tx.EstimatePrior(ctx)
			return [2]float64{prose, dense}, err
		})
		if err := tx.Read(ctx, reads); err != nil {
			return err
		}
		queries, batches = trips.queries.Load(), trips.batches.Load()
		tenantSet = trips.count("set_config('mnemos.tenant_id'")
		var err error
		if locked, err = l.Get(); err != nil {
			return err
		}
		if known, err = k.Get(); err != nil {
			return err
		}
		prior, err = p.Get()
		return err
	}))
	require.Zero(t, queries, "nothing is sent statement by statement")
	require.EqualValues(t, 1, batches, "one round trip")
	require.Equal(t, 1, tenantSet, "the tenant is set once, by the transaction's BEGIN")
	require.Len(t, locked, 2, "the existing session locked, the new one created")
	require.Equal(t, map[string]map[string][]byte{"s1": {"m1": hash}}, known)
	require.Zero(t, prior, "no session learnt a factor")
	_, err := st.GetSession(ctx, "acme", "s2")
	require.NoError(t, err, "the session the reads created commits with the transaction")

	require.Error(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		return tx.Read(ctx, store.NewReads("beta"))
	}), "reads of another tenant are refused")

	// Reads after the transaction's first statement: its BEGIN set the
	// tenant for them too, and they send no setting of their own.
	var during string
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		if _, err := tx.Session(ctx, "s1"); err != nil {
			return err
		}
		trips.reset()
		reads := store.NewReads("acme")
		tenant := store.Queue(reads, func(tx *store.Tx) (string, error) {
			var v string
			err := tx.QueryRowForTest(ctx, "SELECT current_setting('mnemos.tenant_id')").Scan(&v)
			return v, err
		})
		if err := tx.Read(ctx, reads); err != nil {
			return err
		}
		var err error
		during, err = tenant.Get()
		return err
	}))
	require.Equal(t, "acme", during)
	require.Zero(t, trips.count("set_config('mnemos.tenant_id'"), "the transaction's BEGIN set the tenant")

	// A tenant that does not exist: the lock's error is its Future's.
	err = st.InTx(ctx, "nobody", func(tx *store.Tx) error {
		reads := store.NewReads("nobody")
		l := store.Queue(reads, func(tx *store.Tx) (map[string]sessionstate.Session, error) {
			return tx.LockFreeSessions(ctx, []string{"s1"}, []string{"main"}, []bool{true})
		})
		if err := tx.Read(ctx, reads); err != nil {
			return err
		}
		_, err := l.Get()
		return err
	})
	require.ErrorIs(t, err, store.ErrUnknownTenant)
}
