package sessions

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
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

// amounts are usage u's calls, tokens and cost as the API answers them.
func amounts(u store.LLMUsage) api.UsageAmounts {
	return api.UsageAmounts{
		Calls: u.Calls, FailedCalls: u.FailedCalls, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens, Tokens: u.Tokens(),
		CostUSD: llm.USD(u.CostNanoUSD).String(), CostNanoUSD: u.CostNanoUSD,
	}
}

// getUsage answers the tenant's model usage and its cost over a span of
// UTC days (from, to: YYYY-MM-DD; the last 30 days by default), by day,
// task, provider and model, with sums by day and by task, and today's
// spending against the daily budgets.
func (h *Handler) getUsage(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	today := h.now().UTC().Truncate(24 * time.Hour)
	q := r.URL.Query()
	day := func(name string, def time.Time) (time.Time, bool) {
		v := q.Get(name)
		if v == "" {
			return def, true
		}
		d, err := time.Parse(dayLayout, v)
		if err != nil {
			h.RefuseRequest(w, r, http.StatusBadRequest, "bad_day", fmt.Sprintf("%s %s: want a UTC day as YYYY-MM-DD", name, httpapi.Describe(v)))
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
		h.RefuseRequest(w, r, http.StatusBadRequest, "bad_day",
			fmt.Sprintf("from %s to %s: want from on or before to, at most %d days apart", from.Format(dayLayout), to.Format(dayLayout), usageMaxDays))
		return
	}
	set, err := h.settings.For(ctx, tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	rows, err := h.store.LLMUsageBetween(ctx, tenant, from, to)
	if err != nil {
		h.Internal(w, "reading usage", err)
		return
	}
	spentTokens, spentCost, err := h.store.LLMSpentOnDay(ctx, tenant, today)
	if err != nil {
		h.Internal(w, "reading usage", err)
		return
	}

	out := api.TenantUsage{From: from.Format(dayLayout), To: to.Format(dayLayout), Rows: []api.UsageRow{}, Days: []api.UsageRow{}, Tasks: []api.UsageRow{}}
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
		out.Rows = append(out.Rows, api.UsageRow{Day: d, Task: u.Task, Provider: u.Provider, Model: u.Model, UsageAmounts: amounts(u)})
		sum(byDay, &dayOrder, d, u)
		sum(byTask, &taskOrder, u.Task, u)
		total = total.Add(u)
	}
	for _, d := range dayOrder {
		out.Days = append(out.Days, api.UsageRow{Day: d, UsageAmounts: amounts(*byDay[d])})
	}
	slices.Sort(taskOrder)
	for _, t := range taskOrder {
		out.Tasks = append(out.Tasks, api.UsageRow{Task: t, UsageAmounts: amounts(*byTask[t])})
	}
	out.Total = api.UsageRow{UsageAmounts: amounts(total)}
	out.Budget = api.UsageBudget{
		Day: today.Format(dayLayout), Tokens: spentTokens, CostUSD: llm.USD(spentCost).String(),
		DailyTokenBudget: set.LLM.DailyTokenBudget, DailyBudgetUSD: set.LLM.DailyBudgetUSD.String(),
	}
	if err := llmledger.Check(tenant, set.LLM, spentTokens, llm.USD(spentCost)); err != nil {
		out.Budget.Exhausted, out.Budget.Reason = true, err.Error()
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}
