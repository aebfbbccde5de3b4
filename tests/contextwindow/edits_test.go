package contextwindow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/ctxedit"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// edited is the answer of POST …/context: the context, and its context_management.
type edited struct {
	rawContext
	applied []ctxedit.Applied
}

// edit posts edits (the JSON array) for session id and decodes the answer.
func (h *harness) edit(t *testing.T, id, edits string) edited {
	t.Helper()
	status, raw := h.call(t, http.MethodPost, "/v1/sessions/"+id+"/context", `{"context_management": {"edits": `+edits+`}}`, nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	var out edited
	out.raw = raw
	var parts struct {
		Messages          json.RawMessage `json:"messages"`
		ContextManagement *struct {
			AppliedEdits []ctxedit.Applied `json:"applied_edits"`
		} `json:"context_management"`
	}
	require.NoError(t, json.Unmarshal(raw, &parts))
	require.NoError(t, json.Unmarshal(raw, &out.body))
	require.NotNil(t, parts.ContextManagement, "a POST answers context_management")
	require.NotNil(t, parts.ContextManagement.AppliedEdits, "applied_edits is an array, empty or not")
	out.messages, out.applied = parts.Messages, parts.ContextManagement.AppliedEdits
	return out
}

// useID names the tool use n of session id.
func useID(id string, n int) string { return fmt.Sprintf("%s-t%d", id, n) }

// toolLoop adds one prompt answered through a tool loop: a call of each
// tool in names (uses numbered from first), each result about 1,000
// tokens, then an answer. The gateway's clock follows the events.
func (c *conversation) toolLoop(t *testing.T, first int, names ...string) {
	t.Helper()
	c.user(fmt.Sprintf("Please look at the code, part %d.", first))
	for i, name := range names {
		n := first + i
		c.respond(t, time.Minute, text("Checking."), toolUse(useID(c.id, n), name, map[string]any{"file_path": fmt.Sprintf("/src/f%d.go", n), "command": "cat"}))
		c.toolResult(useID(c.id, n), filler(fmt.Sprintf("f%d", n), 4_000))
	}
	c.respond(t, time.Minute, text(fmt.Sprintf("Part %d is fine.", first)))
	c.h.at(c.at)
}

// resultOf returns the text of the result of tool use toolUseID in c.
func resultOf(t *testing.T, c rawContext, toolUseID string) string {
	t.Helper()
	for _, m := range c.body.Messages {
		for _, b := range m.Content {
			if b.Type == turn.BlockToolResult && b.ToolUseID == toolUseID {
				return (*b.Content)[0].Text
			}
		}
	}
	t.Fatalf("no result of %s in the context", toolUseID)
	return ""
}

// inputOf returns the input of tool use toolUseID in c.
func inputOf(t *testing.T, c rawContext, toolUseID string) string {
	t.Helper()
	for _, m := range c.body.Messages {
		for _, b := range m.Content {
			if b.Type == turn.BlockToolUse && b.ID == toolUseID {
				return string(b.Input)
			}
		}
	}
	t.Fatalf("no use %s in the context", toolUseID)
	return ""
}

// TestContextEditClearToolUsesDefaults: clear_tool_uses with its defaults
// clears nothing at 90,000 input tokens; past 100,000 it clears the results
// of all but the 3 most recent tool uses (their inputs stay), reports what
// it cleared, takes it out of the count and moves the epoch; a GET then
// renders the same cut.
func TestContextEditClearToolUsesDefaults(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	c := h.conversation("defaults")
	c.input = 90_000
	c.toolLoop(t, 1, "Read", "Read", "Read", "Read", "Read", "Read")
	before := h.edit(t, c.id, `[{"type": "clear_tool_uses_20250919"}]`)
	require.Empty(t, before.applied)
	require.NotEqual(t, assembly.ClearedText, resultOf(t, before.rawContext, useID(c.id, 1)))

	c.user("And the rest?")
	c.input = 110_000
	c.respond(t, time.Minute, text("Looking."))
	h.at(c.at)
	count := h.session(t, c.id).TokenCount
	require.Greater(t, count, int64(100_000))
	got := h.edit(t, c.id, `[{"type": "clear_tool_uses_20250919"}]`)
	require.Len(t, got.applied, 1)
	a := got.applied[0]
	require.Equal(t, ctxedit.TypeClearToolUses, a.Type)
	require.Equal(t, 3, a.ClearedToolUses)
	require.Greater(t, a.ClearedInputTokens, int64(2_500))
	for n := 1; n <= 6; n++ {
		cleared := resultOf(t, got.rawContext, useID(c.id, n)) == assembly.ClearedText
		require.Equal(t, n <= 3, cleared, "use %d", n)
		require.Contains(t, inputOf(t, got.rawContext, useID(c.id, n)), "file_path", "inputs stay by default")
	}
	require.Equal(t, count-a.ClearedInputTokens, h.session(t, c.id).TokenCount, "what the cut saved left the count")
	require.Equal(t, before.body.Epoch+1, got.body.Epoch)
	require.EqualValues(t, 3, h.metrics.Sum("mnemos.context.edits", "kind", "tool_result"))

	plain := h.context(t, c.id)
	require.Equal(t, string(got.messages), string(plain.messages), "a GET renders the recorded cut")
	require.NotContains(t, string(plain.raw), "context_management")
}

// TestContextEditClearToolUsesParameters: a trigger of tool uses fires on
// a small context; clear_at_least holds back a cut that frees too little;
// keep, exclude_tools and clear_tool_inputs (a list) choose what is
// cleared.
func TestContextEditClearToolUsesParameters(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	c := h.conversation("params")
	c.toolLoop(t, 1, "Read", "Bash", "memory", "Read", "Bash", "Read")
	require.Less(t, h.session(t, c.id).TokenCount, int64(20_000))
	edit := func(atLeast int) string {
		return fmt.Sprintf(`[{"type": "clear_tool_uses_20250919",
			"trigger": {"type": "tool_uses", "value": 3},
			"keep": {"type": "tool_uses", "value": 1},
			"clear_at_least": {"type": "input_tokens", "value": %d},
			"exclude_tools": ["memory"],
			"clear_tool_inputs": ["Bash"]}]`, atLeast)
	}
	held := h.edit(t, c.id, edit(1_000_000))
	require.Empty(t, held.applied, "a cut that frees less than clear_at_least is not made")

	got := h.edit(t, c.id, edit(1_000))
	require.Len(t, got.applied, 1)
	require.Equal(t, 4, got.applied[0].ClearedToolUses)
	for n, want := range map[int]struct {
		result bool
		input  bool
	}{1: {true, false}, 2: {true, true}, 3: {false, false}, 4: {true, false}, 5: {true, true}, 6: {false, false}} {
		require.Equal(t, want.result, resultOf(t, got.rawContext, useID(c.id, n)) == assembly.ClearedText, "result of use %d", n)
		require.Equal(t, want.input, inputOf(t, got.rawContext, useID(c.id, n)) == assembly.ClearedInput, "input of use %d", n)
	}
	require.Equal(t, held.body.Epoch+1, got.body.Epoch)

	// Two uses left whole (memory's and the last Read), under the
	// trigger: the same edits cut nothing more.
	again := h.edit(t, c.id, edit(1_000))
	require.Equal(t, string(got.raw), string(again.raw))
}

// thinkingTurn adds a prompt answered with thinking and text.
func (c *conversation) thinkingTurn(t *testing.T, n int) {
	t.Helper()
	c.user(fmt.Sprintf("Question %d?", n))
	c.respond(t, time.Minute, turn.Block{Type: turn.BlockThinking, Thinking: filler(fmt.Sprintf("thought %d", n), 2_000), Signature: "c2ln"},
		text(fmt.Sprintf("Answer %d.", n)))
	c.h.at(c.at)
}

func thinkingIn(c rawContext) int {
	n := 0
	for _, m := range c.body.Messages {
		for _, b := range m.Content {
			if b.Type == turn.BlockThinking {
				n++
			}
		}
	}
	return n
}

// TestContextEditClearThinking: clear_thinking keeps every thinking block
// with "all", the latest turn's by default, the N latest with a number;
// what it dropped stays dropped.
func TestContextEditClearThinking(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	c := h.conversation("thinking")
	for n := 1; n <= 3; n++ {
		c.thinkingTurn(t, n)
	}
	all := h.edit(t, c.id, `[{"type": "clear_thinking_20251015", "keep": "all"}]`)
	require.Empty(t, all.applied)
	require.Equal(t, 3, thinkingIn(all.rawContext))

	two := h.edit(t, c.id, `[{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}}]`)
	require.Equal(t, []ctxedit.Applied{{Type: ctxedit.TypeClearThinking, ClearedThinkingTurns: 1, ClearedInputTokens: two.applied[0].ClearedInputTokens}}, two.applied)
	require.Equal(t, 2, thinkingIn(two.rawContext))
	require.Equal(t, all.body.Epoch+1, two.body.Epoch)

	def := h.edit(t, c.id, `[{"type": "clear_thinking_20251015"}]`)
	require.Equal(t, 2, def.applied[0].ClearedThinkingTurns, "by default only the latest turn's thinking stays")
	require.Equal(t, 1, thinkingIn(def.rawContext))
	require.Equal(t, turn.Content{text("Answer 1.")}, def.body.Messages[1].Content)
	require.Equal(t, turn.BlockThinking, def.body.Messages[5].Content[0].Type)

	// "all" now keeps what is left; what was dropped is not back.
	after := h.edit(t, c.id, `[{"type": "clear_thinking_20251015", "keep": "all"}]`)
	require.Equal(t, string(def.messages), string(after.messages))
	require.EqualValues(t, 2, h.metrics.Sum("mnemos.context.edits", "kind", "thinking"))
}

// TestContextEditCompaction: the compaction edit compacts a session past
// its trigger (150,000 by default) before answering, through the
// compaction funnel with the edit's instructions, and says whether it
// paused; it asks at most once per stored message; a trigger under 50,000
// is refused.
func TestContextEditCompaction(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	provider := builtin.New(map[llm.Task]builtin.Handler{llm.TaskCompaction: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		last := req.Messages[len(req.Messages)-1].Content
		mu.Lock()
		asked = append(asked, last[len(last)-1].Text)
		mu.Unlock()
		return compaction.BuiltinSummarizer(ctx, req)
	}})
	h := setup(t, provider)
	c := h.conversation("compact")
	c.input = 140_000
	c.toolLoop(t, 1, "Read", "Read", "Read")
	edit := `[{"type": "compact_20260112", "instructions": "Keep every file path.", "pause_after_compaction": true}]`
	under := h.edit(t, c.id, edit)
	require.Empty(t, under.applied, "140,000 is under the default trigger")
	require.Nil(t, under.body.Compaction)

	c.user("One more question.")
	c.input = 155_000
	c.respond(t, time.Minute, text("Sure."))
	h.at(c.at)
	got := h.edit(t, c.id, edit)
	require.Len(t, got.applied, 1)
	a := got.applied[0]
	require.Equal(t, ctxedit.TypeCompact, a.Type)
	require.Equal(t, "completed", a.Status)
	require.True(t, a.Paused)
	require.NotNil(t, got.body.Compaction)
	require.Equal(t, a.CompactionID, got.body.Compaction.ID)
	require.Greater(t, a.ClearedInputTokens, int64(100_000))
	require.True(t, strings.HasPrefix(got.body.Messages[0].Content[0].Text, "<mnemos:compact-boundary"))
	var comp compactAnswer
	h.get(t, "/v1/compactions/"+a.CompactionID, &comp)
	require.Equal(t, "preflight", comp.Trigger)
	mu.Lock()
	require.Len(t, asked, 1)
	require.Contains(t, asked[0], "Keep every file path.", "the edit's instructions reach the model")
	mu.Unlock()

	// A count still past the trigger with no message since: no second compaction.
	_, err := h.admin.Exec(context.Background(), `UPDATE sessions SET token_count = 160000, baseline_tokens = 160000 WHERE session_id = $1`, c.id)
	require.NoError(t, err)
	again := h.edit(t, c.id, `[{"type": "compact_20260112"}]`)
	require.Empty(t, again.applied)
	var list struct {
		Compactions []compactAnswer `json:"compactions"`
	}
	h.get(t, "/v1/sessions/compact/compactions", &list)
	require.Len(t, list.Compactions, 1)
	// A new message: the next request compacts, without pausing this time.
	c.user("And now?")
	c.respond(t, time.Minute, text("Now this."))
	h.at(c.at)
	_, err = h.admin.Exec(context.Background(), `UPDATE sessions SET token_count = 60000, baseline_tokens = 60000 WHERE session_id = $1`, c.id)
	require.NoError(t, err)
	next := h.edit(t, c.id, `[{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50000}}]`)
	require.Len(t, next.applied, 1)
	require.False(t, next.applied[0].Paused)
	require.NotEqual(t, a.CompactionID, next.applied[0].CompactionID)

	status, raw := h.call(t, http.MethodPost, "/v1/sessions/compact/context",
		`{"context_management": {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 40000}}]}}`, nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(raw), ctxedit.CodeBadParameter)
}

