package turn_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func TestMarshalDoesNotEscapeHTML(t *testing.T) {
	t.Parallel()

	const input = `{"command":"a && b > c"}`
	const text = "<b>bold</b> & co"
	data := []byte(`{"schema":"mnemos.turn.v1","event_id":"e","tenant_id":"t","session_id":"s","seq":1,` +
		`"input_messages":[{"uuid":"u1","role":"user","content":"` + text + `"}],` +
		`"response":{"uuid":"u2","role":"assistant","content":[` +
		`{"type":"tool_use","id":"toolu_1","name":"Bash","input":` + input + `}]},` +
		`"occurred_at":"2026-01-02T03:04:05Z"}`)

	ev, err := turn.Decode(data, turn.DecodeOptions{})
	require.NoError(t, err)
	require.Equal(t, input, string(ev.Response.Content[0].Input))

	out, err := turn.Marshal(ev)
	require.NoError(t, err)
	require.Contains(t, string(out), `"input":`+input)
	require.Contains(t, string(out), `"text":"`+text+`"`)
	require.NotContains(t, string(out), `\u00`)
	require.False(t, strings.HasSuffix(string(out), "\n"), "no trailing newline")

	again, err := turn.Decode(out, turn.DecodeOptions{})
	require.NoError(t, err)
	require.Equal(t, input, string(again.Response.Content[0].Input), "tool input byte for byte")
	require.Equal(t, text, again.InputMessages[0].Content[0].Text)
	require.Equal(t, ev, again)

	// Content and Block marshal the same way on their own, and under
	// json.Marshal their output is only HTML-escaped by the outer encoder.
	content, err := turn.Marshal(ev.Response.Content)
	require.NoError(t, err)
	require.Equal(t, `[{"type":"tool_use","id":"toolu_1","name":"Bash","input":`+input+`}]`, string(content))
	viaMethod, err := ev.Response.Content.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(content), string(viaMethod))
	block, err := ev.Response.Content[0].MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, string(content[1:len(content)-1]), string(block))
	escaped, err := json.Marshal(ev.Response.Content)
	require.NoError(t, err)
	require.Contains(t, string(escaped), `a \u0026\u0026 b \u003e c`)
}

func TestMarshalPlainValues(t *testing.T) {
	t.Parallel()

	out, err := turn.Marshal(map[string]string{"k": "<&>"})
	require.NoError(t, err)
	require.Equal(t, `{"k":"<&>"}`, string(out))

	_, err = turn.Marshal(func() {})
	require.Error(t, err)

	out, err = turn.Marshal(turn.Content(nil))
	require.NoError(t, err)
	require.Equal(t, `[]`, string(out), "nil content is an empty array, never null")
}

