package ctxedit_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/ctxedit"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// convo builds hand-made messages.
type convo struct{ msgs []view.Message }

func (c *convo) add(role string, blocks ...turn.Block) string {
	uuid := fmt.Sprintf("m%d", len(c.msgs))
	c.msgs = append(c.msgs, view.Message{UUID: uuid, Position: int64(len(c.msgs)), Role: role, Content: blocks})
	return uuid
}

func text(s string) turn.Block { return turn.Block{Type: turn.BlockText, Text: s} }

func thinking(s string) turn.Block {
	return turn.Block{Type: turn.BlockThinking, Thinking: strings.Repeat(s+" ", 100), Signature: "sig"}
}

// call adds a round: an assistant message calling tool name (id tN), and
// the user message answering it with size bytes.
func (c *convo) call(n int, name string, size int) {
	id := fmt.Sprintf("t%d", n)
	c.add("assistant", text("Calling."), turn.Block{Type: turn.BlockToolUse, ID: id, Name: name,
		Input: json.RawMessage(fmt.Sprintf(`{"path":"/src/file%d.go","why":"to see what it holds"}`, n))})
	inner := turn.Content{text(strings.Repeat(fmt.Sprintf("output %d. ", n), size/10))}
	c.add("user", turn.Block{Type: turn.BlockToolResult, ToolUseID: id, Content: &inner})
}

// calls adds n rounds of tool name, results of 4,000 bytes (about 1,000 tokens).
func calls(names ...string) []view.Message {
	var c convo
	c.add("user", text("Please look around."))
	for i, name := range names {
		c.call(i+1, name, 4_000)
	}
	return c.msgs
}

func reads(n int) []view.Message {
	names := make([]string, n)
	for i := range names {
		names[i] = "Read"
	}
	return calls(names...)
}

func toolUses(t *testing.T, params string) ctxedit.Config {
	t.Helper()
	if params != "" {
		params = ", " + params
	}
	return parse(t, `{"edits": [{"type": "clear_tool_uses_20250919"`+params+`}]}`)
}

func ids(n ...int) []string {
	out := make([]string, len(n))
	for i, k := range n {
		out[i] = fmt.Sprintf("t%d", k)
	}
	return out
}

// TestClearToolUsesDefaultTrigger: by default the edit clears once the
// context holds more than 100,000 input tokens, not at 100,000.
func TestClearToolUsesDefaultTrigger(t *testing.T) {
	t.Parallel()
	cfg := toolUses(t, "")
	msgs := reads(5)
	require.True(t, cfg.Decide(ctxedit.Context{Messages: msgs, InputTokens: 100_000}).Empty())
	cut := cfg.Decide(ctxedit.Context{Messages: msgs, InputTokens: 100_001})
	require.Equal(t, ids(1, 2), cut.ToolUses)
	require.Empty(t, cut.Inputs, "inputs are kept by default")
	require.Greater(t, cut.Saved, int64(1_500))
}

// TestClearToolUsesInputTokensTrigger: a trigger of N input tokens.
func TestClearToolUsesInputTokensTrigger(t *testing.T) {
	t.Parallel()
	cfg := toolUses(t, `"trigger": {"type": "input_tokens", "value": 30000}`)
	msgs := reads(5)
	require.True(t, cfg.Decide(ctxedit.Context{Messages: msgs, InputTokens: 30_000}).Empty())
	require.Equal(t, ids(1, 2), cfg.Decide(ctxedit.Context{Messages: msgs, InputTokens: 30_001}).ToolUses)
}

// TestClearToolUsesToolUsesTrigger: a trigger of N tool uses counts the
// uses whose results are not cleared yet (by micro-compaction or a cut),
// whatever the input tokens.
func TestClearToolUsesToolUsesTrigger(t *testing.T) {
	t.Parallel()
	cfg := toolUses(t, `"trigger": {"type": "tool_uses", "value": 4}`)
	require.True(t, cfg.Decide(ctxedit.Context{Messages: reads(4), InputTokens: 1_000_000}).Empty())
	require.Equal(t, ids(1, 2), cfg.Decide(ctxedit.Context{Messages: reads(5)}).ToolUses)
	// Two of the five cleared already: three live uses are under the trigger.
	require.True(t, cfg.Decide(ctxedit.Context{Messages: reads(5), Cleared: map[string]bool{"t1": true},
		Cuts: assembly.Cuts{ToolUses: map[string]bool{"t2": true}}}).Empty())
}

