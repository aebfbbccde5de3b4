package tokens_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
)

// TestOpenAIWindows: every OpenAI model the table names gets its family's
// window, max output and encoding, whatever suffix or provider prefix its
// id carries; the longest family wins.
func TestOpenAIWindows(t *testing.T) {
	t.Parallel()

	tests := []struct {
		model     string
		family    string
		window    int64
		maxOutput int64
	}{
		{"gpt-5", "gpt-5", 272_000, 128_000},
		{"gpt-5-2025-08-07", "gpt-5", 272_000, 128_000},
		{"gpt-5-mini", "gpt-5", 272_000, 128_000},
		{"gpt-5-nano-2025-08-07", "gpt-5", 272_000, 128_000},
		{"gpt-5-codex", "gpt-5", 272_000, 128_000},
		{"gpt-5-chat-latest", "gpt-5-chat", 128_000, 16_384},
		{"gpt-5.1", "gpt-5.1", 272_000, 128_000},
		{"gpt-5.1-codex-max", "gpt-5.1", 272_000, 128_000},
		{"gpt-5.1-chat-latest", "gpt-5.1-chat", 128_000, 16_384},
		{"gpt-5.2", "gpt-5.2", 272_000, 128_000},
		{"gpt-5.2-chat-latest", "gpt-5.2-chat", 128_000, 16_384},
		{"gpt-5.3-codex", "gpt-5.3", 272_000, 128_000},
		{"gpt-5.4", "gpt-5.4", 922_000, 128_000},
		{"gpt-5.4-pro-2026-03-05", "gpt-5.4", 922_000, 128_000},
		{"gpt-5.4-mini", "gpt-5.4-mini", 272_000, 128_000},
		{"gpt-5.4-nano", "gpt-5.4-nano", 272_000, 128_000},
		{"gpt-5.5", "gpt-5.5", 922_000, 128_000},
		{"openai/gpt-5.5-pro", "gpt-5.5", 922_000, 128_000},
		{"gpt-5.6", "gpt-5.6", 922_000, 128_000},
		{"gpt-5.6-sol", "gpt-5.6", 922_000, 128_000},
		{"gpt-5.6-terra", "gpt-5.6", 922_000, 128_000},
		{"gpt-5.6-luna", "gpt-5.6", 922_000, 128_000},
		{"gpt-4.1", "gpt-4.1", 1_047_576, 32_768},
		{"gpt-4.1-mini-2025-04-14", "gpt-4.1", 1_047_576, 32_768},
		{"openai/gpt-4.1-nano", "gpt-4.1", 1_047_576, 32_768},
		{"gpt-4o", "gpt-4o", 128_000, 16_384},
		{"gpt-4o-mini", "gpt-4o", 128_000, 16_384},
		{"chatgpt-4o-latest", "gpt-4o", 128_000, 16_384},
		{"o3", "o3", 200_000, 100_000},
		{"o3-2025-04-16", "o3", 200_000, 100_000},
		{"o3-mini", "o3", 200_000, 100_000},
		{"o3-pro", "o3", 200_000, 100_000},
		{"o4-mini", "o4-mini", 200_000, 100_000},
		{"O4-MINI-2025-04-16", "o4-mini", 200_000, 100_000},
		{"o1", "o1", 200_000, 100_000},
		{"o1-mini", "o1-mini", 128_000, 65_536},
		{"codex-mini-latest", "codex-mini", 200_000, 100_000},
	}
	for _, tt := range tests {
		info, ok := tokens.LookupModel(tt.model)
		require.True(t, ok, tt.model)
		require.Equal(t, tokens.ModelInfo{Family: tt.family, Window: tt.window, MaxOutput: tt.maxOutput, Encoding: tokens.EncodingO200k}, info, tt.model)
		require.Equal(t, "o200k_base", tokens.CounterFor(tt.model).Name(), tt.model)
		// Every window leaves room for the default thresholds.
		require.Nil(t, tokens.DefaultConfig().CheckWindow(tt.model, 0, 0), tt.model)
	}
	for _, unknown := range []string{"gpt-5x", "gpt-5.7", "gpt-4", "gpt-3.5-turbo", "o2", "o30", "o4", "text-davinci-003"} {
		_, ok := tokens.LookupModel(unknown)
		require.False(t, ok, unknown)
		require.Equal(t, "estimate", tokens.CounterFor(unknown).Name(), unknown)
	}
	for _, claude := range []string{"claude-sonnet-4-5", "claude-opus-4-6[1m]", "us.anthropic.claude-haiku-4-5-20251001-v1:0"} {
		require.Equal(t, "estimate", tokens.CounterFor(claude).Name(), "Claude models keep the estimate: %s", claude)
	}

	// The thresholds of gpt-5: 272,000 − min(128,000, 20,000) = 252,000
	// effective; auto-compact 13,000 below it.
	l := tokens.DefaultConfig().Limits("gpt-5-codex", 0, 0)
	require.Equal(t, tokens.Limits{Window: 272_000, Reserve: 20_000, Effective: 252_000, AutoCompact: 239_000,
		Warning: 219_000, Error: 219_000, Blocking: 249_000}, l)
}

