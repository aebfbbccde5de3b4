package assembly_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func TestRenderBytes(t *testing.T) {
	t.Parallel()

	failed := toolResult("t2", "exit 1 <stderr> & more")
	failed.IsError = true
	in := assembly.Input{
		System: []turn.Block{text("be brief")},
		Head: []view.Message{
			made("user", text("summary <of> earlier work")),
		},
		Messages: []view.Message{
			stored("u1", 10, "assistant", toolUse("t1", "Read"), toolUse("t2", "Bash")),
			stored("u2", 11, "user", toolResult("t1", "file body"), failed),
		},
		Cleared: map[string]bool{"t2": true},
	}
	c := assembly.Render(in)

	data, err := c.Encode()
	require.NoError(t, err)
	// tokens: system 2 + head 7 + two tool_use blocks 8 each + "file body" 3 + cleared 9.
	require.JSONEq(t, `{
		"system":[{"type":"text","text":"be brief"}],
		"messages":[
			{"role":"user","content":[{"type":"text","text":"summary <of> earlier work"}]},
			{"role":"assistant","content":[
				{"type":"tool_use","id":"t1","name":"Read","input":{"path":"/a"}},
				{"type":"tool_use","id":"t2","name":"Bash","input":{"path":"/a"}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"file body"}]},
				{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"[Old tool result content cleared]"}],"is_error":true}]}
		],
		"uuids":["","u1","u2"],
		"breakpoints":[{"message":-1,"block":0},{"message":0,"block":0},{"message":2,"block":1}],
		"tokens":37
	}`, string(data))
	// Nothing is HTML-escaped.
	require.Contains(t, string(data), "summary <of> earlier work")
	require.NotContains(t, string(data), `\u003c`)

	// The exact wire bytes of a message: role and content, nothing else.
	prefix := string(c.Prefix())
	require.True(t, strings.HasPrefix(prefix,
		`{"type":"text","text":"be brief"}{"role":"user","content":[{"type":"text","text":"summary <of> earlier work"}]}{"role":"assistant",`))
	require.True(t, strings.HasSuffix(prefix,
		`{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"[Old tool result content cleared]"}],"is_error":true}]}`))
	require.NotContains(t, prefix, "uuid")
}

func TestRenderTokens(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name string
		in   assembly.Input
		want int64
	}{
		{"empty", assembly.Input{}, 0},
		// 8 bytes of system text (2) + 9 bytes of head text (3).
		{"system and head", assembly.Input{
			System: []turn.Block{text("12345678")},
			Head:   []view.Message{made("user", text("123456789"))},
		}, 5},
		// A 4,000-byte result is 1,000 tokens; once cleared its 33 bytes are 9.
		{"result kept", assembly.Input{
			Messages: []view.Message{stored("u", 0, "user", toolResult("t", strings.Repeat("x", 4000)))},
		}, 1000},
		{"result cleared", assembly.Input{
			Messages: []view.Message{stored("u", 0, "user", toolResult("t", strings.Repeat("x", 4000)))},
			Cleared:  map[string]bool{"t": true},
		}, 9},
		// The stored estimate on view.Message is not trusted: what is rendered counts.
		{"stale stored estimate ignored", assembly.Input{
			Messages: []view.Message{{UUID: "u", Role: "user", Content: turn.Content{text("abcd")}, Tokens: 999}},
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, assembly.Render(tt.in).Tokens)
		})
	}
}

func TestRenderHeadIsNeverCleared(t *testing.T) {
	t.Parallel()

	in := assembly.Input{
		Head: []view.Message{
			made("assistant", toolUse("t1", "Read")),
			made("user", toolResult("t1", "restored file")),
		},
		Messages: []view.Message{stored("u1", 3, "user", toolResult("t1", "again"))},
		Cleared:  map[string]bool{"t1": true},
	}
	c := assembly.Render(in)
	require.Equal(t, "restored file", (*c.Messages[1].Content[0].Content)[0].Text)
	require.Equal(t, assembly.ClearedText, (*c.Messages[2].Content[0].Content)[0].Text)
	require.Equal(t, []string{"", "", "u1"}, c.UUIDs)
}

