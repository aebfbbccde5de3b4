package claudecode_test

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/claudecode/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func parseFixture(t *testing.T, name string) []claudecode.Record {
	t.Helper()
	f, err := os.Open(claudecodetest.Path(t, name))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	recs, err := claudecode.Parse(f)
	require.NoError(t, err)
	return recs
}

// rawTypes counts the records of a transcript by type, reading it with
// encoding/json alone.
func rawTypes(t *testing.T, name string) map[string]int {
	t.Helper()
	f, err := os.Open(claudecodetest.Path(t, name))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var head struct{ Type, Subtype string }
		require.NoError(t, json.Unmarshal(sc.Bytes(), &head))
		key := head.Type
		if head.Subtype == claudecode.SubtypeBoundary {
			key = claudecode.KindCompactBoundary
		}
		counts[key]++
	}
	require.NoError(t, sc.Err())
	return counts
}

func TestParseFixtures(t *testing.T) {
	t.Parallel()

	for _, name := range claudecodetest.Names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			recs := parseFixture(t, name)
			want := rawTypes(t, name)
			got := map[string]int{}
			for _, r := range recs {
				got[r.Kind()]++
				require.NotEmpty(t, r.UUID)
				require.NotEmpty(t, r.SessionID)
				require.False(t, r.Timestamp.IsZero())
				require.Equal(t, r.UUID, r.Message.UUID)
				require.Equal(t, r.Type, r.Message.Role)
				if r.Type == claudecode.TypeAssistant {
					require.NotEmpty(t, r.MessageID)
					require.NotNil(t, r.Usage, "line %d", r.Line)
					require.Len(t, r.Message.Content, 1, "one block per assistant record")
					require.True(t, r.IsResponse())
				}
			}
			require.Equal(t, want[claudecode.TypeUser], got[claudecode.TypeUser])
			require.Equal(t, want[claudecode.TypeAssistant], got[claudecode.TypeAssistant])
			require.Equal(t, want[claudecode.KindCompactBoundary], got[claudecode.KindCompactBoundary])
			require.Len(t, recs, want[claudecode.TypeUser]+want[claudecode.TypeAssistant]+want[claudecode.KindCompactBoundary])
		})
	}
}

func TestParseShort(t *testing.T) {
	t.Parallel()

	recs := parseFixture(t, "short.jsonl")
	require.Len(t, recs, 9) // README: 4 user records, 5 assistant records

	first := recs[0]
	require.Equal(t, 4, first.Line)
	require.Equal(t, "7d48cbd2-6615-4dd8-87f6-38f12b8167d6", first.UUID)
	require.Equal(t, "55604662-cf2a-4331-851a-ec234028f8ca", first.SessionID)
	require.Equal(t, turn.Content{{Type: turn.BlockText, Text: "mix phx.server doesnt seem to start"}}, first.Message.Content)

	resp := recs[1]
	require.Equal(t, "msg_01MKH1ccEGrZGNPvu8pYiiQa", resp.MessageID)
	require.Equal(t, "claude-opus-4-6", resp.Model)
	require.Empty(t, resp.StopReason, "stop_reason is null while streaming")
	require.Equal(t, &turn.Usage{InputTokens: 3, CacheCreationInputTokens: 13835, CacheReadInputTokens: 11515, OutputTokens: 13}, resp.Usage)

	thinking := recs[2].Message.Content[0]
	require.Equal(t, turn.BlockThinking, thinking.Type)
	require.NotEmpty(t, thinking.Signature)

	result := recs[6].Message.Content[0]
	require.Equal(t, turn.BlockToolResult, result.Type)
	require.True(t, result.IsError)
	require.Equal(t, "toolu_0116Hyi5v8ut7Ffb7d8qV1Sc", result.ToolUseID)
}

func TestParseKeepsMetaUserRecords(t *testing.T) {
	t.Parallel()

	recs := parseFixture(t, "tool_heavy.jsonl")
	var meta []claudecode.Record
	for _, r := range recs {
		if r.IsMeta {
			meta = append(meta, r)
		}
	}
	require.Len(t, meta, 1)
	require.Equal(t, claudecode.TypeUser, meta[0].Type)
	require.True(t, strings.HasPrefix(meta[0].Message.Content[0].Text, "<local-command-caveat>"))
}

