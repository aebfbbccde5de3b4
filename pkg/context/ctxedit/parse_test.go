package ctxedit_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/ctxedit"
)

func parse(t *testing.T, s string) ctxedit.Config {
	t.Helper()
	cfg, err := ctxedit.Parse([]byte(s))
	require.NoError(t, err)
	return cfg
}

// TestParseDefaults: an edit named by its type alone takes every default
// (and null is the same as left out).
func TestParseDefaults(t *testing.T) {
	t.Parallel()
	cfg := parse(t, `{"edits": [
		{"type": "clear_thinking_20251015"},
		{"type": "clear_tool_uses_20250919", "keep": null},
		{"type": "compact_20260112"}]}`)
	require.Equal(t, ctxedit.Config{Edits: []ctxedit.Edit{
		{Type: ctxedit.TypeClearThinking, Thinking: &ctxedit.Thinking{Keep: 1}},
		{Type: ctxedit.TypeClearToolUses, ToolUses: &ctxedit.ToolUses{
			Trigger: ctxedit.Threshold{Unit: "input_tokens", Value: 100_000}, Keep: 3,
		}},
		{Type: ctxedit.TypeCompact, Compact: &ctxedit.Compact{Trigger: 150_000}},
	}}, cfg)
	require.True(t, cfg.Clears())
	c, ok := cfg.Compaction()
	require.True(t, ok)
	require.Equal(t, int64(150_000), c.Trigger)

	empty := parse(t, `{"edits": []}`)
	require.False(t, empty.Clears())
	_, ok = empty.Compaction()
	require.False(t, ok)
}

// TestParseParameters: every parameter is read.
func TestParseParameters(t *testing.T) {
	t.Parallel()
	cfg := parse(t, `{"edits": [
		{"type": "clear_tool_uses_20250919",
		 "trigger": {"type": "tool_uses", "value": 7},
		 "keep": {"type": "tool_uses", "value": 0},
		 "clear_at_least": {"type": "input_tokens", "value": 5000},
		 "exclude_tools": ["memory", "web_search"],
		 "clear_tool_inputs": ["Bash"]},
		{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
		{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50000},
		 "instructions": "Keep the file paths.", "pause_after_compaction": true}]}`)
	tu := cfg.Edits[0].ToolUses
	require.Equal(t, &ctxedit.ToolUses{
		Trigger: ctxedit.Threshold{Unit: "tool_uses", Value: 7}, Keep: 0, ClearAtLeast: 5000,
		ExcludeTools: []string{"memory", "web_search"}, ClearInputsOf: []string{"Bash"},
	}, tu)
	require.True(t, tu.Excludes("memory"))
	require.False(t, tu.Excludes("Bash"))
	require.True(t, tu.ClearsInput("Bash"))
	require.False(t, tu.ClearsInput("Read"))
	require.Equal(t, &ctxedit.Thinking{Keep: 2}, cfg.Edits[1].Thinking)
	require.Equal(t, &ctxedit.Compact{Trigger: 50_000, Instructions: "Keep the file paths.", PauseAfterCompaction: true}, cfg.Edits[2].Compact)

	all := parse(t, `{"edits": [{"type": "clear_tool_uses_20250919", "clear_tool_inputs": true},
		{"type": "clear_thinking_20251015", "keep": "all"}]}`)
	require.True(t, all.Edits[0].ToolUses.ClearAllInputs)
	require.True(t, all.Edits[0].ToolUses.ClearsInput("anything"))
	require.Equal(t, &ctxedit.Thinking{KeepAll: true, Keep: 1}, all.Edits[1].Thinking)
}

