package memory_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// fullIndexes are four scopes' indexes of 300 lines of 130 bytes each, all
// over both limits.
func fullIndexes() []memory.ScopeIndex {
	var out []memory.ScopeIndex
	for _, k := range memory.Kinds {
		out = append(out, memory.ScopeIndex{Scope: memory.Scope{Kind: k, ID: "bench"}, Content: indexOf(300, 130)})
	}
	return out
}

// BenchmarkSection renders a memory section of four full indexes, as the
// first context read after a compaction does.
func BenchmarkSection(b *testing.B) {
	ix, l := fullIndexes(), memory.DefaultLimits()
	for b.Loop() {
		memory.Section(ix, l)
	}
}

// BenchmarkFrozenSection is what every other context read pays: reading the
// stored section (four blocks of about 25 KB) in the read's transaction.
func BenchmarkFrozenSection(b *testing.B) {
	db := pgtest.New(b)
	ctx := context.Background()
	require.NoError(b, db.EnsureTenant(ctx, "bench", "bench"))
	blocks := memory.Section(fullIndexes(), memory.DefaultLimits())
	require.NoError(b, db.InTx(ctx, "bench", func(tx *store.Tx) error {
		if _, err := tx.LockSession(ctx, "s", "main"); err != nil {
			return err
		}
		_, err := tx.PutMemorySection(ctx, store.MemorySection{SessionID: "s", Blocks: blocks})
		return err
	}))
	req := memory.SessionSection{SessionID: "s", MemoryScope: map[string]string{"user": "bench"}}
	for b.Loop() {
		require.NoError(b, db.InTx(ctx, "bench", func(tx *store.Tx) error {
			got, err := memory.FrozenSection(ctx, tx, req, memory.DefaultLimits())
			if len(got) != len(blocks) {
				b.Fatalf("got %d blocks", len(got))
			}
			return err
		}))
	}
}
