package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Bounds of GET /v1/usage.
const (
	// usageDefaultDays is how many days, today included, the route answers
	// without from.
	usageDefaultDays = 30
	// usageMaxDays is the longest span one request may ask for.
	usageMaxDays = 366
	dayLayout    = time.DateOnly
)

// UsageRow is one UTC day's model calls of one task (the service that made
// them), provider and model: tokens by kind and what they cost.
type UsageRow struct {
	Day      string `json:"day,omitempty"`
	Task     string `json:"task,omitempty"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	UsageAmounts
}

// UsageAmounts are calls, tokens by kind and cost. Cost is exact: a
// decimal string of dollars, and the same in nano-dollars (10⁻⁹ USD).
type UsageAmounts struct {
	Calls            int64  `json:"calls"`
	FailedCalls      int64  `json:"failed_calls"`
	InputTokens      int64  `json:"input_tokens"`
	OutputTokens     int64  `json:"output_tokens"`
	CacheReadTokens  int64  `json:"cache_read_tokens"`
	CacheWriteTokens int64  `json:"cache_write_tokens"`
	Tokens           int64  `json:"tokens"`
	CostUSD          string `json:"cost_usd"`
	CostNanoUSD      int64  `json:"cost_nanousd"`
}

// UsageBudget is today's spending against the tenant's daily budgets, and
// when one is spent, why model calls are refused.
type UsageBudget struct {
	Day              string `json:"day"`
	Tokens           int64  `json:"tokens"`
	CostUSD          string `json:"cost_usd"`
	DailyTokenBudget int64  `json:"daily_token_budget"`
	DailyBudgetUSD   string `json:"daily_budget_usd"`
	Exhausted        bool   `json:"exhausted"`
	Reason           string `json:"reason,omitempty"`
}

// TenantUsage is the answer of GET /v1/usage.
type TenantUsage struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Rows are by day, task, provider and model; Days by day, Tasks by
	// task, over the whole span.
	Rows   []UsageRow   `json:"rows"`
	Days   []UsageRow   `json:"days"`
	Tasks  []UsageRow   `json:"tasks"`
	Total  UsageAmounts `json:"total"`
	Budget UsageBudget  `json:"budget"`
}

func amounts(u store.LLMUsage) UsageAmounts {
	return UsageAmounts{
		Calls: u.Calls, FailedCalls: u.FailedCalls, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, Tokens: u.Tokens(),
		CostUSD: llm.USD(u.CostNanoUSD).String(), CostNanoUSD: u.CostNanoUSD,
	}
}

// getUsage answers the tenant's model usage and its cost over a span of
// UTC days (from, to: YYYY-MM-DD; the last 30 days by default), by day,
// task, provider and model, with sums by day and by task, and today's
// spending against the daily budgets.
func (g *Gateway) getUsage(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	now := time.Now
	if g.cfg.Now != nil {
		now = g.cfg.Now
	}
	today := now().UTC().Truncate(24 * time.Hour)
	q := r.URL.Query()
	day := func(name string, def time.Time) (time.Time, bool) {
		v := q.Get(name)
		if v == "" {
			return def, true
		}
		d, err := time.Parse(dayLayout, v)
		if err != nil {
			g.refuseRequest(w, r, http.StatusBadRequest, "bad_day", fmt.Sprintf("%s %s: want a UTC day as YYYY-MM-DD", name, describe(v)))
			return time.Time{}, false
		}
		return d, true
	}
	to, ok := day("to", today)
	if !ok {
		return
	}
	from, ok := day("from", to.AddDate(0, 0, -(usageDefaultDays-1)))
	if !ok {
		return
	}
	if span := int(to.Sub(from)/(24*time.Hour)) + 1; span < 1 || span > usageMaxDays {
		g.refuseRequest(w, r, http.StatusBadRequest, "bad_day",
			fmt.Sprintf("from %s to %s: want from on or before to, at most %d days apart", from.Format(dayLayout), to.Format(dayLayout), usageMaxDays))
		return
	}
	set, err := g.settings.For(ctx, tenant)
	if err != nil {
		g.internal(w, "reading tenant settings", err)
		return
	}
	rows, err := g.store.LLMUsageBetween(ctx, tenant, from, to)
	if err != nil {
		g.internal(w, "reading usage", err)
		return
	}
	spentTokens, spentCost, err := g.store.LLMSpentOnDay(ctx, tenant, today)
	if err != nil {
		g.internal(w, "reading usage", err)
		return
	}

	out := TenantUsage{From: from.Format(dayLayout), To: to.Format(dayLayout), Rows: []UsageRow{}, Days: []UsageRow{}, Tasks: []UsageRow{}}
	var total store.LLMUsage
	byDay, byTask := map[string]*store.LLMUsage{}, map[string]*store.LLMUsage{}
	var dayOrder, taskOrder []string
	sum := func(into map[string]*store.LLMUsage, order *[]string, key string, u store.LLMUsage) {
		if into[key] == nil {
			into[key] = &store.LLMUsage{}
			*order = append(*order, key)
		}
		*into[key] = into[key].Add(u)
	}
	for _, u := range rows {
		d := u.Day.Format(dayLayout)
		out.Rows = append(out.Rows, UsageRow{Day: d, Task: u.Task, Provider: u.Provider, Model: u.Model, UsageAmounts: amounts(u)})
		sum(byDay, &dayOrder, d, u)
		sum(byTask, &taskOrder, u.Task, u)
		total = total.Add(u)
	}
	for _, d := range dayOrder {
		out.Days = append(out.Days, UsageRow{Day: d, UsageAmounts: amounts(*byDay[d])})
	}
	slices.Sort(taskOrder)
	for _, t := range taskOrder {
		out.Tasks = append(out.Tasks, UsageRow{Task: t, UsageAmounts: amounts(*byTask[t])})
	}
	out.Total = amounts(total)
	out.Budget = UsageBudget{
		Day: today.Format(dayLayout), Tokens: spentTokens, CostUSD: llm.USD(spentCost).String(),
		DailyTokenBudget: set.LLM.DailyTokenBudget, DailyBudgetUSD: set.LLM.DailyBudgetUSD.String(),
	}
	if err := llmledger.Check(tenant, set.LLM, spentTokens, llm.USD(spentCost)); err != nil {
		out.Budget.Exhausted, out.Budget.Reason = true, err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}