func TestRenderDropsStoredCacheControlAndKeepsInput(t *testing.T) {
	t.Parallel()

	mark := json.RawMessage(`{"type":"ephemeral"}`)
	sys := text("system")
	sys.CacheControl = mark
	inner := text("nested")
	inner.CacheControl = mark
	nested := turn.Content{inner}
	res := turn.Block{Type: turn.BlockToolResult, ToolUseID: "t1", Content: &nested, CacheControl: mark}
	cleared := toolResult("t2", "old")
	headText := text("summary")
	headText.CacheControl = mark

	in := assembly.Input{
		System:   []turn.Block{sys},
		Head:     []view.Message{made("user", headText)},
		Messages: []view.Message{stored("u1", 0, "user", res, cleared)},
		Cleared:  map[string]bool{"t2": true},
	}
	before, err := json.Marshal(in)
	require.NoError(t, err)

	c := assembly.Render(in)
	data, err := c.Encode()
	require.NoError(t, err)
	require.NotContains(t, string(data), "cache_control")

	after, err := json.Marshal(in)
	require.NoError(t, err)
	require.Equal(t, string(before), string(after), "Render changed its input")
	require.Equal(t, mark, (*in.Messages[0].Content[0].Content)[0].CacheControl)
	require.Equal(t, "old", (*in.Messages[0].Content[1].Content)[0].Text)
}

func TestRenderWireHasOnlyRoleAndContent(t *testing.T) {
	t.Parallel()

	m := stored("u1", 0, "assistant", text("hi"))
	c := assembly.Render(assembly.Input{Messages: []view.Message{m}})
	data, err := turn.Marshal(c.Messages[0])
	require.NoError(t, err)
	var fields map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &fields))
	require.Len(t, fields, 2)
	require.Contains(t, fields, "role")
	require.Contains(t, fields, "content")
}

func TestBreakpoints(t *testing.T) {
	t.Parallel()

	think := turn.Block{Type: turn.BlockThinking, Thinking: "hmm", Signature: "sig"}
	tests := []struct {
		name string
		in   assembly.Input
		want []assembly.Breakpoint
	}{
		{"nothing", assembly.Input{}, []assembly.Breakpoint{}},
		{"messages only", assembly.Input{
			Messages: []view.Message{stored("a", 0, "user", text("q")), stored("b", 1, "assistant", text("x"), text("y"))},
		}, []assembly.Breakpoint{{Message: 1, Block: 1}}},
		{"system, head and messages", assembly.Input{
			System:   []turn.Block{text("a"), text("b")},
			Head:     []view.Message{made("user", text("boundary")), made("user", text("summary"), text("files"))},
			Messages: []view.Message{stored("a", 0, "user", text("q")), stored("b", 1, "assistant", text("x"))},
		}, []assembly.Breakpoint{{Message: -1, Block: 1}, {Message: 1, Block: 1}, {Message: 3, Block: 0}}},
		{"head only: one breakpoint, not two", assembly.Input{
			Head: []view.Message{made("user", text("summary"))},
		}, []assembly.Breakpoint{{Message: 0, Block: 0}}},
		{"thinking and empty text are skipped", assembly.Input{
			System:   []turn.Block{text("s"), text("")},
			Messages: []view.Message{stored("a", 0, "user", text("q")), stored("b", 1, "assistant", text("x"), think)},
		}, []assembly.Breakpoint{{Message: -1, Block: 0}, {Message: 1, Block: 0}}},
		{"empty last message falls back to the one before", assembly.Input{
			Messages: []view.Message{stored("a", 0, "user", text("q")), stored("b", 1, "assistant")},
		}, []assembly.Breakpoint{{Message: 0, Block: 0}}},
		{"tool result can carry the marker", assembly.Input{
			Messages: []view.Message{stored("a", 0, "user", toolResult("t", "out"))},
			Cleared:  map[string]bool{"t": true},
		}, []assembly.Breakpoint{{Message: 0, Block: 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := assembly.Render(tt.in).Breakpoints
			require.Equal(t, tt.want, got)
			for _, bp := range got {
				require.Equal(t, bp.Message == assembly.SystemMessage, bp.InSystem())
			}
		})
	}
}

func TestEncodeIsStable(t *testing.T) {
	t.Parallel()

	// A zero Context and a rendered empty one write the same bytes.
	zero, err := assembly.Context{}.Encode()
	require.NoError(t, err)
	empty, err := assembly.Render(assembly.Input{}).Encode()
	require.NoError(t, err)
	require.Equal(t, `{"system":[],"messages":[],"uuids":[],"breakpoints":[],"tokens":0}`, string(zero))
	require.Equal(t, zero, empty)

	// Empty stored content renders as an empty array, never null.
	c := assembly.Render(assembly.Input{Messages: []view.Message{{UUID: "u", Role: "user"}}})
	data, err := c.Encode()
	require.NoError(t, err)
	require.Contains(t, string(data), `{"role":"user","content":[]}`)
}

func TestEncodeReportsInvalidRawJSON(t *testing.T) {
	t.Parallel()

	bad := turn.Block{Type: turn.BlockToolUse, ID: "t", Name: "Read", Input: json.RawMessage(`{not json`)}
	c := assembly.Render(assembly.Input{Messages: []view.Message{stored("u", 0, "assistant", bad)}})
	_, err := c.Encode()
	require.ErrorContains(t, err, "assembly: encode context")
	require.NotEmpty(t, c.Prefix())
}

func TestIsPrefix(t *testing.T) {
	t.Parallel()

	tests := []struct {
		prev, next string
		want       bool
	}{
		{"", "", true},
		{"", "abc", true},
		{"abc", "abc", true},
		{"abc", "abcdef", true},
		{"abd", "abcdef", false},
		{"abcdef", "abc", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, assembly.IsPrefix([]byte(tt.prev), []byte(tt.next)), "%q in %q", tt.prev, tt.next)
	}
}

func TestShownMatchesRender(t *testing.T) {
	t.Parallel()
	inner := turn.Content{{Type: turn.BlockText, Text: strings.Repeat("x", 4_000)}}
	msgs := []view.Message{
		{UUID: "a", Position: 0, Role: "assistant", Content: turn.Content{{Type: turn.BlockToolUse, ID: "t1", Name: "Read", Input: json.RawMessage(`{}`)}}},
		{UUID: "u", Position: 1, Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: "t1", Content: &inner}}, Tokens: 1_000},
	}
	cleared := map[string]bool{"t1": true}
	shown := assembly.Shown(msgs, cleared, assembly.Cuts{})
	rendered := assembly.Render(assembly.Input{Messages: msgs, Cleared: cleared})
	for i := range shown {
		require.Equal(t, rendered.Messages[i].Content, shown[i].Content)
	}
	require.Equal(t, rendered.Tokens, shown[0].Tokens+shown[1].Tokens)
	require.Less(t, shown[1].Tokens, int64(1_000))
	require.Equal(t, strings.Repeat("x", 4_000), (*msgs[1].Content[0].Content)[0].Text, "the input is not changed")
}

