package turn_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// contentTheFastPathTakes is content as agents send it: every block type
// Mnemos knows, tool results as a string and as blocks, escapes, text
// outside ASCII, whitespace between tokens, a key the struct does not have.
var contentTheFastPathTakes = []string{
	`"plain text"`,
	`[]`,
	` [ { "type" : "text" , "text" : "a\nb \"quoted\" \u00e9\u4e2d \/ \\ \t" } ] `,
	`[{"type":"text","text":"naïve café 中文","cache_control":{"type":"ephemeral"}}]`,
	`[{"type":"thinking","thinking":"hmm","signature":"c2ln"},{"type":"redacted_thinking","data":"ZGF0YQ=="}]`,
	`[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls -la", "n": [1, 2.5e3, true, null]}}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_1","content":"total 0\nfile","is_error":false}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"boom"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]}]`,
	`[{"type":"tool_result","tool_use_id":"toolu_3","content":[]}]`,
	`[{"type":"document","source":{"type":"text","data":"x"},"title":"T","context":"C","citations":{"enabled":true}}]`,
	`[{"type":"text","text":"a","extra":{"nested":["]","}\\\"{"]},"text":"last wins"}]`,
	`[{"type":"text","text":"every escape: \b\f\n\r\t\"\\\/\u0041\u00e9\u20ac\u0000"}]`,
}

func TestTheFastPathTakesContentAsAgentsSendIt(t *testing.T) {
	for _, in := range contentTheFastPathTakes {
		fast, ok := turn.DecodeContentFast([]byte(in))
		require.True(t, ok, "declined %s", in)
		slow, err := turn.DecodeContentSlowly([]byte(in))
		require.NoError(t, err, in)
		require.Equal(t, slow, fast, in)
	}
}

// TestTheFastPathDeclinesWhatItIsNotSureOf: each of these encoding/json
// decodes by a rule of its own (or refuses), so the fast path leaves it.
func TestTheFastPathDeclinesWhatItIsNotSureOf(t *testing.T) {
	for _, in := range []string{
		`null`,
		`[null]`,
		`[{"type":"text","text":null}]`,
		`[{"type":"text","Text":"case"}]`,
		`[{"type":"text","ſignature":"long s"}]`,
		`[{"type":"text","te\u0078t":"escaped key"}]`,
		`[{"type":"text","text":"\ud83d\ude00"}]`,
		`[{"type":"server_tool_use","id":"x"}]`,
		`[{"type":"text","text":5}]`,
		`[{"type":"tool_result","tool_use_id":"t","is_error":"yes"}]`,
		`[{"type":"tool_result","tool_use_id":"t","content":{"type":"text"}}]`,
		"[{\"type\":\"text\",\"text\":\"\xff\"}]",
		`[{"text":"no type"}]`,
		`5`,
	} {
		_, ok := turn.DecodeContentFast([]byte(in))
		require.False(t, ok, "took %s", in)
	}
}

// TestTheFastPathTakesTheFuzzSeeds: the seeds of FuzzContent that hold
// only known blocks go the fast way, so FuzzContentFastPathAgrees starts
// from inputs that exercise it.
func TestTheFastPathTakesTheFuzzSeeds(t *testing.T) {
	for _, name := range []string{"every_block_type", "nested_tool_result", "whitespace_and_escapes", "string", "empty"} {
		data := fuzzSeed(t, filepath.Join("testdata", "fuzz", "FuzzContentFastPathAgrees", name))
		_, ok := turn.DecodeContentFast(data)
		require.True(t, ok, name)
	}
}

func fuzzSeed(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	_, arg, ok := strings.Cut(string(raw), "\n")
	require.True(t, ok)
	arg = strings.TrimSuffix(strings.TrimSpace(arg), ")")
	arg = strings.TrimPrefix(arg, "[]byte(")
	var s string
	require.NoError(t, json.Unmarshal([]byte(arg), &s), "seed %s is not a Go string json reads", path)
	return []byte(s)
}

