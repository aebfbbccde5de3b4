package gateway

import (
	"encoding/json"
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
	var err error
	req.turns, err = decodeMessages(client)
	require.NoError(t, err)

	head := []byte(`{"role":"user","content":[{"type":"text","text":"summary"}]}`)
	rendered := [][]byte{
		head,
		[]byte(`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Edit","input":{"z":"two","b_long_key":1}}]}`),
		[]byte(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"[cleared]"}]}]}`),
	}
	out, err := keepUnchanged(req, rendered, []string{"", "u1", "u2"}, 1)
	require.NoError(t, err)
	require.Equal(t, head, out[0], "the compaction's message is its own")
	require.Equal(t, []byte(client[1]), out[1], "an unchanged message is the client's, cache_control and key order included")
	require.Equal(t, rendered[2], out[2], "a changed message is Mnemos's")
}
