package upstream

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecodeRequestIsJSONUnmarshal: the request decodeRequest reads is the
// one json.Unmarshal reads from the same body, besides the blocks it keeps
// for Measure, and a body it refuses is one json.Unmarshal refuses.
func TestDecodeRequestIsJSONUnmarshal(t *testing.T) {
	for _, body := range []string{
		`{"model":"claude-sonnet-4-5","max_tokens":8192,"stream":true,"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],` +
			`"tools":[{"name":"Read","input_schema":{"type":"object"}},{"name":"Bash"}],` +
			`"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"path":"a"}}]},` +
			` {"content":[{"type":"tool_result","tool_use_id":"t1","content":"x"}],"role":"user"}],` +
			`"thinking":{"type":"enabled","budget_tokens":1024},"cache_control":{"type":"ephemeral"},"context_management":{"edits":[]},"metadata":{"user_id":"u"}}`,
		` { "model" : "m" , "messages" : [ ] , "system" : "plain" } `,
		`{"model":"m","messages":null,"thinking":null,"tools":null}`,
		`{}`,
	} {
		var want Request
		require.NoError(t, json.Unmarshal([]byte(body), &want), body)
		got, err := decodeRequest([]byte(body))
		require.NoError(t, err, body)
		again, err := decodeRequest([]byte(body)) // its messages remembered now
		require.NoError(t, err, body)
		require.Equal(t, got, again, body)
		// What it keeps for Measure is what Measure works out without it.
		require.Equal(t, Measure(&want), Measure(&got), body)
		for i, m := range got.Messages {
			require.Equal(t, blockCanons(m.Content), m.canons, body)
			got.Messages[i].canons = nil
		}
		require.Equal(t, want, got, body)
	}
	for _, body := range []string{`{"model":`, `[1]`, `{"max_tokens":"many"}`, `{"messages":{"role":"user"}}`, `{"messages":[1]}`, `{"stream":"yes"}`} {
		var want Request
		require.Error(t, json.Unmarshal([]byte(body), &want), body)
		_, err := decodeRequest([]byte(body))
		require.Error(t, err, body)
	}
}
