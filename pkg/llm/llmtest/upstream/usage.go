package upstream

// Usage is an answer's usage as the Messages API reports it. The input of
// a call is split in three: read from the prompt cache, written to it, and
// neither.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

// Prices of input relative to plain input tokens, as the API bills them
// for a cache entry of five minutes.
const (
	PriceCacheRead  = 0.1
	PriceCacheWrite = 1.25
	PriceInput      = 1.0
)

// Add is the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
	}
}

// AllInput is every input token, however billed.
func (u Usage) AllInput() int64 {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// ReadShare is the share of the input read from the cache (0 without
// input).
func (u Usage) ReadShare() float64 {
	if u.AllInput() == 0 {
		return 0
	}
	return float64(u.CacheReadInputTokens) / float64(u.AllInput())
}

// PricedInput is the input's price in plain input tokens: cache reads at
// PriceCacheRead, cache writes at PriceCacheWrite, the rest at PriceInput.
func (u Usage) PricedInput() float64 {
	return PriceCacheRead*float64(u.CacheReadInputTokens) +
		PriceCacheWrite*float64(u.CacheCreationInputTokens) +
		PriceInput*float64(u.InputTokens)
}

func (u Usage) wire(output int64) map[string]any {
	return map[string]any{
		"input_tokens":                u.InputTokens,
		"cache_creation_input_tokens": u.CacheCreationInputTokens,
		"cache_read_input_tokens":     u.CacheReadInputTokens,
		"output_tokens":               output,
		"service_tier":                "standard",
	}
}
