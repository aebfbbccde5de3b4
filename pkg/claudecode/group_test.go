package claudecode_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/claudecode/claudecodetest"
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

func TestGroupSubagentInterleavedToolResult(t *testing.T) {
	t.Parallel()

	rounds := claudecode.Group(parseFixture(t, "subagent.jsonl"), claudecode.GroupOptions{})
	require.Len(t, rounds, 12) // README: 12 API rounds, and the transcript ends with a response

	var i int
	for i = range rounds {
		if rounds[i].ResponseID() == "msg_01FqB3YigWWkQYHv4wfbcsgM" {
			break
		}
	}
	r := rounds[i]
	require.Equal(t, []string{
		"47a27705-fb07-49aa-8748-6610d93a1c68",
		"bee5e9da-428f-4e26-a9ed-526f550dcfdf",
		"2fcfb246-fca3-40c0-8434-c61eae1bde5e",
		"823ea880-e0b6-46c3-8db4-0b59904a3ac6",
	}, uuids(r.Response))
	require.Equal(t, &turn.Usage{InputTokens: 1562, CacheCreationInputTokens: 1427, CacheReadInputTokens: 28160, OutputTokens: 8}, r.Usage)

	// The tool_result written between the response's records opens the next round.
	next := rounds[i+1]
	require.Equal(t, "msg_016TsTPALaZE5zqz6fWbxX55", next.ResponseID())
	require.Equal(t, []string{
		"cdf6fa8f-a066-4549-9c95-50433e20d004",
		"6a0c70a9-5e0e-46fc-a071-adfd5fecd62c",
	}, uuids(next.Inputs))

	m := r.ResponseMessage()
	require.Equal(t, "47a27705-fb07-49aa-8748-6610d93a1c68", m.UUID)
	require.Equal(t, "assistant", m.Role)
	require.Equal(t, claudecode.StopToolUse, m.StopReason)
	types := make([]string, 0, len(m.Content))
	for _, b := range m.Content {
		types = append(types, b.Type)
	}
	require.Equal(t, []string{"thinking", "text", "tool_use", "tool_use"}, types)
	require.Equal(t, 2, m.ToolUseCount())

	lastRound := rounds[len(rounds)-1]
	require.Equal(t, claudecode.StopEndTurn, lastRound.ResponseMessage().StopReason)
}

func TestGroupShortEndsWithoutResponse(t *testing.T) {
	t.Parallel()

	rounds := claudecode.Group(parseFixture(t, "short.jsonl"), claudecode.GroupOptions{})
	require.Len(t, rounds, 2)
	require.Len(t, rounds[0].Inputs, 1)
	require.Len(t, rounds[0].Response, 5)
	require.Equal(t, "claude-opus-4-6", rounds[0].Model)
	require.False(t, rounds[1].HasResponse())
	require.Len(t, rounds[1].Inputs, 3, "two rejected tool results and the interruption")
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
