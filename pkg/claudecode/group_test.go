package claudecode_test

import (
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

func uuids(recs []claudecode.Record) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.UUID)
	}
	return out
}

func TestGroupFixturesOneRoundPerResponse(t *testing.T) {
	t.Parallel()

	for _, name := range claudecodetest.Names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			recs := parseFixture(t, name)
			rounds := claudecode.Group(recs, claudecode.GroupOptions{})

			ids := map[string]bool{}
			for _, r := range recs {
				if r.IsResponse() {
					ids[r.MessageID] = true
				}
			}
			seen := map[string]int{}
			responses := 0
			for _, r := range rounds {
				require.Equal(t, recs[0].SessionID, r.Session)
				require.Equal(t, turn.MainAgent, r.Agent)
				for _, rec := range append(append([]claudecode.Record{}, r.Inputs...), r.Response...) {
					seen[rec.UUID]++
				}
				if r.Boundary != nil {
					seen[r.Boundary.UUID]++
				}
				if !r.HasResponse() {
					continue
				}
				responses++
				last := r.Response[len(r.Response)-1]
				require.Same(t, r.Usage, last.Usage, "usage of the last record")
				for _, rec := range r.Response {
					require.Equal(t, r.ResponseID(), rec.MessageID)
				}
			}
			require.Equal(t, len(ids), responses)
			require.Len(t, seen, len(recs), "every record lands in exactly one round")
			for id, n := range seen {
				require.Equal(t, 1, n, id)
			}
		})
	}
}

// parseSubagent parses the one sub-agent transcript of subagent.jsonl and
// returns its records and its agent id (from the file's name).
func parseSubagent(t *testing.T) ([]claudecode.Record, string) {
	t.Helper()
	paths := claudecodetest.SubagentPaths(t, "subagent.jsonl")
	require.Len(t, paths, 1)
	f, err := os.Open(paths[0])
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	recs, err := claudecode.Parse(f)
	require.NoError(t, err)
	return recs, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(paths[0]), "agent-"), ".jsonl")
}

func TestGroupSubagentInterleavedToolResult(t *testing.T) {
	t.Parallel()
	recs, agent := parseSubagent(t)
	rounds := claudecode.Group(recs, claudecode.GroupOptions{})
	require.Len(t, rounds, 3) // README: 3 API rounds, and the transcript ends with a response
	for _, r := range rounds {
		require.Equal(t, recs[0].SessionID+"-agent-"+agent, r.Session)
		require.Equal(t, agent, r.Agent)
		require.True(t, r.HasResponse())
	}
	// The second round reads two files: the CLI wrote the first call's result
	// between the response's two tool_use records.
	r := rounds[1]
	var want []string
	for _, rec := range recs {
		if rec.IsResponse() && rec.MessageID == r.ResponseID() {
			want = append(want, rec.UUID)
		}
	}
	require.Len(t, want, 2)
	require.Equal(t, want, uuids(r.Response))
	require.Same(t, r.Usage, r.Response[1].Usage)
	first := slices.IndexFunc(recs, func(rec claudecode.Record) bool { return rec.UUID == want[0] })
	require.Equal(t, claudecode.TypeUser, recs[first+1].Type, "a tool result between the two records")
	require.Equal(t, want[1], recs[first+2].UUID)
	// That tool result opens the next round, with the second one.
	next := rounds[2]
	require.Len(t, next.Inputs, 2)
	require.Equal(t, recs[first+1].UUID, next.Inputs[0].UUID)
	m := r.ResponseMessage()
	require.Equal(t, want[0], m.UUID)
	require.Equal(t, "assistant", m.Role)
	require.Equal(t, claudecode.StopToolUse, m.StopReason)
	require.Equal(t, 2, m.ToolUseCount())
	for i, b := range m.Content {
		require.Equal(t, turn.BlockToolUse, b.Type)
		require.Equal(t, b.ID, next.Inputs[i].Message.Content[0].ToolUseID, "results in the order of the calls")
	}
	require.Equal(t, claudecode.StopEndTurn, next.ResponseMessage().StopReason)
}

func TestGroupSubagentMainSession(t *testing.T) {
	t.Parallel()
	rounds := claudecode.Group(parseFixture(t, "subagent.jsonl"), claudecode.GroupOptions{})
	require.Len(t, rounds, 3) // README: 3 API rounds: Bash, Agent, the answer
	var tools []string
	for _, r := range rounds {
		for _, b := range r.ResponseMessage().Content {
			if b.Type == turn.BlockToolUse {
				tools = append(tools, b.Name)
			}
		}
	}
	require.Equal(t, []string{"Bash", "Agent"}, tools)
	require.Equal(t, claudecode.StopEndTurn, rounds[2].ResponseMessage().StopReason)
}