// TestClearToolUsesKeep: the keep most recent uses stay (3 by default),
// any number down to none.
func TestClearToolUsesKeep(t *testing.T) {
	t.Parallel()
	msgs := reads(6)
	over := ctxedit.Context{Messages: msgs, InputTokens: 200_000}
	require.Equal(t, ids(1, 2, 3), toolUses(t, "").Decide(over).ToolUses, "default: 3 kept")
	require.Equal(t, ids(1, 2, 3, 4, 5), toolUses(t, `"keep": {"type": "tool_uses", "value": 1}`).Decide(over).ToolUses)
	require.Equal(t, ids(1, 2, 3, 4, 5, 6), toolUses(t, `"keep": {"type": "tool_uses", "value": 0}`).Decide(over).ToolUses)
	require.True(t, toolUses(t, `"keep": {"type": "tool_uses", "value": 6}`).Decide(over).Empty())

	// A use not answered yet is never cleared, and does not count.
	var c convo
	c.msgs = reads(2)
	c.add("assistant", turn.Block{Type: turn.BlockToolUse, ID: "pending", Name: "Read", Input: json.RawMessage(`{"path":"/x"}`)})
	cut := toolUses(t, `"keep": {"type": "tool_uses", "value": 0}, "clear_tool_inputs": true`).Decide(ctxedit.Context{Messages: c.msgs, InputTokens: 200_000})
	require.Equal(t, ids(1, 2), cut.ToolUses)
	require.Equal(t, ids(1, 2), cut.Inputs)
}

// TestClearToolUsesClearAtLeast: a cut that frees fewer tokens than
// clear_at_least is not made at all; one that frees as many is.
func TestClearToolUsesClearAtLeast(t *testing.T) {
	t.Parallel()
	over := ctxedit.Context{Messages: reads(5), InputTokens: 200_000}
	saves := toolUses(t, "").Decide(over).Saved
	require.Positive(t, saves)
	require.True(t, toolUses(t, fmt.Sprintf(`"clear_at_least": {"type": "input_tokens", "value": %d}`, saves+1)).Decide(over).Empty())
	require.Equal(t, ids(1, 2), toolUses(t, fmt.Sprintf(`"clear_at_least": {"type": "input_tokens", "value": %d}`, saves)).Decide(over).ToolUses)
}

// TestClearToolUsesExcludeTools: uses of an excluded tool are never
// cleared, and keep counts the other tools' uses.
func TestClearToolUsesExcludeTools(t *testing.T) {
	t.Parallel()
	over := ctxedit.Context{Messages: calls("Read", "memory", "Read", "Read", "memory", "Read"), InputTokens: 200_000}
	require.Equal(t, ids(1, 2, 3), toolUses(t, "").Decide(over).ToolUses)
	cut := toolUses(t, `"exclude_tools": ["memory"]`).Decide(over)
	require.Equal(t, ids(1), cut.ToolUses, "t2 is excluded; t3, t4 and t6 are the three most recent of the others")
}

// TestClearToolUsesClearToolInputs: inputs are kept by default, cleared
// for every tool with true, for the named tools with a list; a result
// micro-compaction cleared still has its input cleared.
func TestClearToolUsesClearToolInputs(t *testing.T) {
	t.Parallel()
	over := ctxedit.Context{Messages: calls("Read", "Bash", "Read", "Bash", "Read", "Bash"), InputTokens: 200_000}
	require.Empty(t, toolUses(t, `"clear_tool_inputs": false`).Decide(over).Inputs)
	all := toolUses(t, `"clear_tool_inputs": true`).Decide(over)
	require.Equal(t, ids(1, 2, 3), all.ToolUses)
	require.Equal(t, ids(1, 2, 3), all.Inputs)
	bash := toolUses(t, `"clear_tool_inputs": ["Bash"]`).Decide(over)
	require.Equal(t, ids(1, 2, 3), bash.ToolUses)
	require.Equal(t, ids(2), bash.Inputs)
	require.Greater(t, all.Saved, bash.Saved)

	over.Cleared = map[string]bool{"t1": true}
	micro := toolUses(t, `"clear_tool_inputs": true`).Decide(over)
	require.Equal(t, ids(2, 3), micro.ToolUses, "t1's result is cleared already")
	require.Equal(t, ids(1, 2, 3), micro.Inputs)

	// Rendered: the input is {}, the result the cleared text.
	shown := ctxedit.Apply(over.Messages, nil, ctxedit.With(assembly.Cuts{}, all))
	require.JSONEq(t, `{}`, string(shown[1].Content[1].Input))
	require.Equal(t, assembly.ClearedText, (*shown[2].Content[0].Content)[0].Text)
	require.JSONEq(t, `{"path":"/src/file4.go","why":"to see what it holds"}`, string(shown[7].Content[1].Input), "t4 is kept whole")
}

