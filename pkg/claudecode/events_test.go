package claudecode_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func fixtureEvents(t *testing.T, name string, opts claudecode.EventOptions) ([]claudecode.Record, []turn.Event) {
	t.Helper()
	recs := parseFixture(t, name)
	return recs, claudecode.Events(claudecode.Group(recs, claudecode.GroupOptions{}), opts)
}

func TestEventsFixturesDecode(t *testing.T) {
	t.Parallel()

	for _, name := range claudecodetest.Names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := claudecode.EventOptions{Tenant: "acme", ContextWindow: 200_000, MaxOutputTokens: 32_000,
				MemoryScope: map[string]string{"project": "spotter"}}
			recs, events := fixtureEvents(t, name, opts)
			require.NotEmpty(t, events)

			ids := map[string]bool{}
			for i, ev := range events {
				require.Equal(t, int64(i+1), ev.Seq)
				require.Equal(t, recs[0].SessionID, ev.SessionID)
				require.Equal(t, turn.MainAgent, ev.AgentID)
				require.Equal(t, "claude-sonnet-4-5", ev.Model)
				require.Equal(t, int64(200_000), ev.ContextWindow)
				require.Equal(t, int64(32_000), ev.MaxOutputTokens)
				require.NotNil(t, ev.Usage)
				require.NotNil(t, ev.Response)
				require.False(t, ids[ev.EventID], "event ids are unique")
				ids[ev.EventID] = true
				id, err := uuid.Parse(ev.EventID)
				require.NoError(t, err)
				require.Equal(t, uuid.Version(5), id.Version())

				// Every event is one the service accepts.
				data, err := json.Marshal(ev)
				require.NoError(t, err)
				got, err := turn.Decode(data, turn.DecodeOptions{Tenant: "acme"})
				require.NoError(t, err, "event %d", ev.Seq)
				require.Equal(t, ev.EventID, got.EventID)
				require.Len(t, got.InputMessages, len(ev.InputMessages))
			}

			// Deterministic: the same input gives the same events.
			_, again := fixtureEvents(t, name, opts)
			require.Equal(t, events, again)
		})
	}
}

func TestEventsSubagent(t *testing.T) {
	t.Parallel()
	recs, events := fixtureEvents(t, "subagent.jsonl", claudecode.EventOptions{})
	require.Len(t, events, 3) // README: 3 API rounds
	// Every user record is an input of exactly one event; every response is
	// one message carrying the blocks of all its records.
	inputs := map[string]int{}
	blocks := 0
	for _, ev := range events {
		for _, m := range ev.InputMessages {
			inputs[m.UUID]++
		}
		blocks += len(ev.Response.Content)
		require.Empty(t, ev.TenantID)
		require.Zero(t, ev.ContextWindow)
	}
	users, assistants := 0, 0
	var lastOfFirst time.Time
	for _, r := range recs {
		switch r.Type {
		case claudecode.TypeUser:
			users++
			require.Equal(t, 1, inputs[r.UUID], r.UUID)
		case claudecode.TypeAssistant:
			assistants++
			if r.MessageID == recs[1].MessageID {
				lastOfFirst = r.Timestamp
			}
		}
	}
	require.Len(t, inputs, users)
	require.Equal(t, assistants, blocks)
	first := events[0]
	require.Len(t, first.InputMessages, 1, "the user's question")
	require.Equal(t, recs[0].UUID, first.InputMessages[0].UUID)
	require.Equal(t, lastOfFirst, first.OccurredAt, "the time of the response's last record")
	last := events[len(events)-1]
	require.True(t, last.ClosesUserTurn())
	require.Equal(t, claudecode.EventID("", first.SessionID, 3, recs[len(recs)-1].MessageID), last.EventID)

	// The sub-agent's transcript makes events of its own session and seq.
	sub, agent := parseSubagent(t)
	subEvents := claudecode.Events(claudecode.Group(sub, claudecode.GroupOptions{}), claudecode.EventOptions{})
	require.Len(t, subEvents, 3)
	for i, ev := range subEvents {
		require.Equal(t, first.SessionID+"-agent-"+agent, ev.SessionID)
		require.Equal(t, agent, ev.AgentID)
		require.Equal(t, int64(i+1), ev.Seq)
	}
	require.True(t, subEvents[2].ClosesUserTurn())
}