func TestBlockMarshalJSON(t *testing.T) {
	t.Parallel()

	content := turn.Content{{Type: turn.BlockText, Text: "x"}}
	empty := turn.Content{}
	tests := []struct {
		name  string
		block turn.Block
		want  string
	}{
		{"text empty", turn.Block{Type: turn.BlockText}, `{"type":"text","text":""}`},
		{
			"text with citations and cache_control",
			turn.Block{Type: turn.BlockText, Text: "hi", Citations: json.RawMessage(`[{"cited_text":"a"}]`), CacheControl: json.RawMessage(`{"type":"ephemeral"}`)},
			`{"type":"text","text":"hi","citations":[{"cited_text":"a"}],"cache_control":{"type":"ephemeral"}}`,
		},
		{"thinking empty", turn.Block{Type: turn.BlockThinking}, `{"type":"thinking","thinking":"","signature":""}`},
		{"thinking", turn.Block{Type: turn.BlockThinking, Thinking: "hmm", Signature: "sig"}, `{"type":"thinking","thinking":"hmm","signature":"sig"}`},
		{"redacted_thinking empty", turn.Block{Type: turn.BlockRedactedThinking}, `{"type":"redacted_thinking","data":""}`},
		{"tool_use empty", turn.Block{Type: turn.BlockToolUse}, `{"type":"tool_use","id":"","name":"","input":{}}`},
		{
			"tool_use",
			turn.Block{Type: turn.BlockToolUse, ID: "toolu_1", Name: "Bash", Input: json.RawMessage(`{"a":[1, 2]}`)},
			`{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"a":[1,2]}}`,
		},
		{"tool_result bare", turn.Block{Type: turn.BlockToolResult}, `{"type":"tool_result","tool_use_id":""}`},
		{"tool_result is_error false left out", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t1", Content: &content}, `{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"x"}]}`},
		{"tool_result is_error true", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t1", IsError: true}, `{"type":"tool_result","tool_use_id":"t1","is_error":true}`},
		{"tool_result empty content set", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t1", Content: &empty}, `{"type":"tool_result","tool_use_id":"t1","content":[]}`},
		{"image without source", turn.Block{Type: turn.BlockImage}, `{"type":"image","source":{}}`},
		{
			"image",
			turn.Block{Type: turn.BlockImage, Source: json.RawMessage(`{"type":"base64","media_type":"image/png","data":"iVBO"}`)},
			`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}`,
		},
		{
			"document with title and context",
			turn.Block{Type: turn.BlockDocument, Source: json.RawMessage(`{"type":"text","media_type":"text/plain","data":"d"}`), Title: "T", Context: "C"},
			`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"},"title":"T","context":"C"}`,
		},
		{
			// Fields of another type are written when set, so nothing decoded is lost.
			"text carrying a stray id",
			turn.Block{Type: turn.BlockText, ID: "x"},
			`{"type":"text","text":"","id":"x"}`,
		},
		{"unknown type writes what is set", turn.Block{Type: "future", Name: "n"}, `{"type":"future","name":"n"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := turn.Marshal(tt.block)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))
		})
	}

	t.Run("invalid raw json is an error", func(t *testing.T) {
		t.Parallel()
		_, err := turn.Marshal(turn.Block{Type: turn.BlockToolUse, Input: json.RawMessage(`{"a":`)})
		require.Error(t, err)
	})
}

// roundTripEvents holds valid events that together use every block type and
// every optional field, in the shapes that used to break a round trip.
var roundTripEvents = map[string]string{
	"empty text and thinking": `{"schema":"mnemos.turn.v1","event_id":"e1","tenant_id":"t","session_id":"s","seq":1,
		"input_messages":[{"uuid":"u1","role":"user","content":[{"type":"text","text":""}]}],
		"response":{"uuid":"u2","role":"assistant","stop_reason":"end_turn","content":[
			{"type":"thinking","thinking":""},
			{"type":"text","text":""}]},
		"usage":{"input_tokens":0,"output_tokens":0},
		"occurred_at":"2026-01-02T03:04:05Z"}`,
	"every block type": `{"schema":"mnemos.turn.v1","event_id":"e2","tenant_id":"t","session_id":"s","seq":2,
		"agent_id":"explore","memory_scope":{"user":"u","project":"p","local":"l","agent":"a"},
		"model":"claude-opus-4-1","context_window":1000,"max_output_tokens":1,
		"input_messages":[
			{"uuid":"u1","role":"user","content":[
				{"type":"text","text":"see <this> & that","citations":[{"type":"char_location","cited_text":"x"}],"cache_control":{"type":"ephemeral"}},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},
				{"type":"document","source":{"type":"text","media_type":"text/plain","data":"a & b"},"title":"notes","context":"ctx"}]},
			{"uuid":"u2","role":"assistant","content":[
				{"type":"redacted_thinking","data":"EmwKAhgB"},
				{"type":"thinking","thinking":"let me think","signature":"c2ln"},
				{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"a && b > c","env":{"X":"<1>"},"n":[1,2.5e3,null,true]}}]},
			{"uuid":"u3","role":"user","content":[
				{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":"exit 1: <stderr>"},
				{"type":"tool_result","tool_use_id":"toolu_2","content":[
					{"type":"text","text":"shot"},
					{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/"}}]},
				{"type":"tool_result","tool_use_id":"toolu_3","content":[]},
				{"type":"tool_result","tool_use_id":"toolu_4","content":""},
				{"type":"tool_result","tool_use_id":"toolu_5"}]}],
		"response":{"uuid":"u4","role":"assistant","stop_reason":"tool_use","content":[
			{"type":"tool_use","id":"toolu_6","name":"Read","input":{}}]},
		"usage":{"input_tokens":1,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens":4},
		"occurred_at":"2026-11-22T10:00:00.123456789Z"}`,
	"whitespace in raw json and an offset time": `{
		"schema": "mnemos.turn.v1", "event_id": "e3", "session_id": "s", "seq": 3,
		"memory_scope": {},
		"input_messages": [],
		"response": {"uuid": "u1", "role": "assistant", "stop_reason": null, "content": [
			{"type": "tool_use", "id": "toolu_1", "name": "Edit",
			 "input": {
				"path" : "a.go",
				"new"  : "x\u2028y \u003c"
			 }}]},
		"occurred_at": "2026-11-22T12:00:00+02:00"}`,
	"string content with escapes": `{"schema":"mnemos.turn.v1","event_id":"e4","tenant_id":"t","session_id":"s","seq":4,
		"input_messages":[{"uuid":"u1","role":"user","content":"tab\tquote\" bell\u0007 line\u2028 emoji 🙂 \ud83d\ude42 lone \udc00"}],
		"occurred_at":"2026-01-02T03:04:05-00:00"}`,
	"exact duplicate dropped": `{"schema":"mnemos.turn.v1","event_id":"e5","tenant_id":"t","session_id":"s","seq":5,
		"input_messages":[
			{"uuid":"u1","role":"user","content":"hi"},
			{"uuid":"u1","role":"user","content":[{"type":"text","text":"hi"}]}],
		"occurred_at":"2026-01-02T03:04:05Z"}`,
	"stray fields on blocks": `{"schema":"mnemos.turn.v1","event_id":"e6","tenant_id":"t","session_id":"s","seq":6,
		"input_messages":[{"uuid":"u1","role":"user","extra":1,"content":[
			{"type":"text","text":"a","id":"x","input":5,"content":"nested","future_field":{"a":1}}]}],
		"occurred_at":"2026-01-02T03:04:05Z"}`,
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()

	for name, data := range roundTripEvents {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			requireRoundTrip(t, []byte(data), turn.DecodeOptions{Tenant: "t"})
		})
	}
}

// requireRoundTrip checks Decode(Marshal(Decode(data))) == Decode(data), and
// that encoding is stable: the second encoding has the same bytes.
func requireRoundTrip(t testing.TB, data []byte, opts turn.DecodeOptions) turn.Event {
	t.Helper()
	ev, err := turn.Decode(data, opts)
	require.NoError(t, err)
	out, err := turn.Marshal(ev)
	require.NoError(t, err)
	again, err := turn.Decode(out, opts)
	require.NoError(t, err, "re-encoded event refused:\n%s", out)
	require.Equal(t, ev, again, "re-encoded:\n%s", out)
	out2, err := turn.Marshal(again)
	require.NoError(t, err)
	require.Equal(t, string(out), string(out2))
	return ev
}

// TestRoundTripGenerated runs the round trip over events a seeded generator
// writes: every block type, random strings full of characters that JSON
// escapes, raw JSON in random shapes and spacing, optional fields at random.
func TestRoundTripGenerated(t *testing.T) {
	t.Parallel()

	r := rand.New(rand.NewPCG(20261122, 1))
	for i := range 500 {
		g := generator{r: r}
		data := g.event(i)
		requireRoundTrip(t, data, turn.DecodeOptions{Tenant: "gen"})
	}
}

type generator struct {
	r *rand.Rand
}

// pieces are the fragments random strings are made of.
var pieces = []string{
	"", "a", "hello world", "<", ">", "&", "&&", `"`, `\`, "/", "\n", "\t", "\x01", "\x1f", "\u007f",
	"é", "€", "🙂", "\u2028", "\u2029", "\ufeff", "\ufffd", "</script>", "{", "}", "[", "]", ",", ":",
}

func (g generator) string() string {
	var sb strings.Builder
	for range g.r.IntN(6) {
		sb.WriteString(pieces[g.r.IntN(len(pieces))])
	}
	return sb.String()
}

func (g generator) maybe() bool { return g.r.IntN(2) == 0 }

// value is a random JSON value, depth bounded.
func (g generator) value(depth int) any {
	n := 6
	if depth > 2 {
		n = 4 // leaves only
	}
	switch g.r.IntN(n) {
	case 0:
		return nil
	case 1:
		return g.maybe()
	case 2:
		if g.maybe() {
			return json.Number(fmt.Sprint(g.r.IntN(1000) - 500))
		}
		return json.Number([]string{"0.5", "1e3", "-2.25E-2", "1.0"}[g.r.IntN(4)])
	case 3:
		return g.string()
	case 4:
		return g.object(depth + 1)
	default:
		arr := make([]any, g.r.IntN(4))
		for i := range arr {
			arr[i] = g.value(depth + 1)
		}
		return arr
	}
}

func (g generator) object(depth int) obj {
	o := obj{}
	for range g.r.IntN(4) {
		o[g.string()] = g.value(depth)
	}
	return o
}

func (g generator) source() obj {
	return obj{"type": "base64", "media_type": "image/png", "data": g.string()}
}

func (g generator) block(depth int, toolUseSeq *int) obj {
	types := []string{turn.BlockText, turn.BlockThinking, turn.BlockRedactedThinking, turn.BlockToolUse, turn.BlockImage, turn.BlockDocument}
	if depth == 0 {
		types = append(types, turn.BlockToolResult, turn.BlockToolResult)
	}
	b := obj{"type": types[g.r.IntN(len(types))]}
	switch b["type"] {
	case turn.BlockText:
		b["text"] = g.string()
		if g.maybe() {
			b["citations"] = []any{g.object(1)}
		}
	case turn.BlockThinking:
		b["thinking"] = g.string()
		if g.maybe() {
			b["signature"] = g.string()
		}
	case turn.BlockRedactedThinking:
		b["data"] = g.string()
	case turn.BlockToolUse:
		*toolUseSeq++
		b["id"] = fmt.Sprintf("toolu_%d", *toolUseSeq)
		b["name"] = "tool" + g.string()
		b["input"] = g.object(0)
	case turn.BlockImage:
		b["source"] = g.source()
	case turn.BlockDocument:
		b["source"] = g.source()
		if g.maybe() {
			b["title"] = g.string()
		}
		if g.maybe() {
			b["context"] = g.string()
		}
	case turn.BlockToolResult:
		b["tool_use_id"] = fmt.Sprintf("toolu_%d", g.r.IntN(9)+1)
		if g.maybe() {
			b["is_error"] = g.maybe()
		}
		switch g.r.IntN(3) {
		case 0:
			b["content"] = g.string()
		case 1:
			b["content"] = g.blocks(depth+1, toolUseSeq)
		}
	}
	if g.r.IntN(5) == 0 {
		b["cache_control"] = obj{"type": "ephemeral"}
	}
	return b
}

func (g generator) blocks(depth int, toolUseSeq *int) []any {
	out := make([]any, g.r.IntN(4))
	for i := range out {
		out[i] = g.block(depth, toolUseSeq)
	}
	return out
}

func (g generator) message(uuid, role string, toolUseSeq *int) obj {
	m := obj{"uuid": uuid, "role": role}
	if g.r.IntN(4) == 0 {
		m["content"] = g.string()
	} else {
		m["content"] = g.blocks(0, toolUseSeq)
	}
	if g.maybe() {
		m["stop_reason"] = []any{"end_turn", "tool_use", "max_tokens", nil}[g.r.IntN(4)]
	}
	return m
}

// event writes a valid event. Encodings vary: json.Marshal escapes HTML and
// MarshalIndent adds whitespace inside raw JSON, both of which the decoded
// event must not remember.
func (g generator) event(i int) []byte {
	seq := 0
	ev := obj{
		"schema": turn.SchemaV1, "event_id": fmt.Sprintf("ev-%d", i), "session_id": "s",
		"seq": i + 1, "occurred_at": fmt.Sprintf("2026-%02d-%02dT%02d:%02d:%02d.%03d%s",
			g.r.IntN(12)+1, g.r.IntN(28)+1, g.r.IntN(24), g.r.IntN(60), g.r.IntN(60), g.r.IntN(1000),
			[]string{"Z", "+05:30", "-08:00", "+00:00"}[g.r.IntN(4)]),
	}
	if g.maybe() {
		ev["tenant_id"] = "gen"
	}
	if g.maybe() {
		ev["agent_id"] = "main"
	}
	if g.maybe() {
		scope := obj{}
		for _, k := range []string{"user", "project", "local", "agent"} {
			if g.maybe() {
				scope[k] = "id-" + k
			}
		}
		ev["memory_scope"] = scope
	}
	if g.maybe() {
		ev["model"] = g.string()
	}
	if g.maybe() {
		ev["context_window"] = 1000 + g.r.IntN(1_000_000)
		ev["max_output_tokens"] = 1 + g.r.IntN(64_000)
	}
	msgs := make([]any, g.r.IntN(4))
	for j := range msgs {
		msgs[j] = g.message(fmt.Sprintf("m-%d", j), []string{"user", "assistant"}[g.r.IntN(2)], &seq)
	}
	if len(msgs) > 0 && g.r.IntN(5) == 0 {
		msgs = append(msgs, msgs[0]) // an exact repeat, dropped
	}
	ev["input_messages"] = msgs
	if g.maybe() {
		ev["response"] = g.message("resp", "assistant", &seq)
	}
	if g.maybe() {
		ev["usage"] = obj{
			"input_tokens": g.r.IntN(10), "output_tokens": g.r.IntN(10),
			"cache_creation_input_tokens": g.r.IntN(10), "cache_read_input_tokens": g.r.IntN(200_000),
		}
	}
	var data []byte
	var err error
	if g.maybe() {
		data, err = json.Marshal(ev)
	} else {
		data, err = json.MarshalIndent(ev, "", "  ")
	}
	if err != nil {
		panic(err)
	}
	return data
}

// TestBlocksOfOtherTypesAreKeptAsSent: a block of a type Mnemos does not
// know (Claude Code's tool search answers with tool_reference blocks) is
// accepted, kept as sent, and written back with its cache_control, or
// without it once that is dropped.
func TestBlocksOfOtherTypesAreKeptAsSent(t *testing.T) {
	t.Parallel()
	var c turn.Content
	require.NoError(t, json.Unmarshal([]byte(`[{"type":"tool_reference","tool_name":"mcp__mnemos__memory","cache_control":{"type":"ephemeral"}},{"type":"text","text":"hi"}]`), &c))
	require.Len(t, c, 2)
	require.Equal(t, "tool_reference", c[0].Type)
	require.False(t, turn.Known(c[0].Type))
	require.JSONEq(t, `{"type":"tool_reference","tool_name":"mcp__mnemos__memory"}`, string(c[0].Raw))
	data, err := c.MarshalJSON()
	require.NoError(t, err)
	require.JSONEq(t, `[{"type":"tool_reference","tool_name":"mcp__mnemos__memory","cache_control":{"type":"ephemeral"}},{"type":"text","text":"hi"}]`, string(data))
	c[0].CacheControl = nil
	data, err = c[0].MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, `{"tool_name":"mcp__mnemos__memory","type":"tool_reference"}`, string(data), "the same block, the same bytes")

	ev := `{"schema":"mnemos.turn.v1","event_id":"e1","tenant_id":"t","session_id":"s","seq":1,"model":"m","occurred_at":"2026-11-25T10:00:00Z",
		"input_messages":[{"uuid":"u1","role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"tool_reference","tool_name":"Read"}]}]}],
		"response":{"uuid":"a1","role":"assistant","content":[{"type":"text","text":"ok"}]}}`
	got, err := turn.Decode([]byte(ev), turn.DecodeOptions{})
	require.NoError(t, err, "an event holding one is accepted")
	inner := (*got.InputMessages[0].Content[0].Content)[0]
	require.JSONEq(t, `{"type":"tool_reference","tool_name":"Read"}`, string(inner.Raw))
}