// TestParseRefuses: each bad context_management answers its code, naming
// where it is wrong.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, code, where string
	}{
		{"not an object", `[]`, ctxedit.CodeBadEdits, "context_management"},
		{"no edits", `{}`, ctxedit.CodeBadEdits, "edits is required"},
		{"edits not an array", `{"edits": {}}`, ctxedit.CodeBadEdits, "context_management.edits"},
		{"unknown top field", `{"edits": [], "mode": 1}`, ctxedit.CodeBadEdits, `"mode"`},
		{"an edit not an object", `{"edits": [1]}`, ctxedit.CodeBadEdits, "edits[0]"},
		{"no type", `{"edits": [{}]}`, ctxedit.CodeUnknownEdit, "edits[0].type"},
		{"unknown type", `{"edits": [{"type": "clear_everything"}]}`, ctxedit.CodeUnknownEdit, `"clear_everything"`},
		{"older version", `{"edits": [{"type": "clear_tool_uses_20250101"}]}`, ctxedit.CodeUnknownEdit, "edits[0].type"},
		{"twice", `{"edits": [{"type": "compact_20260112"}, {"type": "compact_20260112"}]}`, ctxedit.CodeBadEdits, "edits[1]"},
		{"too many", `{"edits": [{"type": "compact_20260112"}, {"type": "compact_20260112"}, {"type": "compact_20260112"}, {"type": "compact_20260112"}]}`, ctxedit.CodeBadEdits, "at most 3"},
		{"unknown parameter", `{"edits": [{"type": "clear_tool_uses_20250919", "keep_last": 3}]}`, ctxedit.CodeBadParameter, "edits[0].keep_last"},
		{"trigger unit", `{"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "messages", "value": 3}}]}`, ctxedit.CodeBadParameter, "trigger.type"},
		{"trigger zero", `{"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 0}}]}`, ctxedit.CodeBadParameter, "trigger.value"},
		{"trigger fraction", `{"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 1.5}}]}`, ctxedit.CodeBadParameter, "trigger.value"},
		{"trigger a number", `{"edits": [{"type": "clear_tool_uses_20250919", "trigger": 30000}]}`, ctxedit.CodeBadParameter, "edits[0].trigger"},
		{"trigger without value", `{"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens"}}]}`, ctxedit.CodeBadParameter, "trigger.value"},
		{"trigger extra field", `{"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 9, "unit": 1}}]}`, ctxedit.CodeBadParameter, `"unit"`},
		{"keep in tokens", `{"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "input_tokens", "value": 3}}]}`, ctxedit.CodeBadParameter, "keep.type"},
		{"keep negative", `{"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": -1}}]}`, ctxedit.CodeBadParameter, "keep.value"},
		{"clear_at_least in tool uses", `{"edits": [{"type": "clear_tool_uses_20250919", "clear_at_least": {"type": "tool_uses", "value": 3}}]}`, ctxedit.CodeBadParameter, "clear_at_least.type"},
		{"exclude_tools a string", `{"edits": [{"type": "clear_tool_uses_20250919", "exclude_tools": "Read"}]}`, ctxedit.CodeBadParameter, "exclude_tools"},
		{"exclude_tools empty name", `{"edits": [{"type": "clear_tool_uses_20250919", "exclude_tools": ["Read", " "]}]}`, ctxedit.CodeBadParameter, "exclude_tools[1]"},
		{"clear_tool_inputs a string", `{"edits": [{"type": "clear_tool_uses_20250919", "clear_tool_inputs": "yes"}]}`, ctxedit.CodeBadParameter, "clear_tool_inputs"},
		{"thinking keep some", `{"edits": [{"type": "clear_thinking_20251015", "keep": "some"}]}`, ctxedit.CodeBadParameter, "edits[0].keep"},
		{"thinking keep zero", `{"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 0}}]}`, ctxedit.CodeBadParameter, "keep.value"},
		{"thinking keep tool uses", `{"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "tool_uses", "value": 2}}]}`, ctxedit.CodeBadParameter, "keep.type"},
		{"thinking trigger", `{"edits": [{"type": "clear_thinking_20251015", "trigger": {"type": "input_tokens", "value": 2}}]}`, ctxedit.CodeBadParameter, "edits[0].trigger"},
		{"compact trigger under the minimum", `{"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 49999}}]}`, ctxedit.CodeBadParameter, "at least 50000"},
		{"compact trigger in tool uses", `{"edits": [{"type": "compact_20260112", "trigger": {"type": "tool_uses", "value": 60000}}]}`, ctxedit.CodeBadParameter, "trigger.type"},
		{"instructions not a string", `{"edits": [{"type": "compact_20260112", "instructions": 1}]}`, ctxedit.CodeBadParameter, "instructions"},
		{"instructions too long", `{"edits": [{"type": "compact_20260112", "instructions": "` + strings.Repeat("x", 20_001) + `"}]}`, ctxedit.CodeBadParameter, "at most 20000"},
		{"instructions with NUL", `{"edits": [{"type": "compact_20260112", "instructions": "a\u0000b"}]}`, ctxedit.CodeBadParameter, "NUL"},
		{"pause not a bool", `{"edits": [{"type": "compact_20260112", "pause_after_compaction": "yes"}]}`, ctxedit.CodeBadParameter, "pause_after_compaction"},
		{"compact keep", `{"edits": [{"type": "compact_20260112", "keep": {"type": "tool_uses", "value": 2}}]}`, ctxedit.CodeBadParameter, "edits[0].keep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ctxedit.Parse([]byte(tt.body))
			e, ok := ctxedit.AsError(err)
			require.True(t, ok, "%v", err)
			require.Equal(t, tt.code, e.Code, e.Msg)
			require.Contains(t, e.Error(), tt.where)
		})
	}
}
