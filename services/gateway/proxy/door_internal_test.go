package proxy

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/openaiwire"
)

// TestAnEchoedAnswerContinuesItsThread: an OpenAI client sends an answer
// back without what it does not keep of it — the item's id and status, a
// part's empty annotations, a null content, a reasoning item's added
// "content": null — and the message it sends digests as the answer did,
// so its request continues the answer's thread. A change of content does
// not.
func TestAnEchoedAnswerContinuesItsThread(t *testing.T) {
	t.Parallel()
	answer, err := openaiwire.ParseResponse([]byte(`{"status":"completed","output":[
		{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},
		{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Paris.","annotations":[]}]},
		{"type":"function_call","id":"fc_1","status":"completed","call_id":"call_1","name":"lookup","arguments":"{\"q\":\"x\"}"}]}`))
	require.NoError(t, err)
	m, err := answer.Message()
	require.NoError(t, err)
	want, err := responsesDoor.canonDigest(m)
	require.NoError(t, err)

	echo := func(items ...string) digest {
		raws := make([]json.RawMessage, len(items))
		for i, it := range items {
			raws[i] = json.RawMessage(it)
		}
		msg, err := openaiwire.ResponsesMessage(raws)
		require.NoError(t, err)
		d, err := responsesDoor.canonDigest(msg)
		require.NoError(t, err)
		return d
	}
	require.Equal(t, want, echo( // the Codex CLI's echo
		`{"type":"reasoning","id":"rs_1","summary":[],"content":null,"encrypted_content":"gAAA"}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Paris."}]}`,
		`{"type":"function_call","name":"lookup","arguments":"{\"q\":\"x\"}","call_id":"call_1"}`))
	require.NotEqual(t, want, echo(
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"London."}]}`,
		`{"type":"function_call","name":"lookup","arguments":"{\"q\":\"x\"}","call_id":"call_1"}`), "other words are another conversation")
	require.NotEqual(t, want, echo(
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAB"}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Paris."}]}`,
		`{"type":"function_call","name":"lookup","arguments":"{\"q\":\"x\"}","call_id":"call_1"}`), "other reasoning is another conversation")
}
