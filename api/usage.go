package api

// UsageRow is the model calls of one UTC day, task (the service that made
// them: compaction, notes, extraction, recall or dreaming), provider and
// model (TenantUsage.Rows); of one day (Days); of one task (Tasks); or of
// the whole span (Total), the keys it is not by left empty.
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
