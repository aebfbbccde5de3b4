package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// BenchmarkContextRender measures the context render alone — what GET
// /context and the Messages API proxy do on the CPU once a session's
// messages are read: assembly.Render and EncodeParts, with allocations —
// for the sessions of BenchmarkContextAssembly (10K, 50K and 150K tokens).
// "fresh" renders messages as read from Postgres, each rendered and
// encoded afresh; "memo" renders the messages of the gateway's context
// cache (sessionctx.Cache), whose renderings are kept from the read before,
// as a session read again is rendered.
func BenchmarkContextRender(b *testing.B) {
	sys := startSystem(b)
	ctx := context.Background()
	cache := sessionctx.NewCache(256 << 20)
	for _, size := range contextSizes {
		id := fmt.Sprintf("render-%d", size)
		require.NoError(b, sys.BuildSession(ctx, id, size))
		var fresh, held sessionctx.State
		require.NoError(b, sys.Store.InTx(ctx, benchmark.Tenant, func(tx *store.Tx) error {
			sess, err := tx.Session(ctx, id)
			if err != nil {
				return err
			}
			if fresh, err = sessionctx.LoadFor(ctx, tx, sess); err != nil {
				return err
			}
			held, err = cache.LoadFor(ctx, tx, sess, nil)
			return err
		}))
		for _, c := range []struct {
			name string
			st   sessionctx.State
		}{{"fresh", fresh}, {"memo", held}} {
			in := assembly.Input{Head: c.st.Head, Messages: c.st.Messages, Cleared: c.st.Cleared, Cuts: c.st.Cuts}
			render := func() int {
				_, messages, err := assembly.Render(in).EncodeParts()
				require.NoError(b, err)
				return len(messages)
			}
			n := render() // a memo's renderings kept, as after the read before
			b.Run(fmt.Sprintf("%dk/%s", size/1000, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					render()
				}
				b.ReportMetric(float64(n), "messages")
			})
		}
	}
}
