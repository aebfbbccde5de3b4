package tokens_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func TestResponseOutput(t *testing.T) {
	t.Parallel()

	bigToolUse := turn.Content{{Type: turn.BlockToolUse, ID: "t", Name: "Write",
		Input: json.RawMessage(`{"content":"` + strings.Repeat("x", 3988) + `"}`)}} // 4,002 bytes of JSON
	estimate := tokens.EstimateContent(bigToolUse)
	require.Equal(t, int64(2003), estimate) // (5 quarters for the name + 8,004 of input) / 4, rounded up

	tests := []struct {
		name   string
		output int64
		want   int64
	}{
		{"stale stream-start output is replaced", 1, estimate},
		{"output equal to the estimate", estimate, estimate},
		{"real output above the estimate is kept", 5_000, 5_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tokens.ResponseOutput(turn.Usage{OutputTokens: tt.output}, bigToolUse))
		})
	}
}

func TestTally(t *testing.T) {
	t.Parallel()

	response := turn.Content{{Type: turn.BlockText, Text: strings.Repeat("r", 400)}} // 100 tokens
	usage := turn.Usage{InputTokens: 3, CacheCreationInputTokens: 13_835, CacheReadInputTokens: 11_515, OutputTokens: 13}

	type step struct {
		add      int64       // Add(add) when set
		response *turn.Usage // SetResponse(*response, content) when set
		reset    bool
		want     tokens.Tally
		count    int64
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"empty", []step{{want: tokens.Tally{}, count: 0}}},
		{"no usage yet: estimate times 4/3, rounded up", []step{
			{add: 10, want: tokens.Tally{Pending: 10}, count: 14},
			{add: 5, want: tokens.Tally{Pending: 15}, count: 20},
		}},
		{"response sets the baseline, later messages add their estimate", []step{
			{add: 7, want: tokens.Tally{Pending: 7}, count: 10},
			{response: &usage, want: tokens.Tally{Baseline: 25_353 + 100, HasUsage: true}, count: 25_453},
			{add: 50, want: tokens.Tally{Baseline: 25_453, HasUsage: true, Pending: 50}, count: 25_503},
		}},
		{"real output above the estimate counts as recorded", []step{
			{response: &turn.Usage{InputTokens: 1000, OutputTokens: 500}, want: tokens.Tally{Baseline: 1500, HasUsage: true}, count: 1500},
		}},
		{"reset at a compaction boundary", []step{
			{response: &usage, want: tokens.Tally{Baseline: 25_453, HasUsage: true}, count: 25_453},
			{add: 9, want: tokens.Tally{Baseline: 25_453, HasUsage: true, Pending: 9}, count: 25_462},
			{reset: true, want: tokens.Tally{}, count: 0},
			{add: 3_000, want: tokens.Tally{Pending: 3_000}, count: 4_000},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var tally tokens.Tally
			for i, s := range tt.steps {
				switch {
				case s.reset:
					tally.Reset()
				case s.response != nil:
					tally.SetResponse(*s.response, response)
				case s.add != 0:
					tally.Add(s.add)
				}
				require.Equal(t, s.want, tally, "step %d", i)
				require.Equal(t, s.count, tally.Count(), "step %d", i)
			}
		})
	}
}

func TestTallyJSON(t *testing.T) {
	t.Parallel()

	in := tokens.Tally{Baseline: 10, HasUsage: true, Pending: 2}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	require.JSONEq(t, `{"baseline":10,"has_usage":true,"pending":2}`, string(data))
	var out tokens.Tally
	require.NoError(t, json.Unmarshal(data, &out))
	require.Equal(t, in, out)
}
