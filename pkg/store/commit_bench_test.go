package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// BenchmarkTransactionEndingInWrites times a transaction of one session's
// lock and its save, ended by Pipeline and then COMMIT, or by
// PipelineCommit: the difference is one round trip.
func BenchmarkTransactionEndingInWrites(b *testing.B) {
	ctx := context.Background()
	st, _ := countedStore(b, 1)
	require.NoError(b, st.EnsureTenant(ctx, "acme", "Acme"))
	for _, c := range []struct {
		name string
		end  func(*store.Tx, func(*store.Tx) error) error
	}{
		{"Pipeline", func(tx *store.Tx, fn func(*store.Tx) error) error { return tx.Pipeline(ctx, fn) }},
		{"PipelineCommit", func(tx *store.Tx, fn func(*store.Tx) error) error { return tx.PipelineCommit(ctx, fn) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				require.NoError(b, st.InTx(ctx, "acme", func(tx *store.Tx) error {
					s, err := tx.LockSession(ctx, "s1", "main")
					if err != nil {
						return err
					}
					s.TokenCount++
					return c.end(tx, func(p *store.Tx) error { return p.SaveSessions(ctx, s) })
				}))
			}
		})
	}
}
