package llmledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestTheStraightRunIsReckonedFromTheClientsRequest: each rule of
// StraightUsage, on a round whose upstream read 40,000 tokens from the
// cache, wrote 8,000 and took 2,000 fresh (50,000 in), and answered 500.
func TestTheStraightRunIsReckonedFromTheClientsRequest(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	through := llm.Usage{InputTokens: 2_000, CacheReadTokens: 40_000, CacheWriteTokens: 8_000, OutputTokens: 500}
	// The client sent twice the bytes Mnemos sent up: straight, 100,000 in.
	changed := llmledger.Round{Usage: through, Changed: true, SentBytes: 150_000, ClientBytes: 300_000, Caches: true, Continues: true, At: now}
	warm := store.StraightPrefix{Tokens: 90_000, At: now.Add(-time.Minute)}
	for _, c := range []struct {
		name  string
		round func(llmledger.Round) llmledger.Round
		prev  store.StraightPrefix
		want  llm.Usage
	}{
		{"sent as the client sent it: the upstream's usage", func(r llmledger.Round) llmledger.Round { r.Changed = false; return r }, warm, through},
		{"continuing within the cache's lifetime: reads the previous straight request", func(r llmledger.Round) llmledger.Round { return r }, warm,
			llm.Usage{CacheReadTokens: 90_000, CacheWriteTokens: 100_000 - 90_000, OutputTokens: 500}},
		{"the previous straight request larger than this one: reads this one whole", func(r llmledger.Round) llmledger.Round { return r },
			store.StraightPrefix{Tokens: 120_000, At: now.Add(-time.Minute)}, llm.Usage{CacheReadTokens: 100_000, OutputTokens: 500}},
		{"past the cache's lifetime: reads what the upstream read", func(r llmledger.Round) llmledger.Round { return r },
			store.StraightPrefix{Tokens: 90_000, At: now.Add(-llmledger.CacheLifetime - time.Second)},
			llm.Usage{CacheReadTokens: 40_000, CacheWriteTokens: 100_000 - 40_000, OutputTokens: 500}},
		{"not continuing its thread: reads what the upstream read", func(r llmledger.Round) llmledger.Round { r.Continues = false; return r }, warm,
			llm.Usage{CacheReadTokens: 40_000, CacheWriteTokens: 100_000 - 40_000, OutputTokens: 500}},
		{"no breakpoint: nothing cached, all input", func(r llmledger.Round) llmledger.Round { r.Caches = false; return r }, warm,
			llm.Usage{InputTokens: 100_000, OutputTokens: 500}},
		{"Mnemos sent more than the client: scaled down", func(r llmledger.Round) llmledger.Round { r.ClientBytes = 75_000; r.Continues = false; return r }, warm,
			llm.Usage{CacheReadTokens: 25_000, OutputTokens: 500}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, llmledger.StraightUsage(c.round(changed), c.prev))
		})
	}
}

// sessionOf creates a session of tenant, as the proxy's record of a round
// does.
func sessionOf(t *testing.T, st *store.Store, tenant, id string) {
	t.Helper()
	require.NoError(t, st.InTx(context.Background(), tenant, func(tx *store.Tx) error {
		_, err := tx.LockSession(context.Background(), id, "main")
		return err
	}))
}

