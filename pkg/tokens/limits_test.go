package tokens_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
)

func TestDefaultLimits(t *testing.T) {
	t.Parallel()

	cfg := tokens.DefaultConfig()
	require.NoError(t, cfg.Validate())

	tests := []struct {
		name              string
		model             string
		window, maxOutput int64
		want              tokens.Limits
	}{
		{
			name: "200K window, 32000 max output", model: "claude-opus-4-1", maxOutput: 32_000,
			want: tokens.Limits{Window: 200_000, Reserve: 20_000, Effective: 180_000, AutoCompact: 167_000, Warning: 147_000, Error: 147_000, Blocking: 177_000},
		},
		{
			name: "opus 4.1 default max output is 32000", model: "claude-opus-4-1-20250805",
			want: tokens.Limits{Window: 200_000, Reserve: 20_000, Effective: 180_000, AutoCompact: 167_000, Warning: 147_000, Error: 147_000, Blocking: 177_000},
		},
		{
			name: "1M model", model: "claude-sonnet-4-5[1m]",
			want: tokens.Limits{Window: 1_000_000, Reserve: 20_000, Effective: 980_000, AutoCompact: 967_000, Warning: 947_000, Error: 947_000, Blocking: 977_000},
		},
		{
			name: "1M tag on an unknown model", model: "claude-future-9[1M]",
			want: tokens.Limits{Window: 1_000_000, Reserve: 20_000, Effective: 980_000, AutoCompact: 967_000, Warning: 947_000, Error: 947_000, Blocking: 977_000},
		},
		{
			name: "claude 3.5 reserves its 8192 max output", model: "claude-3-5-sonnet-20241022",
			want: tokens.Limits{Window: 200_000, Reserve: 8_192, Effective: 191_808, AutoCompact: 178_808, Warning: 158_808, Error: 158_808, Blocking: 188_808},
		},
		{
			name: "event max output below the cap", model: "claude-sonnet-4-5", maxOutput: 4_000,
			want: tokens.Limits{Window: 200_000, Reserve: 4_000, Effective: 196_000, AutoCompact: 183_000, Warning: 163_000, Error: 163_000, Blocking: 193_000},
		},
		{
			name: "event window wins over the table", model: "claude-sonnet-4-5[1m]", window: 100_000,
			want: tokens.Limits{Window: 100_000, Reserve: 20_000, Effective: 80_000, AutoCompact: 67_000, Warning: 47_000, Error: 47_000, Blocking: 77_000},
		},
		{
			name: "unknown model uses the default window", model: "llama-3-70b",
			want: tokens.Limits{Window: 200_000, Reserve: 20_000, Effective: 180_000, AutoCompact: 167_000, Warning: 147_000, Error: 147_000, Blocking: 177_000},
		},
		{
			name: "gpt-4o", model: "gpt-4o-2024-08-06",
			want: tokens.Limits{Window: 128_000, Reserve: 16_384, Effective: 111_616, AutoCompact: 98_616, Warning: 78_616, Error: 78_616, Blocking: 108_616},
		},
		{
			name: "gpt-4.1 with a provider prefix", model: "openai/gpt-4.1-mini",
			want: tokens.Limits{Window: 1_047_576, Reserve: 20_000, Effective: 1_027_576, AutoCompact: 1_014_576, Warning: 994_576, Error: 994_576, Blocking: 1_024_576},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, cfg.Limits(tt.model, tt.window, tt.maxOutput))
		})
	}
}

func TestAutoCompactPercentOnlyLowers(t *testing.T) {
	t.Parallel()

	cfg := tokens.DefaultConfig()
	cfg.AutoCompactPercent = 50
	l := cfg.Limits("claude-sonnet-4-5", 0, 0)
	require.Equal(t, int64(90_000), l.AutoCompact)
	require.Equal(t, int64(70_000), l.Warning)
	require.Equal(t, int64(177_000), l.Blocking, "blocking does not depend on the percentage")

	cfg.AutoCompactPercent = 99 // 178,200 would raise the threshold: ignored
	require.Equal(t, int64(167_000), cfg.Limits("claude-sonnet-4-5", 0, 0).AutoCompact)
}