// TestBesideBlocksFollowTheirMessage: the blocks recorded beside a stored
// message (recalled memories) are rendered after its own, counted in the
// estimate, and change nothing else; a later message only appends.
func TestBesideBlocksFollowTheirMessage(t *testing.T) {
	t.Parallel()
	reminder := text("<system-reminder>\nA memory\n</system-reminder>")
	reminder.CacheControl = json.RawMessage(`{"type":"ephemeral"}`)
	in := assembly.Input{
		Head:     []view.Message{made("user", text("summary"))},
		Messages: []view.Message{stored("u1", 3, "user", text("can you migrate staging?")), stored("a1", 4, "assistant", text("On it."))},
		Beside:   map[string]turn.Content{"u1": {reminder}, "": {text("never rendered")}},
	}
	c := assembly.Render(in)
	require.Equal(t, turn.Content{text("can you migrate staging?"), text(reminder.Text)}, c.Messages[1].Content, "after its own blocks, without cache_control")
	require.Equal(t, turn.Content{text("summary")}, c.Messages[0].Content, "head messages carry nothing beside them")
	without := in
	without.Beside = nil
	require.Greater(t, c.Tokens, assembly.Render(without).Tokens)

	in.Messages = append(in.Messages, stored("u2", 5, "user", text("thanks")))
	require.True(t, assembly.IsPrefix(c.Prefix(), assembly.Render(in).Prefix()))
}

// TestRenderPausesBetweenBatchesOfWork: a render with Pause set calls it
// after every 500 messages rendered and every 500 encoded, and only for
// work done: a second render of messages whose memos hold their rendering
// and encoding does not pause. The pauses change nothing in the output.
func TestRenderPausesBetweenBatchesOfWork(t *testing.T) {
	t.Parallel()
	msgs := make([]view.Message, 1_200)
	for i := range msgs {
		msgs[i] = stored(fmt.Sprintf("u%d", i), int64(i), "user", text(fmt.Sprintf("message %d", i)))
		msgs[i].Memo = &view.Memo{}
	}
	pauses := 0
	in := assembly.Input{Messages: msgs, Pause: func() { pauses++ }}

	first := assembly.Render(in)
	_, parts, err := first.EncodeParts()
	require.NoError(t, err)
	require.Equal(t, 48, pauses, "a pause every 50 messages: 24 rendering 1,200 messages, 24 encoding them")

	plain := assembly.Render(assembly.Input{Messages: msgs})
	_, plainParts, err := plain.EncodeParts()
	require.NoError(t, err)
	require.Equal(t, plainParts, parts, "pausing changes nothing in the output")

	pauses = 0
	again := assembly.Render(in)
	_, _, err = again.EncodeParts()
	require.NoError(t, err)
	require.Zero(t, pauses, "what the memos hold costs no pause")
}