// FuzzContentFastPathAgrees: on any valid JSON the one-pass decoder either
// declines or decodes exactly what encoding/json decodes; it never takes
// what encoding/json refuses. The seeds are FuzzContent's.
func FuzzContentFastPathAgrees(f *testing.F) {
	for _, in := range contentTheFastPathTakes {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return // encoding/json checks the document before it calls UnmarshalJSON
		}
		fast, ok := turn.DecodeContentFast(data)
		slow, err := turn.DecodeContentSlowly(data)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("the fast path took %q, which encoding/json refuses: %v", data, err)
		}
		require.Equal(t, slow, fast, "%q", data)
		requireSameEncoding(t, fast)
		s := string(data) // any bytes, as a value a block may hold
		requireSameEncoding(t, turn.Content{
			{Type: turn.BlockText, Text: s, CacheControl: json.RawMessage(`{"type": "ephemeral"}`)},
			{Type: turn.BlockToolUse, ID: s, Name: s, Input: json.RawMessage(data)},
			{Type: turn.BlockToolResult, ToolUseID: s, IsError: true, Content: &turn.Content{{Type: turn.BlockThinking, Signature: s}}},
			{Type: turn.BlockDocument, Title: s, Context: s},
			{Type: turn.BlockRedactedThinking},
		})
	})
}

// requireSameEncoding: the one-pass encoder writes what encoding/json
// writes, or fails as it does.
func requireSameEncoding(t *testing.T, c turn.Content) {
	t.Helper()
	slow, serr := turn.MarshalContentSlowly(c)
	fast, ferr := turn.Marshal(c)
	require.Equal(t, serr != nil, ferr != nil, "errors: %v / %v", serr, ferr)
	require.Equal(t, string(slow), string(fast))
}

func TestTheOnePassEncoderWritesWhatEncodingJSONWrites(t *testing.T) {
	odd := "\b\f\n\r\t\x00\x1f\x7f \" \\ <>& \u2028\u2029 \xff\xfe é 中 😀"
	requireSameEncoding(t, turn.Content{
		{Type: turn.BlockText, Text: odd},
		{Type: turn.BlockText},
		{Type: turn.BlockThinking, Thinking: odd},
		{Type: turn.BlockToolUse, Name: odd, Input: json.RawMessage(` { "a" : [ 1 , "<b>" ] } `)},
		{Type: turn.BlockToolUse, Input: json.RawMessage(`{not json`)},
		{Type: turn.BlockImage, Citations: json.RawMessage(`[ ]`)},
		{Type: turn.BlockToolResult, Content: &turn.Content{}},
		{Type: turn.BlockToolResult, Content: &turn.Content{{Type: "custom", Text: odd}}},
	})
	for _, in := range contentTheFastPathTakes {
		c, err := turn.DecodeContentSlowly([]byte(in))
		require.NoError(t, err)
		requireSameEncoding(t, c)
		for _, b := range c {
			require.True(t, turn.EncodesInOnePass(b), "%s", in) // the fast way is the one taken
		}
	}
}

// BenchmarkContent: a tool result of 720 bytes and an answer calling the
// next tool, decoded and encoded in one pass and through encoding/json.
func BenchmarkContent(b *testing.B) {
	data := []byte(`[{"type":"tool_result","tool_use_id":"toolu_6","content":"` + strings.Repeat("line of a file the tool read; ", 24) + `"},` +
		`{"type":"text","text":"Reading the next file."},{"type":"tool_use","id":"toolu_7","name":"Read","input":{"file_path":"/src/pkg/file7.go"}}]`)
	c, err := turn.DecodeContentSlowly(data)
	require.NoError(b, err)
	benchSteps(b, len(data), map[string]func() error{
		"decode":        func() error { var c turn.Content; return json.Unmarshal(data, &c) },
		"decode-slowly": func() error { _, err := turn.DecodeContentSlowly(data); return err },
		"encode":        func() error { _, err := turn.Marshal(c); return err },
		"encode-slowly": func() error { _, err := turn.MarshalContentSlowly(c); return err },
	})
}