func TestParseErrors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"bad JSON names its line", "{\"type\":\"progress\"}\n\n{\"type\":\"user\",\n", "claudecode: line 3: invalid JSON"},
		{"not an object", "[1,2]\n", "claudecode: line 1: not a JSON object"},
		{"user without message", `{"type":"user","uuid":"u1"}` + "\n", "line 1: user record u1 has no message"},
		{"bad content", `{"type":"user","uuid":"u1","message":{"role":"user","content":42}}`, "line 1: user record"},
		{"bad timestamp", `{"type":"assistant","uuid":"a1","timestamp":"yesterday","message":{"role":"assistant","content":[]}}`, "line 1: assistant record a1: timestamp"},
		{"bad role", `{"type":"user","uuid":"u1","message":{"role":"system","content":"x"}}`, `message role "system"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := claudecode.Parse(strings.NewReader(tt.input))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestParseSkipsMetadataRecords(t *testing.T) {
	t.Parallel()

	tr := claudecodetest.NewTranscript(t, "s1")
	tr.Record(claudecodetest.Fields{"type": "file-history-snapshot", "snapshot": map[string]any{}})
	tr.Progress()
	tr.Record(claudecodetest.Fields{"type": "system", "subtype": "local_command", "content": "<command-name>/model</command-name>"})
	tr.Record(claudecodetest.Fields{"type": "system", "subtype": "stop_hook_summary"})
	tr.Record(claudecodetest.Fields{"type": "queue-operation", "operation": "enqueue"})
	tr.Record(claudecodetest.Fields{"type": "summary", "summary": "Phoenix server", "leafUuid": "x"})
	tr.Record(claudecodetest.Fields{"type": "something-new", "message": 12})
	u := tr.User("hello")
	tr.Raw("   ")
	recs, err := claudecode.Parse(tr.Reader())
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, u, recs[0].UUID)
	require.Equal(t, 8, recs[0].Line)
}

func TestParseLongLinesAndNoTrailingNewline(t *testing.T) {
	t.Parallel()

	long := strings.Repeat("0123456789abcdef", 20_000) // 320 KB in one line
	tr := claudecodetest.NewTranscript(t, "s1")
	tr.User(long)
	data := append(tr.Bytes(), []byte(`{"type":"user","uuid":"last","message":{"role":"user","content":"end"}}`)...)
	recs, err := claudecode.Parse(strings.NewReader(string(data)))
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, long, recs[0].Message.Content[0].Text)
	require.Equal(t, "last", recs[1].UUID)
	require.Equal(t, 2, recs[1].Line)
}

func TestParseCRLFAndMissingUUID(t *testing.T) {
	t.Parallel()

	in := "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":null}}\r\n"
	recs, err := claudecode.Parse(strings.NewReader(in))
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, "line-1", recs[0].UUID)
	require.NotNil(t, recs[0].Message.Content)
	require.Empty(t, recs[0].Message.Content)
}

func TestParseCompactBoundary(t *testing.T) {
	t.Parallel()

	tr := claudecodetest.NewTranscript(t, "s1")
	before := tr.User("first")
	b := tr.Boundary("auto", 171_234)
	s := tr.CompactSummary("This session is being continued from a previous conversation.")
	recs, err := claudecode.Parse(tr.Reader())
	require.NoError(t, err)
	require.Len(t, recs, 3)

	require.True(t, recs[1].IsBoundary())
	require.Equal(t, claudecode.KindCompactBoundary, recs[1].Kind())
	require.Equal(t, b, recs[1].UUID)
	require.Equal(t, before, recs[1].LogicalParentUUID)
	require.Empty(t, recs[1].ParentUUID)
	require.Equal(t, &claudecode.CompactMetadata{Trigger: "auto", PreTokens: 171_234}, recs[1].Compact)

	require.Equal(t, s, recs[2].UUID)
	require.True(t, recs[2].IsCompactSummary)
	require.Equal(t, claudecode.TypeUser, recs[2].Kind())
}
