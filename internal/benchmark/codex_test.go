package benchmark

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
)

// TestTheCodexClientSendsWhatTheCLISends: a built session at the Responses
// door reaches a scripted upstream as the Codex CLI's requests do — the
// whole history as input items, a developer message first, then rounds of
// a user's request, a call of exec_command, its output and the assistant's
// answer; streamed, not stored, the session as the prompt cache key and
// the session-id header — about as large as asked; the streamed answer's
// call and its output join the history, and the next round repeats the
// one before as its prefix.
func TestTheCodexClientSendsWhatTheCLISends(t *testing.T) {
	t.Parallel()
	const id, size = "b1-responses3k-0", 3_000
	d := &responsesDoor{s: &System{}}
	sess, rounds := d.build(id, size)
	c := sess.(*responsesSession).c
	require.Equal(t, 1+rounds*builtPerRound, len(c.items))

	up := responses.New(responses.Config{IDPrefix: "t_", Script: func(*responses.Request) (responses.Reply, error) {
		return responses.Say(responses.Text("Looking."), responses.FunctionCall("exec_command", map[string]string{"cmd": "ls"})), nil
	}})
	send := func(body []byte) []byte {
		t.Helper()
		require.True(t, json.Valid(body), "%.300s", body)
		req := httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(body))
		req.Header.Set("Session-Id", id)
		rec := httptest.NewRecorder()
		up.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		return rec.Body.Bytes()
	}

	primed, err := sess.beforeAnswer(rounds)
	require.NoError(t, err)
	send(primed)
	sess.ask("Now make it read the file lazily.")
	body, err := sess.request()
	require.NoError(t, err)
	out, err := codexOutput(send(body))
	require.NoError(t, err)
	c.answered(out, func(call codexOut) string { return "ran " + call.Name })
	next, err := sess.request()
	require.NoError(t, err)
	send(next)

	calls := up.Calls()
	require.Len(t, calls, 3)
	first, second, third := calls[0].Request, calls[1].Request, calls[2].Request
	require.Equal(t, "function_call_output", first.Items[len(first.Items)-1].Type, "priming ends before the round's answer")
	require.Len(t, first.Items, rounds*builtPerRound)
	require.GreaterOrEqual(t, calls[1].Usage.Input, int64(size), "as large as asked, as the upstream counts")
	require.Less(t, calls[1].Usage.Input, int64(size+size/10))

	require.Equal(t, codexModel, second.Model)
	require.True(t, second.Stream)
	require.Equal(t, id, second.PromptCacheKey)
	require.Equal(t, id, second.Session)
	require.NotEmpty(t, second.Instructions)
	require.Contains(t, string(second.Tools), `"name":"exec_command"`)
	require.Contains(t, string(calls[1].Body), `"store":false`)
	want := []string{"message/developer"}
	for range rounds {
		want = append(want, "message/user", "function_call/", "function_call_output/", "message/assistant")
	}
	require.Equal(t, append(want, "message/user"), kinds(second.Items))
	require.Equal(t, "rg -n loadConfig src/", mustCmd(t, second.Items[2].Arguments))
	require.Equal(t, second.Items[2].CallID, second.Items[3].CallID)
	require.Len(t, second.Items[3].Output, builtResult)

	require.Equal(t, append(want, "message/user", "message/assistant", "function_call/", "function_call_output/"), kinds(third.Items))
	n := len(third.Items)
	require.Equal(t, "Looking.", third.Items[n-3].Text)
	require.Equal(t, "call_t_2_1", third.Items[n-2].CallID, "the call's id as the upstream gave it")
	require.Equal(t, "ls", mustCmd(t, third.Items[n-2].Arguments))
	require.Equal(t, "call_t_2_1", third.Items[n-1].CallID)
	require.Equal(t, "ran exec_command", third.Items[n-1].Output)
	require.JSONEq(t, `{"type":"function_call","call_id":"call_t_2_1","name":"exec_command","arguments":"{\"cmd\":\"ls\"}"}`, string(third.Items[n-2].Raw),
		"sent back without the id and status the answer gave it")
	for i, it := range second.Items {
		require.Equal(t, string(it.Raw), string(third.Items[i].Raw), "item %d: the next round repeats the history as it was sent", i)
	}
	require.Greater(t, calls[2].Usage.Cached, calls[2].Usage.Input*9/10, "the prompt cache reads the repeated prefix")
}

// kinds are the items' types, with each message's role: "message/user".
func kinds(items []responses.Item) (out []string) {
	for _, it := range items {
		out = append(out, it.Type+"/"+it.Role)
	}
	return out
}

func mustCmd(t *testing.T, arguments string) string {
	t.Helper()
	var args struct {
		Cmd string `json:"cmd"`
	}
	require.NoError(t, json.Unmarshal([]byte(arguments), &args))
	return args.Cmd
}
