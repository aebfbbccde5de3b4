package llm_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
)

func TestPriceCostsEveryKindOfToken(t *testing.T) {
	t.Parallel()
	sonnet, ok := llm.DefaultPrices().Lookup("claude-sonnet-4-5")
	require.True(t, ok)
	for _, c := range []struct {
		usage llm.Usage
		want  string
	}{
		{llm.Usage{InputTokens: 1_000_000}, "3"},
		{llm.Usage{OutputTokens: 1_000_000}, "15"},
		{llm.Usage{CacheWriteTokens: 1_000_000}, "3.75"},
		{llm.Usage{CacheReadTokens: 1_000_000}, "0.3"},
		{llm.Usage{CacheReadTokens: 1}, "0.0000003"},
		{llm.Usage{InputTokens: 1234, OutputTokens: 567, CacheWriteTokens: 89, CacheReadTokens: 10_000}, "0.01554075"},
		{llm.Usage{}, "0"},
	} {
		require.Equal(t, c.want, sonnet.Cost(c.usage).String(), "%+v", c.usage)
	}
}

func TestPricesLookupFindsTheFamily(t *testing.T) {
	t.Parallel()
	ps := llm.DefaultPrices()
	for model, want := range map[string]string{
		"claude-sonnet-4-5":                          "3",
		"claude-sonnet-4-5-20250929":                 "3",
		"Claude-Sonnet-4-5[1m]":                      "3",
		"us.anthropic.claude-opus-4-5-20251101-v1:0": "5",
		"claude-haiku-4-5@20251001":                  "1",
		"claude-opus-4-1-20250805":                   "15",
		"openai/gpt-4o-mini":                         "0.15",
		"gpt-4o-2024-08-06":                          "2.5",
		"gpt-4.1-nano":                               "0.1",
		"claude-sonnet-5-5":                          "2",
		"gpt-5.4-mini-2026-03-17":                    "0.75",
		"gpt-5-codex":                                "1.25",
		"gpt-5-mini-2025-08-07":                      "0.25",
		"o4-mini":                                    "1.1",
	} {
		p, ok := ps.Lookup(model)
		require.True(t, ok, model)
		require.Equal(t, want, p.Input.String(), model)
	}
	for _, model := range []string{"claude-sonnet-4-6", "claude-opus-4-6", "llama3.1:70b", "", "gpt-5.3-codex"} {
		_, ok := ps.Lookup(model)
		require.False(t, ok, "%q has no price: a later version is not an earlier one's", model)
	}
	own := ps.With(llm.Prices{"llama3.1:70b": {Input: llm.PerMillion(100)}})
	p, ok := own.Lookup("llama3.1:70b")
	require.True(t, ok)
	require.Equal(t, "0.1", p.Input.String())
	_, ok = ps.Lookup("llama3.1:70b")
	require.False(t, ok, "With leaves the table it was called on alone")
}

func TestPriceJSONIsExactAndComplete(t *testing.T) {
	t.Parallel()
	var p llm.Price
	require.NoError(t, json.Unmarshal([]byte(`{"input": 3, "output": "15", "cache_write": 3.75, "cache_read": 0.30}`), &p))
	require.Equal(t, llm.Price{Input: 3_000, Output: 15_000, CacheWrite: 3_750, CacheRead: 300}, p)
	out, err := json.Marshal(p)
	require.NoError(t, err)
	require.JSONEq(t, `{"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}`, string(out))

	for doc, want := range map[string]string{
		`{"input": 3, "output": 15, "cache_write": 3.75}`:                                "names no cache_read",
		`{"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3, "batch": 1}`: "unknown field",
		`{"input": -3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}`:            "negative",
		`{"input": 0.0001, "output": 15, "cache_write": 3.75, "cache_read": 0.3}`:        "more than 3 decimals",
		`{"input": 1e3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}`:           "exponent",
		`{"input": "three", "output": 15, "cache_write": 3.75, "cache_read": 0.3}`:       "not a decimal",
	} {
		require.ErrorContains(t, json.Unmarshal([]byte(doc), &p), want, doc)
	}

	for text, want := range map[string]llm.USD{"2.5": 2_500_000_000, "0.000000001": 1, "10": 10 * llm.Dollar, `"0.25"`: 250_000_000} {
		u, err := llm.ParseUSD(text)
		require.NoError(t, err, text)
		require.Equal(t, want, u, text)
	}
	_, err = llm.ParseUSD("0.0000000001")
	require.ErrorContains(t, err, "more than 9 decimals")
	require.Equal(t, "2.5", llm.USD(2_500_000_000).String())
}

// pricer prices every call at one price.
type pricer struct{ p llm.Price }

func (p pricer) Cost(_ context.Context, c llm.Call) (llm.USD, error) { return p.p.Cost(c.Usage), nil }

func TestGuardPricesRecordsAndCountsTheCost(t *testing.T) {
	t.Parallel()
	reader := telemetrytest.New(t)
	ledger := llm.NewMemoryLedger(0)
	u := llm.Usage{InputTokens: 1000, OutputTokens: 100, CacheWriteTokens: 10, CacheReadTokens: 5000}
	g := llm.Guard(&fake{results: []result{ok("done", u)}}, llm.GuardOptions{
		Recorder: ledger, Meter: reader.Meter(), Pricer: pricer{llm.Price{Input: 3_000, Output: 15_000, CacheWrite: 3_750, CacheRead: 300}},
	})
	_, err := g.Complete(context.Background(), req())
	require.NoError(t, err)
	want := llm.USD(1000*3_000 + 100*15_000 + 10*3_750 + 5000*300)
	require.Equal(t, want, ledger.Calls()[0].Cost)
	require.Equal(t, int64(want), reader.Sum("mnemos.llm.cost", "task", "notes"))
}