// TestModelOverride: a tenant's tokens.models replaces the table's window
// and max output for a family and the models under it, the longest family
// winning; an event's context_window still wins over both.
func TestModelOverride(t *testing.T) {
	t.Parallel()

	cfg := tokens.DefaultConfig()
	require.NoError(t, json.Unmarshal([]byte(`{"models": {
		"gpt-5": {"window": 400000},
		"gpt-5-mini": {"max_output": 8000},
		"claude-sonnet-4-5": {"window": 150000},
		"llama-3.3-70b": {"window": 131072, "max_output": 4096}
	}}`), &cfg))
	require.NoError(t, cfg.Validate())

	info, ok := cfg.Model("gpt-5-codex")
	require.True(t, ok)
	require.Equal(t, tokens.ModelInfo{Family: "gpt-5", Window: 400_000, MaxOutput: 128_000, Encoding: tokens.EncodingO200k}, info)
	info, _ = cfg.Model("gpt-5-mini-2025-08-07")
	require.Equal(t, int64(272_000), info.Window, "gpt-5-mini names no window: the table's")
	require.Equal(t, int64(8_000), info.MaxOutput)
	require.Equal(t, int64(400_000), cfg.Limits("gpt-5", 0, 0).Window)
	require.Equal(t, int64(150_000), cfg.Limits("claude-sonnet-4-5-20250929", 0, 0).Window, "Claude models are overridden the same way")
	require.Equal(t, tokens.OneMillionWindow, cfg.Limits("claude-sonnet-4-5[1m]", 0, 0).Window, "the [1m] tag still sets the window")
	require.Equal(t, int64(300_000), cfg.Limits("gpt-5", 300_000, 0).Window, "the event's context_window wins")
	require.Equal(t, int64(272_000), cfg.Limits("gpt-5.1", 0, 0).Window, "gpt-5.1 is not gpt-5")
	require.Equal(t, int64(1_047_576), cfg.Limits("gpt-4.1", 0, 0).Window, "a family not overridden keeps the table's")

	info, ok = cfg.Model("hosted_vllm/llama-3.3-70b-instruct")
	require.True(t, ok, "an override makes a model the table does not know known")
	require.Equal(t, tokens.ModelInfo{Family: "llama-3.3-70b", Window: 131_072, MaxOutput: 4_096}, info)
	require.Equal(t, tokens.Limits{Window: 131_072, Reserve: 4_096, Effective: 126_976, AutoCompact: 113_976,
		Warning: 93_976, Error: 93_976, Blocking: 123_976}, cfg.Limits("llama-3.3-70b", 0, 0))

	// Without overrides, Model is LookupModel.
	for _, m := range []string{"gpt-5", "claude-opus-4-1", "unknown"} {
		want, wantOK := tokens.LookupModel(m)
		got, gotOK := tokens.DefaultConfig().Model(m)
		require.Equal(t, want, got, m)
		require.Equal(t, wantOK, gotOK, m)
	}
}

func TestModelOverrideValidate(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name     string
		override map[string]tokens.ModelOverride
		want     string
	}{
		{"upper case", map[string]tokens.ModelOverride{"GPT-5": {Window: 300_000}}, `models["GPT-5"]: a family is a lower-case model name`},
		{"provider prefix", map[string]tokens.ModelOverride{"openai/gpt-5": {Window: 300_000}}, `models["openai/gpt-5"]`},
		{"empty family", map[string]tokens.ModelOverride{"": {Window: 300_000}}, `models[""]`},
		{"nothing named", map[string]tokens.ModelOverride{"gpt-5": {}}, "name a window or a max_output"},
		{"negative", map[string]tokens.ModelOverride{"gpt-5": {Window: -1}}, "must be within 0..2097152"},
		{"too large", map[string]tokens.ModelOverride{"gpt-5": {MaxOutput: tokens.MaxWindow + 1}}, "must be within"},
		{"no room", map[string]tokens.ModelOverride{"gpt-4o": {Window: 30_000}}, `models["gpt-4o"]: a window of 30000 with a reserve of 16384 leaves no room`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := tokens.DefaultConfig()
			cfg.Models = tt.override
			require.ErrorContains(t, cfg.Validate(), tt.want)
		})
	}
}
