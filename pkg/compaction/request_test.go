package compaction_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func resultOf(id string, blocks ...turn.Block) turn.Block {
	c := turn.Content(blocks)
	return turn.Block{Type: turn.BlockToolResult, ToolUseID: id, Content: &c}
}

func TestRequestMessages(t *testing.T) {
	t.Parallel()

	instr := func(t *testing.T, msgs []llm.Message) {
		t.Helper()
		last := msgs[len(msgs)-1].Content
		require.True(t, strings.HasPrefix(last[len(last)-1].Text, compaction.InstructionsLead))
	}
	cached := text("cached")
	cached.CacheControl = json.RawMessage(`{"type":"ephemeral"}`)
	cited := text("cited")
	cited.Citations = json.RawMessage(`[{"type":"char_location"}]`)

	tests := []struct {
		name string
		in   []view.Message
		// want is the request without the instruction block that ends it.
		want []llm.Message
	}{
		{
			name: "starts with the assistant",
			in:   []view.Message{assistant(3, text("I ran the tests.")), user(4, text("and?"))},
			want: []llm.Message{
				{Role: "user", Content: turn.Content{text(compaction.LeadingPlaceholder)}},
				{Role: "assistant", Content: turn.Content{text("I ran the tests.")}},
				{Role: "user", Content: turn.Content{text("and?")}},
			},
		},
		{
			name: "starts with an orphan tool result",
			in: []view.Message{
				user(2, toolResult("gone", "old output"), text("next please")),
				assistant(2, text("ok")),
			},
			want: []llm.Message{
				{Role: "user", Content: turn.Content{text(compaction.OrphanResultLead + "old output"), text("next please")}},
				{Role: "assistant", Content: turn.Content{text("ok")}},
			},
		},
		{
			name: "orphan error after the assistant lost its call",
			in: []view.Message{
				user(1, text("go")),
				assistant(1, thinking("only thinking")),
				user(2, toolError("gone", "exit 1")),
			},
			want: []llm.Message{
				{Role: "user", Content: turn.Content{text("go"), text(compaction.OrphanErrorLead + "exit 1")}},
			},
		},
		{
			name: "media become text, also inside tool results",
			in: []view.Message{
				user(1, text("look"), image(), document()),
				assistant(1, toolUse("s1", "Screenshot", nil)),
				user(2, resultOf("s1", image(), text("a caption"), turn.Block{Type: "search_result"}), cached, cited),
			},
			want: []llm.Message{
				{Role: "user", Content: turn.Content{text("look"), text("[image]"), text("[document]")}},
				{Role: "assistant", Content: turn.Content{toolUse("s1", "Screenshot", nil)}},
				{Role: "user", Content: turn.Content{
					resultOf("s1", text("[image]"), text("a caption"), text("[search_result block]")),
					text("cached"), text("cited"),
				}},
			},
		},
		{
			name: "thinking dropped, blank text dropped, same roles merged",
			in: []view.Message{
				user(1, text("one")),
				user(1, text("  \n")),
				user(1, text("two")),
				assistant(1, thinking("hmm"), text("three")),
				assistant(2, turn.Block{Type: turn.BlockRedactedThinking, Data: "xx"}),
				assistant(3, text("four")),
			},
			want: []llm.Message{
				{Role: "user", Content: turn.Content{text("one"), text("two")}},
				{Role: "assistant", Content: turn.Content{text("three"), text("four")}},
			},
		},
		{
			name: "a call without result gets a stand-in, results first",
			in: []view.Message{
				user(1, text("edit both")),
				assistant(1, toolUse("e1", "Edit", map[string]any{"file_path": "/a"}), toolUse("e2", "Edit", map[string]any{"file_path": "/b"})),
				user(2, text("note first"), toolResult("e2", "ok b")),
				assistant(2, toolUse("r1", "Read", map[string]any{"file_path": "/c"})),
			},
			want: []llm.Message{
				{Role: "user", Content: turn.Content{text("edit both")}},
				{Role: "assistant", Content: turn.Content{
					toolUse("e1", "Edit", map[string]any{"file_path": "/a"}), toolUse("e2", "Edit", map[string]any{"file_path": "/b"}),
				}},
				{Role: "user", Content: turn.Content{toolResult("e2", "ok b"), resultOf("e1", text(compaction.MissingResult)), text("note first")}},
				{Role: "assistant", Content: turn.Content{toolUse("r1", "Read", map[string]any{"file_path": "/c"})}},
				{Role: "user", Content: turn.Content{resultOf("r1", text(compaction.MissingResult))}},
			},
		},
		{
			name: "a result two messages after its call is orphaned",
			in: []view.Message{
				user(1, text("start")),
				assistant(1, toolUse("x", "Bash", map[string]any{"command": "ls"})),
				user(2, toolResult("x", "a b")),
				assistant(2, text("listed")),
				user(3, toolResult("x", "a b again")),
			},
			want: []llm.Message{
				{Role: "user", Content: turn.Content{text("start")}},
				{Role: "assistant", Content: turn.Content{toolUse("x", "Bash", map[string]any{"command": "ls"})}},
				{Role: "user", Content: turn.Content{toolResult("x", "a b")}},
				{Role: "assistant", Content: turn.Content{text("listed")}},
				{Role: "user", Content: turn.Content{text(compaction.OrphanResultLead + "a b again")}},
			},
		},
		{
			name: "tool blocks in the wrong role become text",
			in: []view.Message{
				user(1, toolUse("u", "Bash", map[string]any{"command": "pwd"})),
				assistant(1, toolResult("u", "/home")),
			},
			want: []llm.Message{
				{Role: "user", Content: turn.Content{text(`[Tool call Bash: {"command":"pwd"}]`)}},
				{Role: "assistant", Content: turn.Content{text(compaction.OrphanResultLead + "/home")}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := cloneMessages(tt.in)
			got := compaction.RequestMessages(tt.in, "")
			requireValidRequest(t, got)
			instr(t, got)
			require.Equal(t, in, tt.in, "the input is not changed")

			// The instruction block ends the request: merged into a last user
			// message, or in a message of its own.
			last := got[len(got)-1].Content
			want := cloneLLM(tt.want)
			if n := len(want); n > 0 && want[n-1].Role == "user" {
				want[n-1].Content = append(want[n-1].Content, last[len(last)-1])
			} else {
				want = append(want, llm.Message{Role: "user", Content: turn.Content{last[len(last)-1]}})
			}
			require.Equal(t, want, got)
		})
	}
}

func cloneLLM(msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		out[i] = llm.Message{Role: m.Role, Content: append(turn.Content(nil), m.Content...)}
	}
	return out
}

func cloneMessages(msgs []view.Message) []view.Message {
	out := make([]view.Message, len(msgs))
	for i, m := range msgs {
		m.Content = append(turn.Content(nil), m.Content...)
		out[i] = m
	}
	return out
}

// Whatever suffix of a real session is summarized, the request is valid.
func TestRequestMessagesFixtures(t *testing.T) {
	t.Parallel()

	for _, fc := range fixtureContexts(t) {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			for i := range fc.messages {
				requireValidRequest(t, compaction.RequestMessages(fc.messages[i:], "keep it short"))
			}
			// Dropping round groups from the front, as the retries do.
			groups := compaction.GroupRounds(fc.messages)
			for g := range groups {
				var msgs []view.Message
				for _, gr := range groups[g:] {
					msgs = append(msgs, gr.Messages...)
				}
				requireValidRequest(t, compaction.RequestMessages(msgs, ""))
			}
		})
	}
}
