package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// TestEstimatePriorReadsTheLatestSessionsOnly: the prior comes from the
// tenant's 200 latest sessions, so its cost does not grow with the
// sessions stored. Before, it looked for the 50 latest sessions that had
// learnt a factor, and a tenant whose sessions had not learnt one (no usage
// reported) had every new session's first batch read all of its sessions.
func TestEstimatePriorReadsTheLatestSessionsOnly(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	ctx := context.Background()
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	admin := pgtest.Admin(t, st)
	// One old session learnt a factor; the 1,000 after it learnt none.
	_, err := admin.Exec(ctx, `
		INSERT INTO sessions (tenant_id, session_id, estimate_factor, dense_factor, created_at)
		VALUES ('acme', 'old', 1.3, 0.9, now() - interval '1 day');
		INSERT INTO sessions (tenant_id, session_id, created_at)
			SELECT 'acme', 's' || n, now() - interval '1 hour' + n * interval '1 second' FROM generate_series(1, 1000) n;
		ANALYZE sessions`)
	require.NoError(t, err)

	prose, dense, err := st.EstimatePrior(ctx, "acme")
	require.NoError(t, err)
	require.Zero(t, prose, "a session older than the 200 latest is not read")
	require.Zero(t, dense)

	// A learnt session among the latest sets the prior.
	_, err = admin.Exec(ctx, `UPDATE sessions SET estimate_factor = 1.2, dense_factor = 0.8 WHERE tenant_id = 'acme' AND session_id = 's900'`)
	require.NoError(t, err)
	prose, dense, err = st.EstimatePrior(ctx, "acme")
	require.NoError(t, err)
	require.InDelta(t, 1.2, prose, 1e-9)
	require.InDelta(t, 0.8, dense, 1e-9)
}