// TestProxiedRoundsArePricedBesideTheirStraightCost: a proxied round is
// recorded under the task "proxy" at its model's price, with what it
// would have cost straight; its session sums both, and its next round
// reads the straight request the first one left.
func TestProxiedRoundsArePricedBesideTheirStraightCost(t *testing.T) {
	t.Parallel()
	f := setup(t, "anthropic")
	ctx := context.Background()
	sessionOf(t, f.store, "acme", "s1")
	price, ok := llm.DefaultPrices().Lookup("claude-sonnet-4-5")
	require.True(t, ok)
	at := time.Now().UTC()

	first := llmledger.Round{Tenant: "acme", Session: "s1", Provider: "anthropic", Model: "claude-sonnet-4-5-20250929",
		Usage: llm.Usage{InputTokens: 3, CacheWriteTokens: 20_000, OutputTokens: 300}, Caches: true, At: at}
	p1, err := f.ledger.RecordRound(ctx, first)
	require.NoError(t, err)
	require.Equal(t, price.Cost(first.Usage), p1.Through)
	require.Equal(t, p1.Through, p1.Straight, "sent as the client sent it, the round is its own straight run")

	second := first
	second.Usage = llm.Usage{InputTokens: 3, CacheReadTokens: 20_000, CacheWriteTokens: 4_000, OutputTokens: 200}
	second.Changed, second.SentBytes, second.ClientBytes, second.Continues = true, 72_009, 96_012, true
	second.At = at.Add(30 * time.Second)
	p2, err := f.ledger.RecordRound(ctx, second)
	require.NoError(t, err)
	straight := llmledger.StraightUsage(second, store.StraightPrefix{Tokens: first.Usage.InputTokens + first.Usage.CacheWriteTokens, At: at})
	require.Equal(t, int64(20_003), straight.CacheReadTokens, "straight, the first request is read whole")
	require.Equal(t, price.Cost(second.Usage), p2.Through)
	require.Equal(t, price.Cost(straight), p2.Straight)
	require.Positive(t, p2.Savings())

	rows, err := f.store.LLMUsageOf(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, store.TaskProxy, rows[0].Task)
	require.Equal(t, int64(2), rows[0].Calls)
	require.Equal(t, int64(p1.Through+p2.Through), rows[0].CostNanoUSD)
	require.Equal(t, int64(p1.Straight+p2.Straight), rows[0].StraightNanoUSD)
	sum := first.Usage.Add(second.Usage)
	require.Equal(t, [4]int64{sum.InputTokens, sum.CacheReadTokens, sum.CacheWriteTokens, sum.OutputTokens},
		[4]int64{rows[0].InputTokens, rows[0].CacheReadTokens, rows[0].CacheWriteTokens, rows[0].OutputTokens}, "the tokens as the upstream reported them")

	var costs []store.ProxyCost
	require.NoError(t, f.store.InTx(ctx, "acme", func(tx *store.Tx) error {
		costs, err = tx.ProxyCosts(ctx, []string{"s1", "s-none"})
		return err
	}))
	require.Len(t, costs, 1)
	require.Equal(t, int64(2), costs[0].Rounds)
	require.Equal(t, rows[0].CostNanoUSD, costs[0].CostNanoUSD)
	require.Equal(t, rows[0].StraightNanoUSD, costs[0].StraightNanoUSD)
	require.WithinDuration(t, second.At, costs[0].LastAt, time.Millisecond)

	// A round of no session is the day's only; a model no table knows costs nothing.
	p3, err := f.ledger.RecordRound(ctx, llmledger.Round{Tenant: "acme", Provider: "openai", Model: "llama3.1:70b", Usage: llm.Usage{InputTokens: 1_000}, At: at})
	require.NoError(t, err)
	require.False(t, p3.Known)
	require.Zero(t, p3.Through)
}

// TestTheMoneyBudgetCountsTheAgentsRounds: llm.daily_budget_usd counts
// the agent's proxied rounds beside Mnemos's own calls, and once spent
// refuses both; llm.daily_token_budget counts Mnemos's own calls only.
func TestTheMoneyBudgetCountsTheAgentsRounds(t *testing.T) {
	t.Parallel()
	f := setup(t, "anthropic")
	ctx := context.Background()
	require.NoError(t, f.store.SetTenantSettings(ctx, "acme", []byte(`{"llm": {"daily_budget_usd": 0.5}}`)))
	require.NoError(t, f.store.SetTenantSettings(ctx, "globex", []byte(`{"llm": {"daily_token_budget": 1000}}`)))
	round := func(tenant string) {
		t.Helper()
		// $3 per million on Sonnet: 100,000 tokens in, $0.30.
		_, err := f.ledger.RecordRound(ctx, llmledger.Round{Tenant: tenant, Provider: "anthropic", Model: "claude-sonnet-4-5", Usage: llm.Usage{InputTokens: 100_000}})
		require.NoError(t, err)
	}
	require.NoError(t, f.ledger.AllowAgent(ctx, "acme"))
	round("acme")
	require.NoError(t, f.ledger.AllowAgent(ctx, "acme"), "$0.30 of $0.50")
	require.NoError(t, f.ledger.Allow(ctx, "acme"))
	round("acme")
	err := f.ledger.AllowAgent(ctx, "acme")
	require.ErrorIs(t, err, llm.ErrBudgetExhausted)
	require.ErrorContains(t, err, "spent $0.6 of its $0.5 today (llm.daily_budget_usd)")
	require.ErrorIs(t, f.ledger.Allow(ctx, "acme"), llm.ErrBudgetExhausted, "Mnemos's own calls stop too")

	round("globex")
	require.NoError(t, f.ledger.AllowAgent(ctx, "globex"), "a token budget does not bound the agent")
	require.NoError(t, f.ledger.Allow(ctx, "globex"), "nor do the agent's tokens count against it")
	tokens, _, err := f.store.LLMSpentOnDay(ctx, "globex", time.Now())
	require.NoError(t, err)
	require.Zero(t, tokens)
}
