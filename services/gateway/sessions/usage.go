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

// usageRow is a usage row of u under its keys, with its proxied rounds
// when it holds some. proxy is the proxied rounds' part of u.
func usageRow(keys api.UsageRow, u, proxy store.LLMUsage) api.UsageRow {
	keys.UsageAmounts = amounts(u)
	if proxy.Calls > 0 {
		net := proxy.StraightNanoUSD - u.CostNanoUSD
		keys.Proxy = &api.ProxyUsage{
			ProxyAmounts:  proxyAmounts(proxy.Calls, proxy.CostNanoUSD, proxy.StraightNanoUSD),
			NetSavingsUSD: llm.USD(net).String(), NetSavingsNanoUSD: net,
		}
	}
	return keys
}

// proxyAmounts are rounds costing cost through Mnemos and straight
// straight, in nano-dollars, as the API answers them.
func proxyAmounts(rounds, cost, straight int64) api.ProxyAmounts {
	return api.ProxyAmounts{
		Rounds: rounds, CostUSD: llm.USD(cost).String(), CostNanoUSD: cost,
		StraightCostUSD: llm.USD(straight).String(), StraightCostNanoUSD: straight,
		SavingsUSD: llm.USD(straight - cost).String(), SavingsNanoUSD: straight - cost,
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
	// Each sum is kept twice: of every call, and of the proxied rounds.
	var total, totalProxy store.LLMUsage
	byDay, byTask := map[string]*[2]store.LLMUsage{}, map[string]*[2]store.LLMUsage{}
	var dayOrder, taskOrder []string
	sum := func(into map[string]*[2]store.LLMUsage, order *[]string, key string, u, proxy store.LLMUsage) {
		if into[key] == nil {
			into[key] = &[2]store.LLMUsage{}
			*order = append(*order, key)
		}
		into[key][0], into[key][1] = into[key][0].Add(u), into[key][1].Add(proxy)
	}
	for _, u := range rows {
		var proxy store.LLMUsage
		if u.Task == store.TaskProxy {
			proxy = u
		}
		d := u.Day.Format(dayLayout)
		out.Rows = append(out.Rows, usageRow(api.UsageRow{Day: d, Task: u.Task, Provider: u.Provider, Model: u.Model}, u, proxy))
		sum(byDay, &dayOrder, d, u, proxy)
		sum(byTask, &taskOrder, u.Task, u, proxy)
		total, totalProxy = total.Add(u), totalProxy.Add(proxy)
	}
	for _, d := range dayOrder {
		out.Days = append(out.Days, usageRow(api.UsageRow{Day: d}, byDay[d][0], byDay[d][1]))
	}
	slices.Sort(taskOrder)
	for _, t := range taskOrder {
		out.Tasks = append(out.Tasks, usageRow(api.UsageRow{Task: t}, byTask[t][0], byTask[t][1]))
	}
	out.Total = usageRow(api.UsageRow{}, total, totalProxy)
	out.Budget = api.UsageBudget{
		Day: today.Format(dayLayout), Tokens: spentTokens, CostUSD: llm.USD(spentCost).String(),
		DailyTokenBudget: set.LLM.DailyTokenBudget, DailyBudgetUSD: set.LLM.DailyBudgetUSD.String(),
	}
	if err := llmledger.Check(tenant, set.LLM, spentTokens, llm.USD(spentCost)); err != nil {
		out.Budget.Exhausted, out.Budget.Reason = true, err.Error()
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// getSessionUsage answers what a session's proxied rounds cost through
// Mnemos and straight: over the session and the threads the proxy keeps
// under its id, and by thread, the session's own first.
func (h *Handler) getSessionUsage(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	ctx := r.Context()
	var costs []store.ProxyCost
	err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		threads, err := tx.SessionThreadIDs(ctx, id)
		if err != nil {
			return err
		}
		costs, err = tx.ProxyCosts(ctx, append([]string{id}, threads...))
		return err
	})
	if err != nil {
		h.Internal(w, "reading the session's usage", err)
		return
	}
	if len(costs) == 0 {
		httpapi.Fail(w, http.StatusNotFound, "not_found", "no session "+id)
		return
	}
	// The session's own row first, then its threads by id.
	slices.SortStableFunc(costs, func(a, b store.ProxyCost) int {
		return cmpBool(a.SessionID != id, b.SessionID != id)
	})
	out := api.SessionUsage{SessionID: id, Threads: make([]api.ThreadUsage, 0, len(costs))}
	var rounds, cost, straight int64
	for _, c := range costs {
		t := api.ThreadUsage{Thread: c.SessionID, ProxyAmounts: proxyAmounts(c.Rounds, c.CostNanoUSD, c.StraightNanoUSD)}
		if !c.LastAt.IsZero() {
			at := c.LastAt.UTC()
			t.LastRoundAt = &at
			if out.LastRoundAt == nil || at.After(*out.LastRoundAt) {
				out.LastRoundAt = &at
			}
		}
		out.Threads = append(out.Threads, t)
		rounds, cost, straight = rounds+c.Rounds, cost+c.CostNanoUSD, straight+c.StraightNanoUSD
	}
	out.ProxyAmounts = proxyAmounts(rounds, cost, straight)
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
