package gateway_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// reporter answers every call with the usage given, as the model asked for.
type reporter struct{ usage llm.Usage }

func (reporter) Name() string { return "anthropic" }

func (r reporter) Complete(_ context.Context, req llm.Request) (llm.Response, error) {
	return llm.Response{Text: "ok", Model: req.Model, Usage: r.usage}, nil
}

// TestUsageReportsCostByServiceAndDay: calls made through the guarded
// provider and the ledger, as the services make them, show in GET
// /v1/usage by day and task with what they cost, the tenant's own price
// winning; another tenant's calls do not show; and a spent money budget
// says so.
func TestUsageReportsCostByServiceAndDay(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	require.NoError(t, h.store.SetTenantSettings(ctx, "acme", []byte(
		`{"llm": {"daily_budget_usd": 0.5, "prices": {"claude-haiku-4-5": {"input": 2, "output": 10, "cache_write": 2.5, "cache_read": 0.2}}}}`)))
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), h.store.TenantSettings, time.Millisecond)
	require.NoError(t, err)
	ledger := llmledger.New(h.store, settings)
	today := time.Now().UTC()
	yesterday := today.AddDate(0, 0, -1)
	call := func(tenant string, at time.Time, task llm.Task, model string, u llm.Usage) {
		t.Helper()
		g := llm.Guard(reporter{usage: u}, llm.GuardOptions{Recorder: ledger, Pricer: ledger, Now: func() time.Time { return at }})
		_, err := g.Complete(ctx, llm.Request{Tenant: tenant, Task: task, Model: model})
		require.NoError(t, err)
	}
	// Sonnet at list price: $3 in, $15 out, $3.75 cache write, $0.30 cache read per million.
	call("acme", yesterday, llm.TaskCompaction, "claude-sonnet-4-5", llm.Usage{InputTokens: 100_000, OutputTokens: 2_000})    // 0.3 + 0.03
	call("acme", yesterday, llm.TaskNotes, "claude-sonnet-4-5", llm.Usage{CacheWriteTokens: 10_000, CacheReadTokens: 50_000}) // 0.0375 + 0.015
	call("acme", today, llm.TaskCompaction, "claude-sonnet-4-5", llm.Usage{InputTokens: 200_000, OutputTokens: 4_000})        // 0.6 + 0.06
	// Haiku at acme's own price: $2 in, $10 out.
	call("acme", today, llm.TaskRecall, "claude-haiku-4-5", llm.Usage{InputTokens: 1_000, OutputTokens: 100}) // 0.002 + 0.001
	call("globex", today, llm.TaskRecall, "claude-haiku-4-5", llm.Usage{InputTokens: 1_000, OutputTokens: 100})

	c := client.New(h.srv.URL, "key-acme", client.WithHTTPClient(h.client))
	u, err := c.GetUsage(ctx, "", "")
	require.NoError(t, err)
	require.Equal(t, today.Format(time.DateOnly), u.To)
	require.Equal(t, today.AddDate(0, 0, -29).Format(time.DateOnly), u.From)
	require.Len(t, u.Rows, 4)

	byDay := map[string]string{}
	for _, d := range u.Days {
		byDay[d.Day] = d.CostUSD
	}
	require.Equal(t, map[string]string{yesterday.Format(time.DateOnly): "0.3825", today.Format(time.DateOnly): "0.663"}, byDay)
	byTask := map[string]api.UsageRow{}
	for _, r := range u.Tasks {
		byTask[r.Task] = r
	}
	require.Equal(t, "0.99", byTask["compaction"].CostUSD)
	require.Equal(t, int64(990_000_000), byTask["compaction"].CostNanoUSD)
	require.Equal(t, int64(306_000), byTask["compaction"].Tokens)
	require.Equal(t, "0.0525", byTask["notes"].CostUSD)
	require.Equal(t, "0.003", byTask["recall"].CostUSD, "acme's own price of haiku, not the list price ($0.0015)")
	require.Equal(t, "1.0455", u.Total.CostUSD)
	require.Equal(t, int64(4), u.Total.Calls)

	require.Equal(t, api.UsageBudget{
		Day: today.Format(time.DateOnly), Tokens: 205_100, CostUSD: "0.663", DailyBudgetUSD: "0.5", Exhausted: true,
		Reason: "tenant acme spent $0.663 of its $0.5 today (llm.daily_budget_usd): budget exhausted",
	}, u.Budget)

	// A span of one day; globex sees only its own call, and no budget.
	u, err = client.New(h.srv.URL, "key-globex", client.WithHTTPClient(h.client)).GetUsage(ctx, yesterday.Format(time.DateOnly), today.Format(time.DateOnly))
	require.NoError(t, err)
	require.Len(t, u.Rows, 1)
	require.Equal(t, "0.0015", u.Total.CostUSD)
	require.False(t, u.Budget.Exhausted)
	u, err = c.GetUsage(ctx, yesterday.Format(time.DateOnly), yesterday.Format(time.DateOnly))
	require.NoError(t, err)
	require.Equal(t, "0.3825", u.Total.CostUSD)

	for _, q := range []string{"?from=yesterday", "?to=2026-13-01", "?from=2026-11-02&to=2026-11-01", "?from=2020-01-01&to=2026-11-01"} {
		status, body := h.do(t, http.MethodGet, "/v1/usage"+q, "key-acme", nil)
		require.Equal(t, http.StatusBadRequest, status, q)
		require.Equal(t, "bad_day", body["error"].(map[string]any)["code"], q)
	}
}
