package tokens_test

import (
	"encoding/base64"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func TestTextKind(t *testing.T) {
	t.Parallel()

	prose := strings.Repeat("The session keeps its notes and reads them back when it compacts. ", 8)
	code := strings.Repeat("func (t *Tally) Add(n int64) { t.Pending += n; if n > 0 { log(\"x\", 1) } }\n", 8)
	logs := strings.Repeat("2026-11-25T10:39:21Z INFO [worker-3] job=42 status=ok took=13ms\n", 8)
	raw := make([]byte, 600)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	b64 := base64.StdEncoding.EncodeToString(raw)
	tests := []struct{ name, text, want string }{
		{"prose", prose, tokens.KindProse},
		{"code", code, tokens.KindCode},
		{"log output", logs, tokens.KindCode},
		{"base64", b64, tokens.KindBase64},
		{"one letter repeated is not base64", strings.Repeat("x", 1000), tokens.KindProse},
		{"short text is prose", code[:100], tokens.KindProse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tokens.TextKind(tt.text))
		})
	}
	// The rate of each kind: prose 4, code 3, base64 1.5 bytes per token.
	for _, c := range []struct {
		text string
		per  float64
	}{{prose, 4}, {code, 3}, {b64, 1.5}} {
		got := tokens.EstimateBlock(turn.Block{Type: turn.BlockText, Text: c.text})
		require.InDelta(t, float64(len(c.text))/c.per, float64(got), 1)
	}
}

func TestTallyCalibrates(t *testing.T) {
	t.Parallel()

	var tally tokens.Tally
	tally.Add(1_000)
	tally.SetResponse(turn.Usage{InputTokens: 1_000}, nil)
	require.Zero(t, tally.Factor, "no baseline or prefix to measure growth from")

	// Real growth 1.3 times the estimate: the first ratio is the factor.
	tally.Add(2_000)
	tally.SetResponse(turn.Usage{InputTokens: 1_000 + 2_600, OutputTokens: 10}, nil)
	require.InDelta(t, 1.3, tally.Factor, 1e-9)
	tally.Add(1_000)
	require.Equal(t, int64(3_610+1_300), tally.Count())

	// A later ratio moves it by pending/(pending+2000): a third for 1,000;
	// one past the bound counts as the bound.
	tally.SetResponse(turn.Usage{InputTokens: 3_610 + 1_100}, nil)
	f := 1.3 + (1.1-1.3)/3
	require.InDelta(t, f, tally.Factor, 1e-9)
	tally.Add(1_000)
	tally.SetResponse(turn.Usage{InputTokens: 4_710 + 10_000}, nil)
	f += (tokens.MaxFactor - f) / 3
	require.InDelta(t, f, tally.Factor, 1e-9)
	// A large growth moves it nearly all the way.
	tally.Add(98_000)
	tally.SetResponse(turn.Usage{InputTokens: 14_710 + 98_000}, nil)
	f += (1 - f) * 98_000 / 100_000
	require.InDelta(t, f, tally.Factor, 1e-9)

	// Too little pending says nothing.
	before := tally.Factor
	tally.Add(tokens.CalibrateMin - 1)
	tally.SetResponse(turn.Usage{InputTokens: 112_710 + 5_000}, nil)
	require.Equal(t, before, tally.Factor)

	// A compaction keeps the factor and the prefix.
	tally.Prefix = 900
	tally.Reset()
	require.Equal(t, tokens.Tally{Factor: before, Prefix: 900}, tally)
}

func TestTallyPrefix(t *testing.T) {
	t.Parallel()

	tally := tokens.Tally{Prefix: 19_000}
	tally.Add(3_000)
	require.Equal(t, int64(22_000), tally.Count(), "prefix plus the estimate, not times 4/3")
	tally.SetResponse(turn.Usage{CacheCreationInputTokens: 22_300, OutputTokens: 50}, nil)
	require.InDelta(t, 3_300.0/3_000, tally.Factor, 1e-9, "the first response calibrates against the prefix")
	tally.Add(100)
	require.Equal(t, int64(22_350+110), tally.Count(), "after usage the prefix is inside the baseline")
}

