package store_test

import (
	"bytes"
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// sessionStore is a store with tenant acme's session s1, and the
// administrator's pool on its database.
func sessionStore(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	st, _ := countedStore(t, 2)
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		_, err := tx.LockSession(ctx, "s1", "main")
		return err
	}))
	return st, pgtest.Admin(t, st)
}

// A session's agent request is written in pieces, and a round writes only
// the pieces whose bytes changed: the ones before keep the row version the
// round before wrote. Read back, it is the body as put, byte for byte,
// whether it grew, changed in its middle, or shrank.
func TestAnAgentRequestRewritesOnlyThePiecesThatChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, admin := sessionStore(t)
	put := func(body []byte) {
		t.Helper()
		require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
			if _, err := tx.LockSession(ctx, "s1", "main"); err != nil {
				return err
			}
			stored, err := tx.AgentRequestDigests(ctx, "s1")
			if err != nil {
				return err
			}
			return tx.PutAgentRequest(ctx, store.AgentRequest{SessionID: "s1", Model: "m", Body: body}, stored)
		}))
		var got store.AgentRequest
		require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) (err error) {
			got, err = tx.AgentRequest(ctx, "s1")
			return err
		}))
		require.True(t, bytes.Equal(body, got.Body), "the request read back is not the one put (%d bytes read, %d put)", len(got.Body), len(body))
	}
	// versions is each stored piece's row version (xmin), by index.
	versions := func() []string {
		t.Helper()
		rows, err := admin.Query(ctx, "SELECT xmin::text FROM agent_request_pieces WHERE session_id = 's1' ORDER BY idx")
		require.NoError(t, err)
		var out []string
		for rows.Next() {
			var v string
			require.NoError(t, rows.Scan(&v))
			out = append(out, v)
		}
		require.NoError(t, rows.Err())
		return out
	}
	body := make([]byte, 5*store.AgentRequestPiece+100)
	for i := range body {
		body[i] = byte('a' + i%26)
	}

	put(body)
	first := versions()
	require.Len(t, first, 6)

	// The next round: the same bytes, its last piece changed and one more.
	grown := append(bytes.Clone(body), bytes.Repeat([]byte("z"), store.AgentRequestPiece)...)
	grown[len(body)-1] = '!'
	put(grown)
	second := versions()
	require.Len(t, second, 7)
	require.Equal(t, first[:5], second[:5], "pieces whose bytes did not change are written again")
	require.NotEqual(t, first[5], second[5], "the changed piece is not written")

	// A change in the middle rewrites that piece alone.
	middle := bytes.Clone(grown)
	middle[2*store.AgentRequestPiece+7] = '#'
	put(middle)
	third := versions()
	for i := range third {
		if i == 2 {
			require.NotEqual(t, second[i], third[i], "piece %d changed and is not written", i)
		} else {
			require.Equal(t, second[i], third[i], "piece %d is written again", i)
		}
	}

	// A shorter request leaves no piece of the longer one behind.
	put(middle[:store.AgentRequestPiece+1])
	require.Len(t, versions(), 2)
	put(middle[:10])
	require.Len(t, versions(), 1)
}

// A request stored whole, as before its pieces, is read as it was stored,
// and the first round after writes it in pieces.
func TestAnAgentRequestStoredWholeIsStillRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, admin := sessionStore(t)
	whole := []byte(`{"model":"m","messages":[` + strconv.Quote("hello") + `]}`)
	_, err := admin.Exec(ctx, "INSERT INTO agent_requests (tenant_id, session_id, model, body) VALUES ('acme', 's1', 'm', $1)", whole)
	require.NoError(t, err)
	var got store.AgentRequest
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) (err error) {
		got, err = tx.AgentRequest(ctx, "s1")
		return err
	}))
	require.Equal(t, string(whole), string(got.Body))

	// A lost piece is an error, not a request with a hole in it.
	next := bytes.Repeat([]byte("x"), 2*store.AgentRequestPiece)
	require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		stored, err := tx.AgentRequestDigests(ctx, "s1")
		if err != nil {
			return err
		}
		require.Empty(t, stored)
		return tx.PutAgentRequest(ctx, store.AgentRequest{SessionID: "s1", Model: "m", Body: next}, stored)
	}))
	_, err = admin.Exec(ctx, "DELETE FROM agent_request_pieces WHERE session_id = 's1' AND idx = 1")
	require.NoError(t, err)
	require.ErrorContains(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
		_, err := tx.AgentRequest(ctx, "s1")
		return err
	}), "1 of its request's 2 pieces")
}