func TestEventsShort(t *testing.T) {
	t.Parallel()
	_, events := fixtureEvents(t, "short.jsonl", claudecode.EventOptions{})
	require.Len(t, events, 4) // README: 4 API rounds
	var closes []bool
	for _, ev := range events {
		require.Len(t, ev.InputMessages, 1)
		closes = append(closes, ev.ClosesUserTurn())
	}
	require.Equal(t, []bool{false, false, true, true}, closes, "two user turns, the first of three rounds")
}

// TestEventsDropTrailingInputs: records no response followed make no event.
func TestEventsDropTrailingInputs(t *testing.T) {
	t.Parallel()
	tr := claudecodetest.NewTranscript(t, "s1")
	in := tr.User("the server does not start")
	resp := tr.Assistant("msg_1", "claude-sonnet-4-5", claudecodetest.Usage{Input: 3, Output: 13},
		claudecodetest.ToolUse("t1", "Bash", map[string]any{"command": "make run"}))
	tr.User([]any{map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": "rejected", "is_error": true}})
	tr.User("[Request interrupted by user for tool use]")
	recs, err := claudecode.Parse(tr.Reader())
	require.NoError(t, err)
	events := claudecode.Events(claudecode.Group(recs, claudecode.GroupOptions{}), claudecode.EventOptions{})
	require.Len(t, events, 1, "the rejected tool result never got a response")
	ev := events[0]
	require.Len(t, ev.InputMessages, 1)
	require.Equal(t, in, ev.InputMessages[0].UUID)
	require.Equal(t, resp, ev.Response.UUID)
	require.Equal(t, claudecode.StopToolUse, ev.Response.StopReason)
	require.False(t, ev.ClosesUserTurn())
	require.Equal(t, recs[1].Timestamp, ev.OccurredAt)
}

func TestEventsSidechainAndBoundary(t *testing.T) {
	t.Parallel()

	tr := claudecodetest.NewTranscript(t, "s1")
	agent := tr.Agent("a1")
	u := claudecodetest.Usage{Input: 10, CacheRead: 100, Output: 5}
	tr.User("go")
	tr.Assistant("msg_1", "claude-opus-4-6", u, claudecodetest.ToolUse("t1", "Task", map[string]any{"prompt": "p"}))
	agent.User("p")
	agent.Assistant("msg_a1", "claude-haiku-4-5", u, claudecodetest.Text("sub done"))
	res := tr.ToolResult("t1", "sub done")
	tr.Boundary("auto", 170_000)
	sum := tr.CompactSummary("summary")
	tr.Assistant("msg_2", "claude-opus-4-6", u, claudecodetest.Text("ok"))

	recs, err := claudecode.Parse(tr.Reader())
	require.NoError(t, err)
	events := claudecode.Events(claudecode.Group(recs, claudecode.GroupOptions{Session: "x9"}), claudecode.EventOptions{Tenant: "acme"})
	require.Len(t, events, 3)

	require.Equal(t, "x9", events[0].SessionID)
	require.Equal(t, int64(1), events[0].Seq)

	require.Equal(t, "x9-agent-a1", events[1].SessionID)
	require.Equal(t, "a1", events[1].AgentID)
	require.Equal(t, int64(1), events[1].Seq, "a sub-agent session counts its own seq")
	require.Equal(t, "claude-haiku-4-5", events[1].Model)

	require.Equal(t, "x9", events[2].SessionID)
	require.Equal(t, int64(2), events[2].Seq)
	got := make([]string, 0, 2)
	for _, m := range events[2].InputMessages {
		got = append(got, m.UUID)
	}
	require.Equal(t, []string{res, sum}, got, "records before the boundary open the next event")

	for _, ev := range events {
		data, err := json.Marshal(ev)
		require.NoError(t, err)
		_, err = turn.Decode(data, turn.DecodeOptions{})
		require.NoError(t, err)
	}
}

func TestEventID(t *testing.T) {
	t.Parallel()

	a := claudecode.EventID("t", "s", 1, "msg_1")
	require.Equal(t, a, claudecode.EventID("t", "s", 1, "msg_1"))
	require.NotEqual(t, a, claudecode.EventID("t", "s", 2, "msg_1"))
	require.NotEqual(t, a, claudecode.EventID("t", "s", 1, "msg_2"))
	require.NotEqual(t, a, claudecode.EventID("t", "s2", 1, "msg_1"))
	require.NotEqual(t, a, claudecode.EventID("u", "s", 1, "msg_1"))
	require.NotEqual(t, claudecode.EventID("", "s1", 1, "x"), claudecode.EventID("", "s", 11, "x"))
}
