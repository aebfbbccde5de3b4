package api

import "time"

// UsageRow is the model calls of one UTC day, task (the service that made
// them: compaction, notes, extraction, recall or dreaming; proxy for the
// agent's own rounds the proxy relayed), provider and model
// (TenantUsage.Rows); of one day (Days); of one task (Tasks); or of the
// whole span (Total), the keys it is not by left empty.
type UsageRow struct {
	Day      string `json:"day,omitempty"`
	Task     string `json:"task,omitempty"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	UsageAmounts
	// Proxy is the agent's proxied rounds among the row's calls, beside
	// what they would have cost straight; absent when it holds none.
	Proxy *ProxyUsage `json:"proxy,omitempty"`
}

// ProxyAmounts are the agent's proxied rounds priced: what they cost
// through Mnemos (Cost), what the same rounds would have cost sent
// straight (StraightCost, as docs/proxy-cost.md estimates it), and the
// difference (Savings, straight less through: negative when Mnemos cost
// more). Amounts are exact decimal strings of dollars and the same in
// nano-dollars.
type ProxyAmounts struct {
	Rounds              int64  `json:"rounds"`
	CostUSD             string `json:"cost_usd"`
	CostNanoUSD         int64  `json:"cost_nanousd"`
	StraightCostUSD     string `json:"straight_cost_usd"`
	StraightCostNanoUSD int64  `json:"straight_cost_nanousd"`
	SavingsUSD          string `json:"savings_usd"`
	SavingsNanoUSD      int64  `json:"savings_nanousd"`
}

// ProxyUsage is a usage row's proxied rounds, and its net savings: the
// straight cost less everything the row's calls cost, Mnemos's own among
// them (equal to Savings on a row of the proxy task alone).
type ProxyUsage struct {
	ProxyAmounts
	NetSavingsUSD     string `json:"net_savings_usd"`
	NetSavingsNanoUSD int64  `json:"net_savings_nanousd"`
}

// SessionUsage is the answer to GET /v1/sessions/{id}/usage: the
// session's proxied rounds priced, its threads' together (the conversations
// the proxy follows under its id: its main agent, subagents, branches),
// and each thread's. Mnemos's own calls for the session are not in it:
// the ledger keeps those by tenant and day (GET /v1/usage).
type SessionUsage struct {
	SessionID string `json:"session_id"`
	ProxyAmounts
	// LastRoundAt is when its last round was priced; absent when none was.
	LastRoundAt *time.Time    `json:"last_round_at,omitempty"`
	Threads     []ThreadUsage `json:"threads"`
}

// ThreadUsage is one thread's proxied rounds priced.
type ThreadUsage struct {
	Thread string `json:"thread"`
	ProxyAmounts
	LastRoundAt *time.Time `json:"last_round_at,omitempty"`
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

// UsageBudget is today's spending against the tenant's daily budgets (0
// and "0": none), and when one is spent (Exhausted), which and by how
// much: model calls are refused until the next UTC day.
type UsageBudget struct {
	Day              string `json:"day"`
	Tokens           int64  `json:"tokens"`
	CostUSD          string `json:"cost_usd"`
	DailyTokenBudget int64  `json:"daily_token_budget"`
	DailyBudgetUSD   string `json:"daily_budget_usd"`
	Exhausted        bool   `json:"exhausted"`
	Reason           string `json:"reason,omitempty"`
}

// TenantUsage is the answer to GET /v1/usage: the tenant's model usage
// from From to To (UTC days, YYYY-MM-DD).
type TenantUsage struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Rows are by day, task, provider and model; Days by day, Tasks by
	// task, over the whole span.
	Rows   []UsageRow  `json:"rows"`
	Days   []UsageRow  `json:"days"`
	Tasks  []UsageRow  `json:"tasks"`
	Total  UsageRow    `json:"total"`
	Budget UsageBudget `json:"budget"`
}
