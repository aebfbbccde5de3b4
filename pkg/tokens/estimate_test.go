package tokens_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func textContent(s string) *turn.Content {
	c := turn.Content{{Type: turn.BlockText, Text: s}}
	return &c
}

func TestEstimateBlock(t *testing.T) {
	t.Parallel()

	jsonObject := `{"files":["a.go","b.go"],"count":2}` // 35 bytes: 70 quarters → 18 tokens
	require.Len(t, jsonObject, 35)

	tests := []struct {
		name  string
		block turn.Block
		want  int64
	}{
		{"empty text", turn.Block{Type: turn.BlockText}, 0},
		{"text exact", turn.Block{Type: turn.BlockText, Text: "abcdefgh"}, 2},
		{"text rounds up", turn.Block{Type: turn.BlockText, Text: "abcdefghi"}, 3},
		{"text one byte", turn.Block{Type: turn.BlockText, Text: "a"}, 1},
		{"text counts utf-8 bytes", turn.Block{Type: turn.BlockText, Text: "ééé"}, 2}, // 6 bytes
		{"thinking ignores signature", turn.Block{Type: turn.BlockThinking, Thinking: "12345678", Signature: strings.Repeat("s", 400)}, 2},
		{"redacted thinking data", turn.Block{Type: turn.BlockRedactedThinking, Data: strings.Repeat("d", 10)}, 3},
		{
			// name 4 bytes (1 token) + input 12 bytes / 2 (6 tokens)
			"tool_use name as text and input as json",
			turn.Block{Type: turn.BlockToolUse, ID: "toolu_1", Name: "Bash", Input: json.RawMessage(`{"cmd":"ls"}`)},
			7,
		},
		{
			// 2 quarters for the name + 2·3 quarters of input = 8 quarters: one
			// rounding per block, not one per part.
			"tool_use rounds once",
			turn.Block{Type: turn.BlockToolUse, Name: "ab", Input: json.RawMessage(`[1]`)},
			2,
		},
		{"tool_result plain string", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t", Content: textContent("hello world!")}, 3},
		{"tool_result json object string", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t", Content: textContent(jsonObject)}, 18},
		{"tool_result json array with spaces", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t", Content: textContent(" [1, 2] \n")}, 5},
		{"tool_result json-looking but invalid", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t", Content: textContent(`{not json}`)}, 3},
		{"tool_result json scalar is text", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t", Content: textContent(`"quoted string"`)}, 4},
		{"tool_result without content", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t"}, 0},
		{
			"tool_result blocks are summed",
			turn.Block{Type: turn.BlockToolResult, ToolUseID: "t", Content: &turn.Content{
				{Type: turn.BlockText, Text: "abcde"}, // 2
				{Type: turn.BlockImage, Source: json.RawMessage(`{"type":"base64"}`)},
				{Type: turn.BlockText, Text: "[]"}, // json: 1
			}},
			2 + 2000 + 1,
		},
		{"image", turn.Block{Type: turn.BlockImage, Source: json.RawMessage(`{"type":"base64","data":"` + strings.Repeat("A", 10000) + `"}`)}, 2000},
		{"document", turn.Block{Type: turn.BlockDocument}, 2000},
		{"unknown type counts its text", turn.Block{Type: "server_tool_use", Name: "web", Input: json.RawMessage(`{}`)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, tokens.EstimateBlock(tt.block))
		})
	}
}

func TestEstimateContentAndMessage(t *testing.T) {
	t.Parallel()

	var c turn.Content
	require.NoError(t, json.Unmarshal([]byte(`[
		{"type":"text","text":"abcdefghi"},
		{"type":"tool_use","id":"x","name":"Read","input":{"file_path":"/a"}},
		{"type":"tool_result","tool_use_id":"x","content":"{\"ok\":true}"}
	]`), &c))
	// text 9 bytes → 3; tool_use "Read" 4 quarters + 18 bytes·2 = 40 quarters → 10;
	// tool_result string {"ok":true} is 11 bytes of JSON → 6.
	require.Equal(t, int64(3+10+6), tokens.EstimateContent(c))
	require.Equal(t, int64(19), tokens.EstimateMessage(turn.Message{UUID: "u", Role: "assistant", Content: c}))
	require.Zero(t, tokens.EstimateContent(nil))

	// A string message content is one text block.
	var s turn.Content
	require.NoError(t, json.Unmarshal([]byte(`"twelve bytes"`), &s))
	require.Equal(t, int64(3), tokens.EstimateContent(s))
}

func BenchmarkEstimateMessage(b *testing.B) {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200)
	jsonResult := `{"results":[` + strings.Repeat(`{"path":"pkg/a.go","line":12},`, 100) + `{"path":"z","line":1}]}`
	msg := turn.Message{UUID: "u", Role: "user", Content: turn.Content{
		{Type: turn.BlockText, Text: long},
		{Type: turn.BlockThinking, Thinking: long, Signature: "sig"},
		{Type: turn.BlockToolUse, ID: "t1", Name: "Grep", Input: json.RawMessage(`{"pattern":"func main","path":"."}`)},
		{Type: turn.BlockToolResult, ToolUseID: "t1", Content: textContent(long)},
		{Type: turn.BlockToolResult, ToolUseID: "t2", Content: textContent(jsonResult)},
		{Type: turn.BlockImage},
	}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if tokens.EstimateMessage(msg) == 0 {
			b.Fatal("zero estimate")
		}
	}
}
