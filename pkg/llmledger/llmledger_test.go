package llmledger_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// answers is a provider whose every answer reports the usage set last, as
// the model named in the request.
type answers struct {
	name  string
	usage atomic.Pointer[llm.Usage]
	calls atomic.Int64
}

func (a *answers) Name() string { return a.name }

func (a *answers) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	a.calls.Add(1)
	return llm.Response{Text: "ok", Model: req.Model, Usage: *a.usage.Load()}, nil
}

func (a *answers) reports(u llm.Usage) { a.usage.Store(&u) }

type fixture struct {
	store    *store.Store
	ledger   *llmledger.Ledger
	provider *answers
	guarded  llm.Provider
}

func setup(t *testing.T, providerName string, opts ...llmledger.Option) fixture {
	t.Helper()
	st := pgtest.New(t)
	for _, tenant := range []string{"acme", "globex"} {
		require.NoError(t, st.EnsureTenant(context.Background(), tenant, tenant))
	}
	// A TTL of zero reads the settings on every call: a test that changes
	// them sees the change on its next call, however fast the store is.
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, 0)
	require.NoError(t, err)
	ledger := llmledger.New(st, settings, opts...)
	p := &answers{name: providerName}
	p.reports(llm.Usage{})
	return fixture{store: st, ledger: ledger, provider: p, guarded: llm.Guard(p, llm.GuardOptions{
		Budget: ledger, Recorder: ledger, Pricer: ledger, MaxAttempts: 1,
	})}
}

func (f fixture) call(t *testing.T, tenant string, task llm.Task, model string, u llm.Usage) error {
	t.Helper()
	f.provider.reports(u)
	_, err := f.guarded.Complete(context.Background(), llm.Request{Tenant: tenant, Task: task, Model: model})
	return err
}

// costs is the recorded cost of tenant's usage, by task.
func (f fixture) costs(t *testing.T, tenant string) map[string]int64 {
	t.Helper()
	rows, err := f.store.LLMUsageOf(context.Background(), tenant)
	require.NoError(t, err)
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Task] += r.CostNanoUSD
	}
	return out
}

// TestEveryKindOfTokenIsPriced: a call of a million tokens of one kind
// costs the model's list price of that kind, recorded beside its tokens.
func TestEveryKindOfTokenIsPriced(t *testing.T) {
	t.Parallel()
	f := setup(t, "anthropic")
	const million = 1_000_000
	for task, u := range map[llm.Task]llm.Usage{
		llm.TaskCompaction: {InputTokens: million},
		llm.TaskNotes:      {OutputTokens: million},
		llm.TaskExtraction: {CacheWriteTokens: million},
		llm.TaskRecall:     {CacheReadTokens: million},
	} {
		require.NoError(t, f.call(t, "acme", task, "claude-sonnet-4-5-20250929", u))
	}
	require.Equal(t, map[string]int64{
		"compaction": 3 * int64(llm.Dollar), "notes": 15 * int64(llm.Dollar),
		"extraction": 3_750_000_000, "recall": 300_000_000,
	}, f.costs(t, "acme"))

	// A second call adds to the day's row, tokens and cost alike.
	require.NoError(t, f.call(t, "acme", llm.TaskRecall, "claude-haiku-4-5", llm.Usage{InputTokens: 10, CacheReadTokens: 7}))
	rows, err := f.store.LLMUsageOf(context.Background(), "acme")
	require.NoError(t, err)
	var haiku store.LLMUsage
	for _, r := range rows {
		if r.Model == "claude-haiku-4-5" {
			haiku = r
		}
	}
	require.Equal(t, int64(10*1_000+7*100), haiku.CostNanoUSD, "haiku: $1 and $0.10 per million")
	require.Equal(t, int64(17), haiku.Tokens())
	require.Empty(t, f.costs(t, "globex"))
}

