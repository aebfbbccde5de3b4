package claudecode_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
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
				if r.IsBoundary() {
					require.NotNil(t, r.Compact)
					continue
				}
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

// rawRecord is a transcript line read with encoding/json alone, to check
// the importer against.
type rawRecord struct {
	Line        int
	Type        string
	UUID        string
	SessionID   string
	IsSidechain bool
	AgentID     string
	Timestamp   string
	Message     struct {
		ID      string
		Model   string
		Content json.RawMessage
		Usage   *turn.Usage
	}
}

func rawRecords(t *testing.T, path string) []rawRecord {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	var out []rawRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		var r rawRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		r.Line = n
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

func TestParseShort(t *testing.T) {
	t.Parallel()
	recs := parseFixture(t, "short.jsonl")
	// README: 4 user records and 7 assistant records (jq -c 'select(.type=="user" or
	// .type=="assistant") | .type' short.jsonl | sort | uniq -c); the rest is metadata.
	require.Len(t, recs, 11)
	var raw []rawRecord
	for _, r := range rawRecords(t, claudecodetest.Path(t, "short.jsonl")) {
		if r.Type == "user" || r.Type == "assistant" {
			raw = append(raw, r)
		}
	}
	require.Len(t, raw, len(recs))
	for i, r := range recs {
		require.Equal(t, raw[i].Line, r.Line)
		require.Equal(t, raw[i].UUID, r.UUID)
		require.Equal(t, raw[i].SessionID, r.SessionID)
		require.Equal(t, raw[i].Message.ID, r.MessageID)
		require.Equal(t, raw[i].Message.Usage, r.Usage)
	}
	first := recs[0]
	require.Equal(t, turn.Content{{Type: turn.BlockText, Text: "What does greet.sh print when I run it without arguments?"}}, first.Message.Content)
	resp := recs[1]
	require.Regexp(t, `^msg_01`, resp.MessageID)
	require.Equal(t, "claude-sonnet-4-5", resp.Model)
	require.Equal(t, claudecode.StopToolUse, resp.StopReason, "this CLI records the response's stop reason")
	require.NotNil(t, resp.Usage)
	require.Positive(t, resp.Usage.CacheCreationInputTokens)
	require.Zero(t, resp.Usage.CacheReadInputTokens, "the first call of a session finds nothing cached")
	thinking := resp.Message.Content[0]
	require.Equal(t, turn.BlockThinking, thinking.Type)
	require.NotEmpty(t, thinking.Signature)
	// The first Read names a file that is not there: its result is an error.
	call := recs[3].Message.Content[0]
	require.Equal(t, turn.BlockToolUse, call.Type)
	result := recs[4].Message.Content[0]
	require.Equal(t, turn.BlockToolResult, result.Type)
	require.True(t, result.IsError)
	require.Equal(t, call.ID, result.ToolUseID)
	require.False(t, recs[7].Message.Content[0].IsError, "the second Read finds the file")
}

func TestParseKeepsMetaUserRecords(t *testing.T) {
	t.Parallel()
	recs := parseFixture(t, "long.jsonl")
	var meta []claudecode.Record
	for _, r := range recs {
		if r.IsMeta {
			meta = append(meta, r)
		}
	}
	require.Len(t, meta, 1, "the caveat the CLI writes before /compact")
	require.Equal(t, claudecode.TypeUser, meta[0].Type)
	require.True(t, strings.HasPrefix(meta[0].Message.Content[0].Text, "<local-command-caveat>"))
}

// TestParseLongCompaction: the long session's /compact left a manual
// compact_boundary, then the summary.
func TestParseLongCompaction(t *testing.T) {
	t.Parallel()
	recs := parseFixture(t, "long.jsonl")
	i := slices.IndexFunc(recs, func(r claudecode.Record) bool { return r.IsBoundary() })
	require.GreaterOrEqual(t, i, 1)
	b := recs[i]
	require.Equal(t, "manual", b.Compact.Trigger)
	// preTokens is the context of the last response before the boundary:
	// the sum of its usage.
	prev := recs[i-1]
	require.True(t, prev.IsResponse())
	u := prev.Usage
	require.Equal(t, u.InputTokens+u.CacheCreationInputTokens+u.CacheReadInputTokens+u.OutputTokens, b.Compact.PreTokens)
	require.Greater(t, b.Compact.PreTokens, int64(150_000), "README: the context peaks at 155,686 tokens")
	require.NotEmpty(t, b.LogicalParentUUID)
	require.Empty(t, b.ParentUUID)
	require.True(t, recs[i+1].IsCompactSummary)
	require.Contains(t, recs[i+1].Message.Content[0].Text, "Summary:\n1. Primary request", "the scripted summary, its <summary> tags taken out")
	require.Equal(t, 1, countIf(recs, func(r claudecode.Record) bool { return r.IsBoundary() }))
}

// TestParseSubagentTranscript: the sub-agent's own transcript, which this
// CLI writes apart from the session's: every record is a sidechain record
// of one agent, in the session of the main transcript.
func TestParseSubagentTranscript(t *testing.T) {
	t.Parallel()
	main := parseFixture(t, "subagent.jsonl")
	paths := claudecodetest.SubagentPaths(t, "subagent.jsonl")
	require.Len(t, paths, 1)
	f, err := os.Open(paths[0])
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	recs, err := claudecode.Parse(f)
	require.NoError(t, err)
	// README: 4 user records and 5 assistant records.
	require.Len(t, recs, 9)
	agent := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(paths[0]), "agent-"), ".jsonl")
	for _, r := range recs {
		require.True(t, r.IsSidechain, "line %d", r.Line)
		require.Equal(t, agent, r.AgentID)
		require.Equal(t, main[0].SessionID, r.SessionID)
	}
	// The main transcript's Agent call is what started it: its prompt is the
	// sub-agent's first message.
	var prompt string
	for _, r := range main {
		for _, b := range r.Message.Content {
			if b.Type == turn.BlockToolUse && b.Name == "Agent" {
				var in struct{ Prompt string }
				require.NoError(t, json.Unmarshal(b.Input, &in))
				prompt = in.Prompt
			}
		}
	}
	require.NotEmpty(t, prompt)
	require.Equal(t, prompt, recs[0].Message.Content[0].Text)
}

func countIf(recs []claudecode.Record, f func(claudecode.Record) bool) int {
	n := 0
	for _, r := range recs {
		if f(r) {
			n++
		}
	}
	return n
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
