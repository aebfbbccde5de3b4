package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

func TestInTxCommitsAndRollsBack(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	ctx := context.Background()
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))

	boom := errors.New("boom")
	err := st.InTx(ctx, "acme", func(tx *store.Tx) error {
		_, err := tx.LockSession(ctx, "s1", "main")
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = st.GetSession(ctx, "acme", "s1")
	require.ErrorIs(t, err, store.ErrNotFound, "a failed transaction leaves nothing behind")

	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		s, err := tx.LockSession(ctx, "s1", "main")
		require.NoError(t, err)
		s.TokenCount = 42
		s.State = "ok"
		return tx.SaveSessions(ctx, s)
	}))
	got, err := st.GetSession(ctx, "acme", "s1")
	require.NoError(t, err)
	require.EqualValues(t, 42, got.TokenCount)
}

func TestTenantSettingIsTransactionLocal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// One connection, so the query after the transaction reuses its connection.
	st, err := store.Open(ctx, store.Config{URL: pgtest.URL(t), MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	var during, after string
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		return tx.QueryRowForTest(ctx, "SELECT current_setting('mnemos.tenant_id')").Scan(&during)
	}))
	require.Equal(t, "acme", during)
	require.NoError(t, st.Pool().QueryRow(ctx, "SELECT coalesce(current_setting('mnemos.tenant_id', true), '')").Scan(&after))
	require.Empty(t, after, "the tenant setting must not outlive its transaction on a pooled connection")
}

func TestInsertTurnIsIdempotent(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	ctx := context.Background()
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		_, err := tx.LockSession(ctx, "s1", "main")
		require.NoError(t, err)
		ok, _, err := tx.InsertTurn(ctx, store.Turn{SessionID: "s1", EventID: "e1", Seq: 1, Status: store.TurnPending})
		require.NoError(t, err)
		require.True(t, ok)
		ok, prev, err := tx.InsertTurn(ctx, store.Turn{SessionID: "s1", EventID: "e1", Seq: 1, Status: store.TurnPending})
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, "e1", prev.EventID)
		ok, prev, err = tx.InsertTurn(ctx, store.Turn{SessionID: "s1", EventID: "e2", Seq: 1, Status: store.TurnPending})
		require.NoError(t, err)
		require.False(t, ok, "a second event with a taken seq is not inserted")
		require.Equal(t, "e1", prev.EventID, "the row holding the seq is returned")
		return nil
	}))
}

func TestOutboxRelayDeletesOnlyPublished(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	ctx := context.Background()
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		for _, id := range []string{"a", "b", "c"} {
			if err := tx.Enqueue(ctx, store.OutboxEvent{Subject: "turn.accounted.acme.s1", MsgID: id, Payload: []byte(id)}); err != nil {
				return err
			}
		}
		return nil
	}))
	n, err := st.RelayOutbox(ctx, 10, func(_ context.Context, evs []store.OutboxEvent) ([]int64, error) {
		require.Len(t, evs, 3)
		require.Equal(t, "a", evs[0].MsgID, "oldest first")
		return []int64{evs[0].ID}, errors.New("bus down after the first")
	})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	left, err := st.OutboxBacklog(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, left)
}

func TestIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := pgtest.New(t)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))

	// A backend terminated mid-transaction (as a failover or an operator does).
	err := st.InTx(ctx, "acme", func(tx *store.Tx) error {
		var pid int
		if err := tx.QueryRowForTest(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			return err
		}
		if _, err := st.Pool().Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
			return err
		}
		_, err := tx.LockSession(ctx, "s1", "main")
		return err
	})
	require.Error(t, err)
	require.True(t, store.IsUnavailable(err), "terminated backend: %v", err)

	// A server that does not answer.
	_, err = store.Open(ctx, store.Config{URL: "postgres://postgres@127.0.0.1:1/x?connect_timeout=2"})
	require.True(t, store.IsUnavailable(err), "refused connection: %v", err)

	// Wrong work is not unavailability: a constraint violation.
	err = st.InTx(ctx, "ghost", func(tx *store.Tx) error {
		_, err := tx.LockSession(ctx, "s1", "main")
		return err
	})
	require.ErrorIs(t, err, store.ErrUnknownTenant)
	require.False(t, store.IsUnavailable(err))
}