// TestContextEditsGiveStableBytesAndOneExpectedBreakPerCut: requests with
// the same edits answer the same bytes until something changes; a turn
// only appends; each new cut is one expected cache break, and no break is
// unexpected.
func TestContextEditsGiveStableBytesAndOneExpectedBreakPerCut(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	c := h.conversation("stable")
	c.toolLoop(t, 1, "Read", "Read", "Read", "Read", "Read")
	edits := `[{"type": "clear_thinking_20251015"}, {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 30000}, "clear_tool_inputs": true}]`
	expected := func() int64 { return h.metrics.Sum("mnemos.context.cache_breaks", "kind", "expected") }

	first := h.edit(t, c.id, edits)
	require.Empty(t, first.applied, "under the trigger")
	c.user("Go on.")
	c.input = 35_000
	c.respond(t, time.Minute, text("Going on."))
	h.at(c.at)
	cut := h.edit(t, c.id, edits)
	require.Len(t, cut.applied, 1)
	require.EqualValues(t, 1, expected())
	for range 3 {
		again := h.edit(t, c.id, edits)
		require.Equal(t, string(cut.raw), string(again.raw), "the same edits, nothing new: the same bytes")
	}
	require.Equal(t, string(cut.messages), string(h.context(t, c.id).messages))
	require.EqualValues(t, 1, expected(), "one cut, one break")

	// A turn under the trigger only appends.
	c.input = 25_000
	c.toolLoop(t, 6, "Read")
	grown := h.edit(t, c.id, edits)
	appends(t, cut.rawContext, grown.rawContext)
	require.Equal(t, cut.applied, grown.applied)
	require.EqualValues(t, 1, expected())

	// Past the trigger again: a second cut, a second break.
	c.user("Once more.")
	c.input = 36_000
	c.respond(t, time.Minute, text("Again."))
	h.at(c.at)
	second := h.edit(t, c.id, edits)
	require.Greater(t, second.applied[0].ClearedToolUses, cut.applied[0].ClearedToolUses)
	require.Equal(t, grown.body.Epoch+1, second.body.Epoch)
	require.Equal(t, string(second.raw), string(h.edit(t, c.id, edits).raw))
	require.EqualValues(t, 2, expected())
	require.Zero(t, h.metrics.Sum("mnemos.context.cache_breaks", "kind", "unexpected"))
}

