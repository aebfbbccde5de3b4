package proxy

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestKeepUnchangedSendsTheClientsBytes: a stored message Mnemos renders as
// the client sent it goes up in the client's bytes — its cache_control
// kept, and even when Postgres gave its tool input's keys back in another
// order — and a message Mnemos changed (a cleared tool result) goes up as
// rendered; what a compaction made is never the client's.
func TestKeepUnchangedSendsTheClientsBytes(t *testing.T) {
	client := []json.RawMessage{
		json.RawMessage(`{"role":"user","content":"hello"}`),
		json.RawMessage(`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Edit","input":{"b_long_key":1,"z":"two"},"cache_control":{"type":"ephemeral"}}]}`),
		json.RawMessage(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a long output"}]}`),
	}
	req := &messagesRequest{messages: client}
	h := &Handler{canons: newMemo[digest](verdictLimit), unchanged: newVerdicts(verdictLimit)}
	require.NoError(t, h.checkMessages("t1", req))

	head := []byte(`{"role":"user","content":[{"type":"text","text":"summary"}]}`)
	rendered := [][]byte{
		head,
		[]byte(`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Edit","input":{"z":"two","b_long_key":1}}]}`),
		[]byte(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"[cleared]"}]}]}`),
	}
	for round := range 2 { // the second time from the verdicts the first kept
		again := &messagesRequest{messages: client}
		require.NoError(t, h.checkMessages("t1", again))
		out, err := keepUnchanged(again, rendered, []string{"", "u1", "u2"}, 1, h.unchanged)
		require.NoError(t, err)
		if round == 1 {
			require.NotContains(t, again.decoded, true, "the same bytes are neither decoded nor compared again")
		}
		require.Equal(t, head, out[0], "the compaction's message is its own")
		require.Equal(t, []byte(client[1]), out[1], "an unchanged message is the client's, cache_control and key order included")
		require.Equal(t, rendered[2], out[2], "a changed message is Mnemos's")
	}

	// A verdict is the pair's: another rendering of the same message is
	// judged on its own, and a tenant's verdicts are not another's.
	changed := slices.Clone(rendered)
	changed[1] = []byte(`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Edit","input":{"z":"three","b_long_key":1}}]}`)
	out, err := keepUnchanged(req, changed, []string{"", "u1", "u2"}, 1, h.unchanged)
	require.NoError(t, err)
	require.Equal(t, changed[1], out[1])
	other := &messagesRequest{messages: client}
	require.NoError(t, h.checkMessages("t2", other))
	require.Equal(t, []bool{true, true, true}, other.decoded, "another tenant's messages are decoded")
}

// TestCheckMessagesFindsTheUndecodable: a message Mnemos cannot read is
// reported every time it is sent, never taken as known.
func TestCheckMessagesFindsTheUndecodable(t *testing.T) {
	h := &Handler{canons: newMemo[digest](verdictLimit), unchanged: newVerdicts(verdictLimit)}
	client := []json.RawMessage{
		json.RawMessage(`{"role":"user","content":"hello"}`),
		json.RawMessage(`{"role":"user","content":[{"type":"text","text":7}]}`),
	}
	for range 2 {
		err := h.checkMessages("t1", &messagesRequest{messages: client})
		require.ErrorContains(t, err, "message 1")
	}
}

// TestVerdictsKeepWhatIsStillAskedFor: a full generation turns over, and
// a verdict asked for in the previous one is carried into the next.
func TestVerdictsKeepWhatIsStillAskedFor(t *testing.T) {
	v := newVerdicts(2)
	d := func(i byte) digest { return digest{i} }
	v.put(d(1), true)
	v.put(d(2), false)
	v.put(d(3), true) // the first generation is full: 1 and 2 are the older one
	same, ok := v.get(d(1))
	require.True(t, ok)
	require.True(t, same)
	v.put(d(4), true) // turns over again: 3 and 1 older, 2 dropped
	_, ok = v.get(d(2))
	require.False(t, ok)
	_, ok = v.get(d(1))
	require.True(t, ok)
}
