package llm_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
)

func TestMemoryLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := llm.NewMemoryLedger(100)
	require.NoError(t, l.Allow(ctx, "acme"))
	require.NoError(t, l.Record(ctx, llm.Call{Tenant: "acme", Usage: llm.Usage{InputTokens: 60, OutputTokens: 39}}))
	require.NoError(t, l.Allow(ctx, "acme"), "99 of 100: one more call may go")
	require.NoError(t, l.Record(ctx, llm.Call{Tenant: "acme", Usage: llm.Usage{CacheReadTokens: 1}}))
	require.ErrorIs(t, l.Allow(ctx, "acme"), llm.ErrBudgetExhausted)
	require.NoError(t, l.Allow(ctx, "globex"), "budgets are per tenant")
	require.Equal(t, int64(100), l.Spent("acme"))
	require.Zero(t, l.Spent("globex"))

	calls := l.Calls()
	require.Len(t, calls, 2)
	calls[0].Tenant = "changed"
	require.Equal(t, "acme", l.Calls()[0].Tenant, "Calls returns a copy")
}

func TestMemoryLedgerWithoutLimit(t *testing.T) {
	t.Parallel()
	l := llm.NewMemoryLedger(0)
	require.NoError(t, l.Record(context.Background(), llm.Call{Tenant: "acme", Usage: llm.Usage{InputTokens: 1 << 40}}))
	require.NoError(t, l.Allow(context.Background(), "acme"))
}

func TestMemoryLedgerConcurrent(t *testing.T) {
	t.Parallel()
	l := llm.NewMemoryLedger(1_000_000)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			tenant := []string{"acme", "globex"}[i%2]
			for range 20 {
				_ = l.Allow(context.Background(), tenant)
				require.NoError(t, l.Record(context.Background(), llm.Call{Tenant: tenant, Usage: llm.Usage{InputTokens: 3}}))
			}
		})
	}
	wg.Wait()
	require.Equal(t, int64(25*20*3), l.Spent("acme"))
	require.Equal(t, int64(25*20*3), l.Spent("globex"))
	require.Len(t, l.Calls(), 1000)
}