func TestGroupShort(t *testing.T) {
	t.Parallel()
	rounds := claudecode.Group(parseFixture(t, "short.jsonl"), claudecode.GroupOptions{})
	require.Len(t, rounds, 4) // README: 4 API rounds, 2 user turns
	for i, want := range []struct{ inputs, response int }{
		{1, 3}, // the question; thinking, text, Read
		{1, 2}, // the failed Read's result; text, Read
		{1, 1}, // the file; the answer
		{1, 1}, // the second question; the answer
	} {
		require.Len(t, rounds[i].Inputs, want.inputs, "round %d", i)
		require.Len(t, rounds[i].Response, want.response, "round %d", i)
		require.Equal(t, "claude-sonnet-4-5", rounds[i].Model)
	}
	require.True(t, rounds[1].Inputs[0].Message.Content[0].IsError)
}

// TestGroupEndsWithoutResponse: a transcript that ends with records no
// response followed (tools the user rejected, then an interruption) keeps
// them as a last round without response.
func TestGroupEndsWithoutResponse(t *testing.T) {
	t.Parallel()
	tr := claudecodetest.NewTranscript(t, "s1")
	u := claudecodetest.Usage{Input: 3, CacheCreation: 13_000, CacheRead: 11_000, Output: 13}
	tr.User("the server does not start")
	tr.Assistant("msg_1", "claude-sonnet-4-5", u, claudecodetest.ToolUse("t1", "Bash", map[string]any{"command": "make run"}))
	tr.Assistant("msg_1", "claude-sonnet-4-5", u, claudecodetest.ToolUse("t2", "Read", map[string]any{"file_path": "/a"}))
	r1 := tr.User([]any{map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": "rejected", "is_error": true}})
	r2 := tr.User([]any{map[string]any{"type": "tool_result", "tool_use_id": "t2", "content": "rejected", "is_error": true}})
	stop := tr.User("[Request interrupted by user for tool use]")
	recs, err := claudecode.Parse(tr.Reader())
	require.NoError(t, err)
	rounds := claudecode.Group(recs, claudecode.GroupOptions{})
	require.Len(t, rounds, 2)
	require.Len(t, rounds[0].Response, 2)
	require.False(t, rounds[1].HasResponse())
	require.Equal(t, []string{r1, r2, stop}, uuids(rounds[1].Inputs))
}

func TestGroupLongCompaction(t *testing.T) {
	t.Parallel()
	recs := parseFixture(t, "long.jsonl")
	rounds := claudecode.Group(recs, claudecode.GroupOptions{})
	var boundaries []int
	for i, r := range rounds {
		if r.Boundary != nil {
			boundaries = append(boundaries, i)
		}
	}
	require.Len(t, boundaries, 1)
	b := rounds[boundaries[0]]
	require.False(t, b.HasResponse())
	require.Equal(t, "manual", b.Boundary.Compact.Trigger)
	require.True(t, rounds[boundaries[0]-1].HasResponse(), "the compaction followed a response")
	after := rounds[boundaries[0]+1]
	require.True(t, after.Inputs[0].IsCompactSummary, "the summary opens the next round")
	require.True(t, after.HasResponse())
	// README: 8 API rounds, and the boundary.
	require.Len(t, rounds, 9)
}

func TestGroupSidechainsGetTheirOwnSession(t *testing.T) {
	t.Parallel()

	tr := claudecodetest.NewTranscript(t, "s1")
	agent := tr.Agent("a7f3")
	anon := tr.Agent("")
	u := claudecodetest.Usage{Input: 10, Output: 5}

	mainIn := tr.User("do it")
	mainResp := tr.Assistant("msg_main1", "claude-opus-4-6", u, claudecodetest.ToolUse("t1", "Task", map[string]any{"prompt": "go"}))
	subIn := agent.User("sub task")
	subResp := agent.Assistant("msg_sub1", "claude-haiku-4-5", u, claudecodetest.Text("done"))
	anonIn := anon.User("other")
	mainRes := tr.ToolResult("t1", "sub agent said done")
	mainResp2 := tr.Assistant("msg_main2", "claude-opus-4-6", u, claudecodetest.Text("ok"))

	recs, err := claudecode.Parse(tr.Reader())
	require.NoError(t, err)

	for _, tc := range []struct {
		override, main, sub, anon string
	}{
		{"", "s1", "s1-agent-a7f3", "s1-agent-sidechain"},
		{"replayed", "replayed", "replayed-agent-a7f3", "replayed-agent-sidechain"},
	} {
		rounds := claudecode.Group(recs, claudecode.GroupOptions{Session: tc.override})
		require.Len(t, rounds, 4)

		require.Equal(t, tc.main, rounds[0].Session)
		require.Equal(t, turn.MainAgent, rounds[0].Agent)
		require.Equal(t, []string{mainIn}, uuids(rounds[0].Inputs))
		require.Equal(t, []string{mainResp}, uuids(rounds[0].Response))

		require.Equal(t, tc.sub, rounds[1].Session)
		require.Equal(t, "a7f3", rounds[1].Agent)
		require.Equal(t, []string{subIn}, uuids(rounds[1].Inputs))
		require.Equal(t, []string{subResp}, uuids(rounds[1].Response))
		require.Equal(t, "claude-haiku-4-5", rounds[1].Model)

		require.Equal(t, tc.anon, rounds[2].Session)
		require.Equal(t, claudecode.SidechainAgent, rounds[2].Agent)
		require.Equal(t, []string{anonIn}, uuids(rounds[2].Inputs))
		require.False(t, rounds[2].HasResponse())

		require.Equal(t, tc.main, rounds[3].Session)
		require.Equal(t, []string{mainRes}, uuids(rounds[3].Inputs))
		require.Equal(t, []string{mainResp2}, uuids(rounds[3].Response))
	}
}

func TestGroupCompactBoundary(t *testing.T) {
	t.Parallel()

	tr := claudecodetest.NewTranscript(t, "s1")
	u := claudecodetest.Usage{Input: 3, CacheRead: 150_000, Output: 200}
	tr.User("start")
	tr.Assistant("msg_1", "claude-sonnet-4-5", u, claudecodetest.ToolUse("t1", "Read", map[string]any{"file_path": "/a"}))
	res := tr.ToolResult("t1", "contents")
	cmd := tr.User("<command-name>/compact</command-name>")
	b := tr.Boundary("manual", 150_300)
	sum := tr.CompactSummary("Summary: the user asked for …")
	resp := tr.Assistant("msg_2", "claude-sonnet-4-5", claudecodetest.Usage{Input: 3, CacheCreation: 9_000, Output: 40}, claudecodetest.Text("Continuing."))

	recs, err := claudecode.Parse(tr.Reader())
	require.NoError(t, err)
	rounds := claudecode.Group(recs, claudecode.GroupOptions{})
	require.Len(t, rounds, 3)

	boundary := rounds[1]
	require.NotNil(t, boundary.Boundary)
	require.Equal(t, b, boundary.Boundary.UUID)
	require.Equal(t, "manual", boundary.Boundary.Compact.Trigger)
	require.False(t, boundary.HasResponse())
	require.Equal(t, []string{res, cmd}, uuids(boundary.Inputs), "records left without a response before the boundary")

	after := rounds[2]
	require.Equal(t, []string{sum}, uuids(after.Inputs))
	require.True(t, after.Inputs[0].IsCompactSummary)
	require.Equal(t, []string{resp}, uuids(after.Response))
}

func TestGroupSyntheticAssistantIsInput(t *testing.T) {
	t.Parallel()

	tr := claudecodetest.NewTranscript(t, "s1")
	in := tr.User("hi")
	synth := tr.Assistant("c0ffee", claudecode.SyntheticModel, claudecodetest.Usage{}, claudecodetest.Text("API Error: 529 overloaded"))
	again := tr.User("try again")
	resp := tr.Assistant("msg_1", "claude-opus-4-6", claudecodetest.Usage{Input: 100, Output: 3}, claudecodetest.Text("hello"))

	recs, err := claudecode.Parse(tr.Reader())
	require.NoError(t, err)
	require.False(t, recs[1].IsResponse())
	rounds := claudecode.Group(recs, claudecode.GroupOptions{})
	require.Len(t, rounds, 1)
	require.Equal(t, []string{in, synth, again}, uuids(rounds[0].Inputs))
	require.Equal(t, []string{resp}, uuids(rounds[0].Response))
	require.Equal(t, "assistant", rounds[0].Inputs[1].Message.Role)
}

func TestResponseMessageKeepsRecordedStopReason(t *testing.T) {
	t.Parallel()

	r := claudecode.Round{Response: []claudecode.Record{
		{UUID: "a", MessageID: "m", Message: turn.Message{Content: turn.Content{{Type: turn.BlockText, Text: "x"}}}},
		{UUID: "b", MessageID: "m", StopReason: "max_tokens", Message: turn.Message{Content: turn.Content{{Type: turn.BlockToolUse, ID: "t", Name: "n", Input: []byte(`{}`)}}}},
	}}
	m := r.ResponseMessage()
	require.Equal(t, "max_tokens", m.StopReason)
	require.Equal(t, "a", m.UUID)
	require.Len(t, m.Content, 2)
	require.Equal(t, turn.Message{}, (&claudecode.Round{}).ResponseMessage())
}