// TestTallyCalibratesByKind: prose and dense content (code, tool output,
// JSON) learn their own factors; a growth of one kind moves its factor
// alone, and a kind not learnt yet borrows the other's.
func TestTallyCalibratesByKind(t *testing.T) {
	t.Parallel()

	prose := turn.Message{Role: "user", Content: turn.Content{{Type: turn.BlockText,
		Text: strings.Repeat("The session keeps its notes and reads them back when it compacts. ", 30)}}}
	code := turn.Message{Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: "t", Content: &turn.Content{{Type: turn.BlockText,
		Text: strings.Repeat("2026-11-25T10:39:21Z INFO [worker-3] job=42 status=ok took=13ms\n", 200)}}}}}
	pTotal, pDense := tokens.EstimateSplit(prose.Content)
	cTotal, cDense := tokens.EstimateSplit(code.Content)
	require.Zero(t, pDense)
	require.Equal(t, tokens.EstimateContent(prose.Content), pTotal)
	require.Equal(t, cTotal, cDense)
	require.Equal(t, tokens.EstimateContent(code.Content), cTotal)

	tally := tokens.Tally{HasUsage: true, Baseline: 10_000}
	tally.AddMessage(prose)
	tally.SetResponse(turn.Usage{InputTokens: 10_000 + pTotal*11/10}, nil)
	fp := float64(pTotal*11/10) / float64(pTotal)
	require.InDelta(t, fp, tally.Factor, 1e-9)
	require.Zero(t, tally.DenseFactor)

	// The dense part borrows the prose factor until it is learnt.
	base := tally.Baseline
	tally.AddMessage(code)
	require.Equal(t, base+int64(math.Ceil(float64(cTotal)*fp-1e-9)), tally.Count())
	tally.SetResponse(turn.Usage{InputTokens: base + cTotal*3/4}, nil)
	require.InDelta(t, float64(cTotal*3/4)/float64(cTotal), tally.DenseFactor, 1e-9, "not learnt: takes its target")
	require.InDelta(t, fp, tally.Factor, 1e-9, "a dense growth leaves prose alone")
}

func TestEstimatePrefix(t *testing.T) {
	t.Parallel()

	text := strings.Repeat("Read files before editing them. ", 40)
	asString, ok, err := tokens.EstimatePrefix(turn.RequestPrefix{System: []byte(`"` + text + `"`)})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, tokens.EstimateBlock(turn.Block{Type: turn.BlockText, Text: text}), asString)
	asBlocks, _, err := tokens.EstimatePrefix(turn.RequestPrefix{System: []byte(`[{"type":"text","text":"` + text + `"}]`)})
	require.NoError(t, err)
	require.Equal(t, asString, asBlocks)

	n, ok, err := tokens.EstimatePrefix(turn.RequestPrefix{Tokens: 12_345, Bytes: 4, Hash: "h"})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(12_345), n, "the client's count wins")
	n, _, err = tokens.EstimatePrefix(turn.RequestPrefix{Bytes: 4_001})
	require.NoError(t, err)
	require.Equal(t, int64((4_001+3)/4), n)
	_, ok, err = tokens.EstimatePrefix(turn.RequestPrefix{Hash: "h"})
	require.NoError(t, err)
	require.False(t, ok, "a hash alone is resolved by the caller")

	for name, bad := range map[string]turn.RequestPrefix{
		"image block":     {System: []byte(`[{"type":"image"}]`)},
		"system object":   {System: []byte(`{"text":"x"}`)},
		"tools object":    {Tools: []byte(`{"name":"Read"}`)},
		"tool not object": {Tools: []byte(`["Read"]`)},
		"negative tokens": {Tokens: -1},
	} {
		_, _, err := tokens.EstimatePrefix(bad)
		require.Error(t, err, name)
	}
}
