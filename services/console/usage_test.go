package console

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestUsageShowsCost: the usage page shows each row's cost and the total
// in dollars, exactly as the ledger keeps them.
func TestUsageShowsCost(t *testing.T) {
	h := setup(t)
	ctx := context.Background()
	for _, u := range []store.LLMUsage{
		{Task: "compaction", Model: "claude-sonnet-4-5", InputTokens: 100_000, CostNanoUSD: 300_000_000},
		{Task: "recall", Model: "claude-haiku-4-5", InputTokens: 1_000, CostNanoUSD: 1_000_000},
	} {
		u.Day, u.Provider = time.Now(), "anthropic"
		require.NoError(t, h.store.AddLLMUsage(ctx, tenantA, u, false))
	}
	status, body := h.signIn(t, keyA).get(t, "/console/usage")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Cost ($)")
	require.Contains(t, body, `<td class="num">0.3</td>`)
	require.Contains(t, body, `<td class="num">0.001</td>`)
	require.Contains(t, body, `<td class="num">0.301</td></tr></tfoot>`)
}
