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
	require.NotContains(t, body, `id="proxy-cost"`, "no proxied round: no table of them")

	// A day's proxied rounds: $0.2 through, $0.25 straight; with the
	// day's $0.301 of Mnemos's own calls, $0.05 saved and $0.251 net lost.
	require.NoError(t, h.store.AddProxyRound(ctx, tenantA, "", func(store.StraightPrefix) store.PricedRound {
		return store.PricedRound{Usage: store.LLMUsage{Day: time.Now(), Task: store.TaskProxy, Provider: "anthropic", Model: "claude-sonnet-4-5",
			InputTokens: 50_000, CostNanoUSD: 200_000_000, StraightNanoUSD: 250_000_000}}
	}))
	status, body = h.signIn(t, keyA).get(t, "/console/usage")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `id="proxy-cost"`)
	require.Contains(t, body, `<td class="num">1</td><td class="num">0.2</td><td class="num">0.25</td><td class="num">0.05</td><td class="num">-0.251</td>`)
}