func TestConfigEveryNumberConfigurable(t *testing.T) {
	t.Parallel()

	cfg := tokens.Config{DefaultWindow: 100_000, MaxReserve: 10_000, AutoCompactBuffer: 5_000, WarningBuffer: 30_000, ErrorBuffer: 10_000, BlockingBuffer: 1_000}
	require.NoError(t, cfg.Validate())
	l := cfg.Limits("some-model", 0, 0)
	require.Equal(t, tokens.Limits{Window: 100_000, Reserve: 10_000, Effective: 90_000, AutoCompact: 85_000, Warning: 55_000, Error: 75_000, Blocking: 89_000}, l)
	require.Equal(t, tokens.StateWarning, l.State(60_000))
	require.Equal(t, tokens.StateError, l.State(75_000))
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()

	require.Error(t, tokens.Config{}.Validate())
	bad := tokens.DefaultConfig()
	bad.WarningBuffer = -1
	bad.AutoCompactPercent = 120
	err := bad.Validate()
	require.ErrorContains(t, err, "warning_buffer")
	require.ErrorContains(t, err, "auto_compact_percent")
}

func TestState(t *testing.T) {
	t.Parallel()

	l := tokens.DefaultConfig().Limits("claude-opus-4-6", 0, 32_000)
	tests := []struct {
		count int64
		want  tokens.State
	}{
		{0, tokens.StateOK},
		{146_999, tokens.StateOK},
		{147_000, tokens.StateError}, // warning == error by default: error wins
		{166_999, tokens.StateError},
		{167_000, tokens.StateAutoCompact},
		{176_999, tokens.StateAutoCompact},
		{177_000, tokens.StateBlocking},
		{500_000, tokens.StateBlocking},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, l.State(tt.count), "count %d", tt.count)
		require.Equal(t, tt.count >= 167_000, l.AboveAutoCompact(tt.count), "count %d", tt.count)
	}

	ranks := []tokens.State{tokens.StateOK, tokens.StateWarning, tokens.StateError, tokens.StateAutoCompact, tokens.StateBlocking}
	for i, s := range ranks {
		require.Equal(t, i, s.Rank())
	}
	require.Equal(t, -1, tokens.State("bogus").Rank())
}

func TestPercentLeft(t *testing.T) {
	t.Parallel()

	l := tokens.DefaultConfig().Limits("claude-opus-4-6", 0, 0)
	require.InDelta(t, 100.0, l.PercentLeft(0), 1e-12, "a percentage, 0 to 100")
	require.InDelta(t, 50.0, l.PercentLeft(83_500), 1e-12)
	require.InDelta(t, 10.0, l.PercentLeft(150_300), 1e-12)
	require.Zero(t, l.PercentLeft(167_000))
	require.Zero(t, l.PercentLeft(300_000))
	require.Zero(t, tokens.Limits{}.PercentLeft(10))
}

func TestLookupModel(t *testing.T) {
	t.Parallel()

	tests := []struct {
		model     string
		family    string
		maxOutput int64
		known     bool
	}{
		{"claude-opus-4-20250514", "claude-opus-4", 32_000, true},
		{"claude-opus-4-1", "claude-opus-4-1", 32_000, true},
		{"claude-opus-4-5-20251101", "claude-opus-4-5", 64_000, true},
		{"claude-opus-4-6", "claude-opus-4-6", 64_000, true},
		{"claude-sonnet-4-20250514", "claude-sonnet-4", 64_000, true},
		{"claude-sonnet-4-5@20250929", "claude-sonnet-4-5", 64_000, true},
		{"us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5", 64_000, true},
		{"claude-3-5-haiku-latest", "claude-3-5", 8_192, true},
		{"CLAUDE-3-5-SONNET-20241022", "claude-3-5", 8_192, true},
		{"gpt-4o-mini", "gpt-4o", 16_384, true},
		{"gpt-4.10", "", 32_000, false},
		{"claude-opus-41", "", 32_000, false},
		{"", "", 32_000, false},
	}
	for _, tt := range tests {
		info, ok := tokens.LookupModel(tt.model)
		require.Equal(t, tt.known, ok, tt.model)
		require.Equal(t, tt.family, info.Family, tt.model)
		require.Equal(t, tt.maxOutput, info.MaxOutput, tt.model)
	}
}

// TestMaxWindowHoldsEveryModel: no window the model table knows is refused.
func TestMaxWindowHoldsEveryModel(t *testing.T) {
	t.Parallel()
	cfg := tokens.DefaultConfig()
	for _, m := range []string{"claude-sonnet-4-5", "claude-sonnet-4-5[1m]", "gpt-4.1", "gpt-4o", "unknown"} {
		info, _ := tokens.LookupModel(m)
		require.Nil(t, cfg.CheckWindow(m, info.Window, info.MaxOutput), m)
	}
	require.NotNil(t, cfg.CheckWindow("gpt-4o", tokens.MaxWindow+1, 0))
	require.Equal(t, "context_window", cfg.CheckWindow("gpt-4o", 1, 0).Field)
	require.Equal(t, "max_output_tokens", cfg.CheckWindow("gpt-4o", 0, -1).Field)
}
