package llm_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func txt(s string) turn.Block { return turn.Block{Type: turn.BlockText, Text: s} }

func use(id string) turn.Block {
	return turn.Block{Type: turn.BlockToolUse, ID: id, Name: "read", Input: json.RawMessage(`{"path":"a"}`)}
}

func toolResult(id, text string) turn.Block {
	return turn.Block{Type: turn.BlockToolResult, ToolUseID: id, Content: &turn.Content{txt(text)}}
}

func TestMergeConsecutive(t *testing.T) {
	t.Parallel()
	in := []llm.Message{
		{Role: "user", Content: turn.Content{txt("go")}},
		{Role: "assistant", Content: turn.Content{use("1"), use("2")}},
		{Role: "user", Content: turn.Content{toolResult("2", "b")}},
		{Role: "user", Content: turn.Content{txt("also")}},
		{Role: "user", Content: turn.Content{toolResult("1", "a")}},
		{Role: "assistant", Content: turn.Content{txt("done")}},
	}
	before := in[2].Content[0]
	got := llm.MergeConsecutive(in)
	require.Equal(t, []llm.Message{
		{Role: "user", Content: turn.Content{txt("go")}},
		{Role: "assistant", Content: turn.Content{use("1"), use("2")}},
		{Role: "user", Content: turn.Content{toolResult("2", "b"), toolResult("1", "a"), txt("also")}},
		{Role: "assistant", Content: turn.Content{txt("done")}},
	}, got)
	require.Equal(t, before, in[2].Content[0], "the input is not modified")
	require.Len(t, in, 6)
	require.Empty(t, llm.MergeConsecutive(nil))
}

func TestPairTools(t *testing.T) {
	t.Parallel()
	in := []llm.Message{
		// A result whose call was cut off.
		{Role: "user", Content: turn.Content{toolResult("0", "old output"), txt("continue")}},
		{Role: "assistant", Content: turn.Content{use("1")}},
		{Role: "user", Content: turn.Content{toolResult("1", "a")}},
		// A call the transcript ends on.
		{Role: "assistant", Content: turn.Content{txt("next"), use("2")}},
	}
	got := llm.Normalize(in)
	require.Equal(t, []llm.Message{
		{Role: "user", Content: turn.Content{txt("[result of an earlier tool call]\nold output"), txt("continue")}},
		{Role: "assistant", Content: turn.Content{use("1")}},
		{Role: "user", Content: turn.Content{toolResult("1", "a")}},
		{Role: "assistant", Content: turn.Content{txt("next"), txt(`[tool call read {"path":"a"}, without a result]`)}},
	}, got)
	require.Equal(t, turn.BlockToolResult, in[0].Content[0].Type, "the input is not modified")
	require.Equal(t, turn.BlockToolUse, in[3].Content[1].Type, "the input is not modified")
}