// TestContextEditsRefused: a body or an edit that cannot be used answers
// 400 with its code, counted; a session that does not exist 404; a body
// without edits answers like GET with nothing applied.
func TestContextEditsRefused(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	c := h.conversation("refused")
	c.toolLoop(t, 1, "Read")
	for _, tt := range []struct{ body, code string }{
		{`{"context_management": {"edits": [{"type": "clear_all"}]}}`, ctxedit.CodeUnknownEdit},
		{`{"context_management": {"edits": [{"type": "clear_tool_uses_20250919", "keep": 3}]}}`, ctxedit.CodeBadParameter},
		{`{"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 0}}]}}`, ctxedit.CodeBadParameter},
		{`{"context_management": {"edits": "all"}}`, ctxedit.CodeBadEdits},
		{`{"context_management": {"edits": []}, "model": "x"}`, "bad_json"},
		{`{"context_management": {"edits": [], "edits": []}}`, "duplicate_key"},
		{`{"context_management":`, "bad_json"},
	} {
		status, raw := h.call(t, http.MethodPost, "/v1/sessions/refused/context", tt.body, nil)
		require.Equal(t, http.StatusBadRequest, status, tt.body)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		require.NoError(t, json.Unmarshal(raw, &e))
		require.Equal(t, tt.code, e.Error.Code, string(raw))
		require.Positive(t, h.metrics.Sum("mnemos.requests.refused", "code", tt.code))
	}
	status, _ := h.call(t, http.MethodPost, "/v1/sessions/nobody/context", `{"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}}`, nil)
	require.Equal(t, http.StatusNotFound, status)

	status, raw := h.call(t, http.MethodPost, "/v1/sessions/refused/context", "", nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(raw), `"context_management":{"applied_edits":[]}`)
	plain := h.context(t, c.id)
	require.Equal(t, strings.TrimSuffix(string(plain.raw), "}\n"), strings.TrimSuffix(string(raw), `,"context_management":{"applied_edits":[]}}`+"\n"))
}
