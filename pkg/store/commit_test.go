package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// A transaction ended by PipelineCommit sends BEGIN and then one batch,
// its writes and COMMIT together; its writes are there after it, and the
// transaction cannot be used past its COMMIT.
func TestPipelineCommitSendsTheCommitWithTheWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, trips := countedStore(t, 1)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		_, err := tx.LockSession(ctx, "s1", "main")
		return err
	}))

	var after error
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		s, err := tx.LockSession(ctx, "s1", "main")
		if err != nil {
			return err
		}
		trips.queries.Store(0)
		trips.batches.Store(0)
		s.TokenCount = 42
		if err := tx.PipelineCommit(ctx, func(p *store.Tx) error { return p.SaveSessions(ctx, s) }); err != nil {
			return err
		}
		s.TokenCount = 7
		after = tx.SaveSessions(ctx, s)
		return nil
	}))
	queries, batches := trips.queries.Load(), trips.batches.Load()
	require.Zero(t, queries, "nothing is sent alone: no COMMIT after the writes")
	require.Equal(t, int64(1), batches, "the writes and COMMIT go in one batch")
	require.Error(t, after, "a write after the COMMIT must fail, not run outside the transaction")

	var count int64
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		s, err := tx.Session(ctx, "s1")
		count = s.TokenCount
		return err
	}))
	require.Equal(t, int64(42), count)
}

// A write of PipelineCommit that fails takes the whole transaction with it,
// the COMMIT included, and the transaction is rolled back on its connection,
// which the pool keeps for the next one rather than opening another.
func TestAFailedPipelineCommitRollsBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, _ := countedStore(t, 1)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	opened := st.Pool().Stat().NewConnsCount()
	err := st.InTx(ctx, "acme", func(tx *store.Tx) error {
		s, err := tx.LockSession(ctx, "s1", "main")
		if err != nil {
			return err
		}
		s.TokenCount = 42
		return tx.PipelineCommit(ctx, func(p *store.Tx) error {
			if err := p.SaveSessions(ctx, s); err != nil {
				return err
			}
			// The message's session is unknown: its foreign key fails.
			_, err := p.InsertMessage(ctx, store.Message{SessionID: "nowhere", UUID: "m1", Seq: 1, Role: "user",
				Content: []byte(`[]`), ContentHash: []byte{1}})
			return err
		})
	})
	require.ErrorContains(t, err, "store.PipelineCommit")

	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		_, err := tx.Session(ctx, "s1")
		require.ErrorIs(t, err, store.ErrNotFound, "the session the failed transaction created must not be there")
		return nil
	}))
	require.Equal(t, opened, st.Pool().Stat().NewConnsCount(),
		"the failed transaction's connection must be rolled back and kept, not left in the transaction for the pool to destroy")
}
