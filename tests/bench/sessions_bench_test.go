package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// BenchmarkSessionsByState times the grouped count behind the
// mnemos_sessions gauge, which each accountant runs once per
// MNEMOS_GAUGE_INTERVAL, over tables of 10,000 and 100,000 sessions spread
// over the five states (100 tenants).
func BenchmarkSessionsByState(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st := pgtest.New(b)
			admin := pgtest.Admin(b, st)
			_, err := admin.Exec(ctx, `INSERT INTO tenants (tenant_id, name) SELECT 't' || i, 't' || i FROM generate_series(1, 100) i`)
			require.NoError(b, err)
			_, err = admin.Exec(ctx, `
				INSERT INTO sessions (tenant_id, session_id, state, token_count)
				SELECT 't' || (1 + i % 100), 's' || i,
				       (ARRAY['ok','ok','ok','ok','ok','ok','warning','error','autocompact','blocking'])[1 + i % 10], i % 200000
				FROM generate_series(1, $1) i`, n)
			require.NoError(b, err)
			_, err = admin.Exec(ctx, `VACUUM ANALYZE sessions`)
			require.NoError(b, err)
			for b.Loop() {
				counts, err := st.SessionsByState(ctx)
				require.NoError(b, err)
				require.Len(b, counts, 5)
			}
		})
	}
}
