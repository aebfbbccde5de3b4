package upstream

import "github.com/mnemos-ai/mnemos/pkg/turn"

// Usage is an answer's usage as the Messages API reports it: the input of a
// call split in three (read from the prompt cache, written to it, neither)
// and the output.
type Usage = turn.Usage

// Prices of input relative to plain input tokens, as the API bills them
// for a cache entry of five minutes.
const (
	PriceCacheRead  = 0.1
	PriceCacheWrite = 1.25
	PriceInput      = 1.0
)

// Sum is the sum of the calls' usage.
func Sum(calls []Call) Usage {
	var s Usage
	for _, c := range calls {
		s.InputTokens += c.Usage.InputTokens
		s.CacheCreationInputTokens += c.Usage.CacheCreationInputTokens
		s.CacheReadInputTokens += c.Usage.CacheReadInputTokens
		s.OutputTokens += c.Usage.OutputTokens
	}
	return s
}

// ReadShare is the share of u's input read from the cache (0 without
// input).
func ReadShare(u Usage) float64 {
	if u.InputSide() == 0 {
		return 0
	}
	return float64(u.CacheReadInputTokens) / float64(u.InputSide())
}

// PricedInput is u's input priced in plain input tokens: cache reads at
// PriceCacheRead, cache writes at PriceCacheWrite, the rest at PriceInput.
func PricedInput(u Usage) float64 {
	return PriceCacheRead*float64(u.CacheReadInputTokens) +
		PriceCacheWrite*float64(u.CacheCreationInputTokens) +
		PriceInput*float64(u.InputTokens)
}

// wire is u as the API sends it, with output tokens out.
func wire(u Usage, output int64) map[string]any {
	return map[string]any{
		"input_tokens":                u.InputTokens,
		"cache_creation_input_tokens": u.CacheCreationInputTokens,
		"cache_read_input_tokens":     u.CacheReadInputTokens,
		"output_tokens":               output,
		"service_tier":                "standard",
	}
}
