package assembly_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func thinking(s string) turn.Block {
	return turn.Block{Type: turn.BlockThinking, Thinking: s, Signature: "sig-" + s}
}

// cutMessages is a small conversation with thinking and a tool call.
func cutMessages() []view.Message {
	return []view.Message{
		stored("u1", 0, "user", text("read /a")),
		stored("a1", 1, "assistant", thinking("I should read it"), toolUse("t1", "Read")),
		stored("u2", 2, "user", toolResult("t1", "contents of /a")),
		stored("a2", 3, "assistant", turn.Block{Type: turn.BlockRedactedThinking, Data: "opaque"}, text("Done.")),
		stored("a3", 4, "assistant", thinking("alone")),
	}
}

// TestCutsRender: each kind of cut changes its block and nothing else:
// a cleared result reads ClearedText, a cleared input is {}, dropped
// thinking (redacted too) is gone, and a message of thinking alone keeps it.
func TestCutsRender(t *testing.T) {
	t.Parallel()
	msgs := cutMessages()
	plain := assembly.Render(assembly.Input{Messages: msgs})
	c := assembly.Render(assembly.Input{Messages: msgs, Cuts: assembly.Cuts{
		ToolUses: map[string]bool{"t1": true},
		Inputs:   map[string]bool{"t1": true},
		Thinking: map[string]bool{"a1": true, "a2": true, "a3": true},
	}})
	require.Equal(t, plain.Messages[0], c.Messages[0])
	require.Equal(t, turn.Content{{Type: turn.BlockToolUse, ID: "t1", Name: "Read", Input: json.RawMessage(`{}`)}}, c.Messages[1].Content)
	require.Equal(t, turn.Content{text(assembly.ClearedText)}, *c.Messages[2].Content[0].Content)
	require.Equal(t, turn.Content{text("Done.")}, c.Messages[3].Content)
	require.Equal(t, plain.Messages[4], c.Messages[4], "a message of thinking alone keeps it")
	require.Less(t, c.Tokens, plain.Tokens)
	require.Equal(t, "I should read it", msgs[1].Content[0].Thinking, "the input is not changed")
	require.JSONEq(t, `{"path":"/a"}`, string(msgs[1].Content[1].Input))

	// Inputs alone: the result stays.
	inputs := assembly.Render(assembly.Input{Messages: msgs, Cuts: assembly.Cuts{Inputs: map[string]bool{"t1": true}}})
	require.Equal(t, plain.Messages[2], inputs.Messages[2])
	require.JSONEq(t, `{}`, string(inputs.Messages[1].Content[1].Input))

	// Shown applies the same cuts.
	cuts := assembly.Cuts{ToolUses: map[string]bool{"t1": true}, Thinking: map[string]bool{"a1": true}}
	shown := assembly.Shown(msgs, nil, cuts)
	rendered := assembly.Render(assembly.Input{Messages: msgs, Cuts: cuts})
	for i := range shown {
		require.Equal(t, rendered.Messages[i].Content, shown[i].Content, "message %d", i)
	}
}

// TestCutsChangeTheMemoVariant: a message rendered once through its memo
// renders again with a cut recorded since, not from the memo.
func TestCutsChangeTheMemoVariant(t *testing.T) {
	t.Parallel()
	msgs := cutMessages()
	for i := range msgs {
		msgs[i].Memo = &view.Memo{}
	}
	before := assembly.Render(assembly.Input{Messages: msgs})
	for _, cuts := range []assembly.Cuts{
		{Inputs: map[string]bool{"t1": true}},
		{Inputs: map[string]bool{"t1": true}, ToolUses: map[string]bool{"t1": true}},
		{Inputs: map[string]bool{"t1": true}, ToolUses: map[string]bool{"t1": true}, Thinking: map[string]bool{"a1": true, "a2": true}},
	} {
		got := assembly.Render(assembly.Input{Messages: msgs, Cuts: cuts})
		fresh := assembly.Render(assembly.Input{Messages: cutMessages(), Cuts: cuts})
		require.Equal(t, fresh.Messages, got.Messages)
		require.Equal(t, fresh.Tokens, got.Tokens)
		require.NotEqual(t, before.Messages, got.Messages)
	}
}
