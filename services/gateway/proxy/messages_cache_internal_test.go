package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// readRound is a Read call and its result of size characters, as a
// client sends them; the result carries marker when it is not "".
func readRound(id string, size int, marker string) (use, result json.RawMessage) {
	use = json.RawMessage(fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":%q,"name":"Read","input":{"file_path":"/r"}}]}`, id))
	cc := ""
	if marker != "" {
		cc = `,"cache_control":` + marker
	}
	result = json.RawMessage(fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":%q%s}]}`, id, strings.Repeat("x", size), cc))
	return use, result
}

// TestOffloadRoundsWritesWhatTheAccountantWillStore: a round before the
// current one goes with its large result as the accountant will store it,
// byte for byte as the stored message renders; the current round's large
// result goes whole, named as the one to offload next.
func TestOffloadRoundsWritesWhatTheAccountantWillStore(t *testing.T) {
	t.Parallel()

	off := accounting.DefaultOffload()
	first := json.RawMessage(`{"role":"user","content":[{"type":"text","text":"read them"}]}`)
	use1, res1 := readRound("t1", 60_000, "")
	use2, res2 := readRound("t2", 60_000, `{"type":"ephemeral"}`)
	msgs := []json.RawMessage{first, use1, res1, use2, res2}
	req := &messagesRequest{door: messagesDoor, messages: msgs}

	out, next, err := offloadRounds(off, "acme", "s1", req, 0, msgs)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"t2": true}, next, "the current round's large result is offloaded from the next round on")
	require.Equal(t, string(res2), string(out[4]), "the current round goes as sent")
	require.Equal(t, string(use2), string(out[3]))

	// What the accountant stores for the first round, rendered.
	round := []turn.Message{}
	for i := range 3 {
		m, err := req.turnAt(i)
		require.NoError(t, err)
		round = append(round, m)
	}
	shown, decisions, err := off.Apply(round, nil, func(id string) string { return accounting.ToolResultID("acme", "s1", id) })
	require.NoError(t, err)
	require.Len(t, decisions, 1)
	want, err := assembly.RenderMessage(shown[2].Role, shown[2].Content)
	require.NoError(t, err)
	require.Equal(t, string(want), string(out[2]))
	require.Contains(t, string(out[2]), "<persisted-output>")
	require.Equal(t, string(msgs[2]), string(res1), "the client's messages are not changed")

	// A round with nothing to offload goes as sent.
	use3, res3 := readRound("t3", 900, "")
	small := []json.RawMessage{first, use3, res3}
	out, next, err = offloadRounds(off, "acme", "s1", &messagesRequest{door: messagesDoor, messages: small}, 0, small)
	require.NoError(t, err)
	require.Empty(t, next)
	require.Equal(t, small, out)
}

// TestMoveBreakpointPutsTheMarkerBeforeWhatWillBeOffloaded: the client's
// marker on a result offloaded from the next round on moves, as it was
// sent, to the call before it; without such a result, or without a
// marker on or after it, nothing moves.
func TestMoveBreakpointPutsTheMarkerBeforeWhatWillBeOffloaded(t *testing.T) {
	t.Parallel()

	first := json.RawMessage(`{"role":"user","content":[{"type":"text","text":"read them"}]}`)
	use, res := readRound("t1", 100, `{"type":"ephemeral","ttl":"1h"}`)
	msgs := []json.RawMessage{first, use, res}

	out, err := moveBreakpoint(msgs, map[string]bool{"t1": true})
	require.NoError(t, err)
	require.NotContains(t, string(out[2]), "cache_control", "the result is read once, after the last breakpoint")
	var m struct {
		Content []map[string]json.RawMessage `json:"content"`
	}
	require.NoError(t, json.Unmarshal(out[1], &m))
	require.JSONEq(t, `{"type":"ephemeral","ttl":"1h"}`, string(m.Content[0]["cache_control"]), "the client's marker, on the call")
	require.JSONEq(t, string(res), strings.Replace(string(out[2]), `}]}`, `,"cache_control":{"type":"ephemeral","ttl":"1h"}}]}`, 1),
		"nothing but the marker changes")
	require.Equal(t, string(first), string(out[0]))

	same, err := moveBreakpoint(msgs, map[string]bool{"other": true})
	require.NoError(t, err)
	require.Equal(t, msgs, same)
	use2, unmarked := readRound("t2", 100, "")
	plain := []json.RawMessage{first, use2, unmarked}
	same, err = moveBreakpoint(plain, map[string]bool{"t2": true})
	require.NoError(t, err)
	require.Equal(t, plain, same)
}