// TestClearToolUsesCutsStick: what is cut is not cut again; the next cut
// comes when the trigger is passed again, and clears only what is new.
func TestClearToolUsesCutsStick(t *testing.T) {
	t.Parallel()
	cfg := toolUses(t, `"trigger": {"type": "input_tokens", "value": 30000}`)
	c := ctxedit.Context{Messages: reads(5), InputTokens: 40_000}
	first := cfg.Decide(c)
	require.Equal(t, ids(1, 2), first.ToolUses)
	c.Cuts = ctxedit.With(c.Cuts, first)
	c.InputTokens -= first.Saved
	require.True(t, cfg.Decide(c).Empty(), "the same context: nothing new")
	c.InputTokens = 40_000
	require.True(t, cfg.Decide(c).Empty(), "past the trigger, but nothing older than the kept three is left")

	c.Messages = reads(7)
	require.Equal(t, ids(3, 4), cfg.Decide(c).ToolUses)
	c.InputTokens = 29_000
	require.True(t, cfg.Decide(c).Empty(), "under the trigger")
}

// thinkingConvo: four prompts; the second is a tool loop of two responses
// with thinking, the third answered without thinking, the fourth has
// thinking alone.
func thinkingConvo() (msgs []view.Message, byTurn [][]string) {
	var c convo
	c.add("user", text("first"))
	a1 := c.add("assistant", thinking("one"), text("One."))
	c.add("user", text("second"))
	a2 := c.add("assistant", thinking("two"), turn.Block{Type: turn.BlockToolUse, ID: "x", Name: "Read", Input: json.RawMessage(`{}`)})
	inner := turn.Content{text("file")}
	c.add("user", turn.Block{Type: turn.BlockToolResult, ToolUseID: "x", Content: &inner})
	a3 := c.add("assistant", turn.Block{Type: turn.BlockRedactedThinking, Data: strings.Repeat("z", 400)}, text("Two."))
	c.add("user", text("third"))
	c.add("assistant", text("Three."))
	c.add("user", text("fourth"))
	a4 := c.add("assistant", thinking("four"), text("Four."))
	return c.msgs, [][]string{{a1}, {a2, a3}, {a4}}
}

func thinkingEdit(t *testing.T, keep string) ctxedit.Config {
	t.Helper()
	if keep != "" {
		keep = `, "keep": ` + keep
	}
	return parse(t, `{"edits": [{"type": "clear_thinking_20251015"`+keep+`}]}`)
}

// TestClearThinkingDefaultKeep: by default the thinking of the latest turn
// that holds any stays; every older turn's goes, a tool loop's responses
// being one turn; it needs no trigger.
func TestClearThinkingDefaultKeep(t *testing.T) {
	t.Parallel()
	msgs, turns := thinkingConvo()
	cut := thinkingEdit(t, "").Decide(ctxedit.Context{Messages: msgs})
	require.Equal(t, append(turns[0], turns[1]...), cut.Thinking)
	require.Empty(t, cut.ToolUses)
	require.Positive(t, cut.Saved)
	shown := ctxedit.Apply(msgs, nil, ctxedit.With(assembly.Cuts{}, cut))
	require.Equal(t, turn.Content{text("One.")}, shown[1].Content)
	require.Equal(t, turn.Content{text("Two.")}, shown[5].Content, "redacted thinking goes too")
	require.Equal(t, msgs[9].Content, shown[9].Content, "the latest turn's thinking stays")
	var before, after int64
	for i := range msgs {
		before += tokens.EstimateContent(msgs[i].Content)
		after += tokens.EstimateContent(shown[i].Content)
	}
	require.Equal(t, before-after, cut.Saved)
}

// TestClearThinkingKeep: keep N thinking turns, or "all".
func TestClearThinkingKeep(t *testing.T) {
	t.Parallel()
	msgs, turns := thinkingConvo()
	require.Equal(t, turns[0], thinkingEdit(t, `{"type": "thinking_turns", "value": 2}`).Decide(ctxedit.Context{Messages: msgs}).Thinking)
	require.True(t, thinkingEdit(t, `{"type": "thinking_turns", "value": 3}`).Decide(ctxedit.Context{Messages: msgs}).Empty())
	require.True(t, thinkingEdit(t, `"all"`).Decide(ctxedit.Context{Messages: msgs}).Empty())
}

// TestClearThinkingLeavesWhatItCannotDrop: a response of thinking alone
// keeps it (an empty message is no message), and a cut message is not cut again.
func TestClearThinkingLeavesWhatItCannotDrop(t *testing.T) {
	t.Parallel()
	var c convo
	c.add("user", text("first"))
	c.add("assistant", thinking("only"))
	c.add("user", text("second"))
	c.add("assistant", thinking("two"), text("Two."))
	require.True(t, thinkingEdit(t, "").Decide(ctxedit.Context{Messages: c.msgs}).Empty())

	msgs, turns := thinkingConvo()
	cut := thinkingEdit(t, "").Decide(ctxedit.Context{Messages: msgs, Cuts: assembly.Cuts{Thinking: map[string]bool{turns[0][0]: true}}})
	require.Equal(t, turns[1], cut.Thinking)
}

