package contextwindow_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// later is a provider set once the test's store exists.
type later struct{ p atomic.Pointer[llm.Provider] }

func (l *later) Name() string { return "anthropic" }

func (l *later) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	return (*l.p.Load()).Complete(ctx, req)
}

// TestTheMoneyBudgetStopsTheModelSummary: a tenant's compactions use the
// model, through the ledger as in production, until what they cost today
// reaches llm.daily_budget_usd. The next compaction is refused the model
// without calling it and falls back to the extractive summary; the session
// still gets its context, the compaction's error says which budget stopped
// it and how much was spent, and GET /v1/usage says the budget is spent.
func TestTheMoneyBudgetStopsTheModelSummary(t *testing.T) {
	t.Parallel()
	srv := llmtest.NewAnthropicServer(t, func(llmtest.Request) llmtest.Reply {
		r := llmtest.Text("<summary>\n## 1. Primary Request and Intent\nThe user had modules read.\n</summary>")
		// $0.30 of input and $0.03 of output at Sonnet 4.5's list prices.
		r.Usage = llm.Usage{InputTokens: 100_000, OutputTokens: 2_000}
		return r
	})
	p := &later{}
	h := setup(t, p)
	ctx := context.Background()
	require.NoError(t, h.store.SetTenantSettings(ctx, tenant, []byte(`{"llm": {"daily_budget_usd": 0.25}}`)))
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), h.store.TenantSettings, time.Millisecond)
	require.NoError(t, err)
	ledger := llmledger.New(h.store, settings)
	sdk, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: srv.URL, Model: "claude-sonnet-4-5"})
	require.NoError(t, err)
	guarded := llm.Guard(sdk, llm.GuardOptions{
		Budget: ledger, Recorder: ledger, Pricer: ledger, MaxAttempts: 2,
		Sleep: func(context.Context, time.Duration) error { return nil },
	})
	p.p.Store(&guarded)

	c := h.conversation("spender")
	type compactionBody struct {
		Method string `json:"method"`
		Error  string `json:"error"`
	}
	var list struct {
		Compactions []compactionBody `json:"compactions"`
	}
	compactions := func() []compactionBody {
		h.get(t, "/v1/sessions/spender/compactions", &list)
		return list.Compactions
	}
	grow(t, h, c, func(int) bool { return len(compactions()) == 1 })
	require.Equal(t, events.MethodFull, compactions()[0].Method, "the first compaction's summary is the model's")
	require.Equal(t, 1, srv.Calls())

	grow(t, h, c, func(int) bool { return len(compactions()) == 2 })
	var second compactionBody
	for _, cp := range compactions() {
		if cp.Method != events.MethodFull {
			second = cp
		}
	}
	require.Equal(t, events.MethodExtractive, second.Method, "the budget is spent: the extractive summary")
	require.Equal(t, 1, srv.Calls(), "the refused call did not reach the model")
	require.Contains(t, second.Error, "budget_exhausted")
	require.Contains(t, second.Error, "spent $0.33 of its $0.25 today (llm.daily_budget_usd)")

	var got contextBody
	status, raw := h.get(t, "/v1/sessions/spender/context", &got)
	require.Equal(t, 200, status, string(raw))
	require.NotNil(t, got.Compaction)
	require.Equal(t, events.MethodExtractive, got.Compaction.Method, "the session still gets its context")

	var usage struct {
		Tasks []struct {
			Task    string `json:"task"`
			CostUSD string `json:"cost_usd"`
		} `json:"tasks"`
		Budget struct {
			Exhausted bool   `json:"exhausted"`
			Reason    string `json:"reason"`
		} `json:"budget"`
	}
	status, raw = h.get(t, "/v1/usage", &usage)
	require.Equal(t, 200, status, string(raw))
	require.Len(t, usage.Tasks, 1)
	require.Equal(t, "compaction", usage.Tasks[0].Task)
	require.Equal(t, "0.33", usage.Tasks[0].CostUSD)
	require.True(t, usage.Budget.Exhausted)
	require.Contains(t, usage.Budget.Reason, "llm.daily_budget_usd")
}