func TestATenantsOwnPriceWins(t *testing.T) {
	t.Parallel()
	f := setup(t, "openai", llmledger.WithPrices(llm.DefaultPrices().With(llm.Prices{
		"llama3.1:70b": {Input: llm.PerMillion(200), Output: llm.PerMillion(200), CacheWrite: llm.PerMillion(200), CacheRead: llm.PerMillion(200)},
	})))
	require.NoError(t, f.store.SetTenantSettings(context.Background(), "acme", []byte(
		`{"llm": {"prices": {"gpt-4o": {"input": 1, "output": 2, "cache_write": 3, "cache_read": 0.5}}}}`)))
	u := llm.Usage{InputTokens: 1000, OutputTokens: 1000, CacheWriteTokens: 1000, CacheReadTokens: 1000}
	for _, tenant := range []string{"acme", "globex"} {
		require.NoError(t, f.call(t, tenant, llm.TaskNotes, "gpt-4o-2024-08-06", u))
		require.NoError(t, f.call(t, tenant, llm.TaskDreaming, "llama3.1:70b", u))
		require.NoError(t, f.call(t, tenant, llm.TaskRecall, "a-model-nobody-priced", u))
	}
	require.Equal(t, map[string]int64{"notes": 1000 * (1_000 + 2_000 + 3_000 + 500), "dreaming": 4 * 1000 * 200, "recall": 0},
		f.costs(t, "acme"), "acme's own price of gpt-4o; the process's price of llama")
	require.Equal(t, map[string]int64{"notes": 1000 * (2_500 + 10_000 + 2_500 + 1_250), "dreaming": 4 * 1000 * 200, "recall": 0},
		f.costs(t, "globex"), "globex pays the list price")
}

func TestTheBuiltinProviderCostsNothing(t *testing.T) {
	t.Parallel()
	f := setup(t, "builtin")
	require.NoError(t, f.call(t, "acme", llm.TaskCompaction, "claude-sonnet-4-5", llm.Usage{InputTokens: 5000, OutputTokens: 500}))
	require.Equal(t, map[string]int64{"compaction": 0}, f.costs(t, "acme"))
}

// TestTheMoneyBudgetRefusesTheNextCall: the call that crosses
// llm.daily_budget_usd is allowed (its cost is known only after it); the
// next is refused without reaching the provider, saying which budget and
// how much was spent, and other tenants are not stopped.
func TestTheMoneyBudgetRefusesTheNextCall(t *testing.T) {
	t.Parallel()
	f := setup(t, "anthropic")
	require.NoError(t, f.store.SetTenantSettings(context.Background(), "acme", []byte(`{"llm": {"daily_budget_usd": 0.05}}`)))
	u := llm.Usage{InputTokens: 10_000, OutputTokens: 1_000} // $0.03 + $0.015 at Sonnet's prices
	require.NoError(t, f.call(t, "acme", llm.TaskCompaction, "claude-sonnet-4-5", u))
	require.NoError(t, f.call(t, "acme", llm.TaskCompaction, "claude-sonnet-4-5", u), "$0.045 of $0.05: one more call may go")
	err := f.call(t, "acme", llm.TaskCompaction, "claude-sonnet-4-5", u)
	require.ErrorIs(t, err, llm.ErrBudgetExhausted)
	require.Equal(t, llm.KindBudget, llm.KindOf(err))
	require.ErrorContains(t, err, "spent $0.09 of its $0.05 today (llm.daily_budget_usd)")
	require.Equal(t, int64(2), f.provider.calls.Load(), "the refused call did not reach the provider")
	require.NoError(t, f.call(t, "globex", llm.TaskCompaction, "claude-sonnet-4-5", u), "budgets are per tenant")

	// The token budget still works beside it, and says so.
	require.NoError(t, f.store.SetTenantSettings(context.Background(), "globex", []byte(`{"llm": {"daily_token_budget": 1000, "daily_budget_usd": 100}}`)))
	err = f.call(t, "globex", llm.TaskCompaction, "claude-sonnet-4-5", u)
	require.ErrorIs(t, err, llm.ErrBudgetExhausted)
	require.ErrorContains(t, err, "used 11000 of its 1000 tokens today (llm.daily_token_budget)")
}