// TestEditsApplyInOrder: each edit sees the context the ones before it
// left: thinking cleared first can bring the count under the tool-use
// trigger; the other way round both cut.
func TestEditsApplyInOrder(t *testing.T) {
	t.Parallel()
	var c convo
	c.msgs = reads(5)
	c.add("user", text("and now?"))
	c.add("assistant", thinking("old"), text("Old."))
	c.add("user", text("last"))
	c.add("assistant", thinking("new"), text("New."))
	thinkingOnly := parse(t, `{"edits": [{"type": "clear_thinking_20251015"}]}`).Decide(ctxedit.Context{Messages: c.msgs})
	require.Len(t, thinkingOnly.Thinking, 1)
	count := 30_000 + thinkingOnly.Saved
	first := parse(t, `{"edits": [{"type": "clear_thinking_20251015"},
		{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000}}]}`).Decide(ctxedit.Context{Messages: c.msgs, InputTokens: count})
	require.Equal(t, thinkingOnly, first, "under the trigger once the thinking is gone")
	second := parse(t, `{"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000}},
		{"type": "clear_thinking_20251015"}]}`).Decide(ctxedit.Context{Messages: c.msgs, InputTokens: count})
	require.Equal(t, ids(1, 2), second.ToolUses)
	require.Equal(t, thinkingOnly.Thinking, second.Thinking)
	require.Equal(t, thinkingOnly.Saved+toolUses(t, "").Decide(ctxedit.Context{Messages: c.msgs, InputTokens: 200_000}).Saved, second.Saved)
}

// TestReportCountsEveryCut: applied_edits count what the context's cuts
// clear, the earlier ones too, one entry per clearing edit of the request
// that clears anything, and nothing for micro-compaction's own.
func TestReportCountsEveryCut(t *testing.T) {
	t.Parallel()
	msgs, turns := thinkingConvo()
	msgs = append(msgs, reads(5)[1:]...)
	cfg := parse(t, `{"edits": [{"type": "clear_thinking_20251015"}, {"type": "clear_tool_uses_20250919", "clear_tool_inputs": ["Read"]}, {"type": "compact_20260112"}]}`)
	c := ctxedit.Context{Messages: msgs, InputTokens: 200_000}
	require.Equal(t, []ctxedit.Applied{}, cfg.Report(c), "nothing cut yet")
	cut := cfg.Decide(c)
	c.Cuts = ctxedit.With(c.Cuts, cut)
	got := cfg.Report(c)
	require.Len(t, got, 2)
	require.Equal(t, ctxedit.Applied{Type: ctxedit.TypeClearThinking, ClearedThinkingTurns: 2, ClearedInputTokens: got[0].ClearedInputTokens}, got[0])
	require.Equal(t, ctxedit.Applied{Type: ctxedit.TypeClearToolUses, ClearedToolUses: 2, ClearedInputTokens: got[1].ClearedInputTokens}, got[1],
		"t1 and t2: of the six, all but the last 3, and x (the thinking turn's call) is too small to shrink")
	require.Equal(t, cut.Saved, got[0].ClearedInputTokens+got[1].ClearedInputTokens)
	require.Equal(t, append(turns[0], turns[1]...), cut.Thinking)

	// A request naming only one edit reports only it.
	only := parse(t, `{"edits": [{"type": "clear_tool_uses_20250919"}]}`)
	require.Equal(t, got[1:], only.Report(c))
	// micro-compaction's clearing is not the edit's.
	c.Cleared = map[string]bool{"t1": true}
	require.Less(t, cfg.Report(c)[1].ClearedInputTokens, got[1].ClearedInputTokens)
}

// TestCompactDue: the compaction edit is due past its trigger (150,000 by
// default), not at it.
func TestCompactDue(t *testing.T) {
	t.Parallel()
	def, _ := parse(t, `{"edits": [{"type": "compact_20260112"}]}`).Compaction()
	require.False(t, def.Due(150_000))
	require.True(t, def.Due(150_001))
	low, _ := parse(t, `{"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50000}}]}`).Compaction()
	require.True(t, low.Due(50_001))
	require.True(t, parse(t, `{"edits": [{"type": "compact_20260112"}]}`).Decide(ctxedit.Context{Messages: reads(9), InputTokens: 1_000_000}).Empty(),
		"the compaction edit cuts nothing itself")
}
