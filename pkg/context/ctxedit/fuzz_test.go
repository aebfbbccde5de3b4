package ctxedit_test

import (
	"slices"
	"testing"

	"github.com/mnemos-ai/mnemos/pkg/context/ctxedit"
)

// FuzzParse: parsing never panics; a refusal is an *Error with one of the
// three codes; an accepted config has at most one edit of each type, each
// with exactly its own parameters set, every value within its bounds.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"edits": []}`,
		`{"edits": [{"type": "clear_tool_uses_20250919"}]}`,
		`{"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses", "value": 7}, "keep": {"type": "tool_uses", "value": 0},
		  "clear_at_least": {"type": "input_tokens", "value": 5000}, "exclude_tools": ["memory"], "clear_tool_inputs": ["Bash"]}]}`,
		`{"edits": [{"type": "clear_thinking_20251015", "keep": "all"}, {"type": "clear_tool_uses_20250919", "clear_tool_inputs": true}]}`,
		`{"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}]}`,
		`{"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50000}, "instructions": "x", "pause_after_compaction": true}]}`,
		`{"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": -1}}]}`,
		`{"edits": [{"type": "nope"}], "x": 1}`,
		`[]`, `null`, `{"edits": null}`,
	} {
		f.Add([]byte(seed))
	}
	codes := []string{ctxedit.CodeUnknownEdit, ctxedit.CodeBadParameter, ctxedit.CodeBadEdits}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ctxedit.Parse(data)
		if err != nil {
			e, ok := ctxedit.AsError(err)
			if !ok || !slices.Contains(codes, e.Code) || e.Msg == "" {
				t.Fatalf("refusal %v is not an *Error with a known code", err)
			}
			return
		}
		if len(cfg.Edits) > ctxedit.MaxEdits {
			t.Fatalf("%d edits", len(cfg.Edits))
		}
		seen := map[string]bool{}
		for _, e := range cfg.Edits {
			if seen[e.Type] {
				t.Fatalf("%s twice", e.Type)
			}
			seen[e.Type] = true
			set := 0
			for _, p := range []bool{e.ToolUses != nil, e.Thinking != nil, e.Compact != nil} {
				if p {
					set++
				}
			}
			if set != 1 {
				t.Fatalf("%s: %d parameter sets", e.Type, set)
			}
			switch {
			case e.ToolUses != nil:
				p := e.ToolUses
				if e.Type != ctxedit.TypeClearToolUses || p.Trigger.Value < 1 || p.Keep < 0 || p.ClearAtLeast < 0 ||
					(p.Trigger.Unit != ctxedit.UnitInputTokens && p.Trigger.Unit != ctxedit.UnitToolUses) {
					t.Fatalf("clear_tool_uses out of bounds: %+v", p)
				}
			case e.Thinking != nil:
				if e.Type != ctxedit.TypeClearThinking || e.Thinking.Keep < 1 {
					t.Fatalf("clear_thinking out of bounds: %+v", e.Thinking)
				}
			case e.Compact != nil:
				if e.Type != ctxedit.TypeCompact || e.Compact.Trigger < ctxedit.MinCompactTrigger || len(e.Compact.Instructions) > ctxedit.MaxInstructions {
					t.Fatalf("compact out of bounds: %+v", e.Compact)
				}
			}
		}
	})
}
