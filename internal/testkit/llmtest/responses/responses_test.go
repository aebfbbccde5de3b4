package responses_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
)

// post sends body to the upstream's /responses and returns the answer's
// status and body (the stream's events joined).
func post(t *testing.T, up *responses.Upstream, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, up.URL+"/responses", strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		sb.WriteString(sc.Text() + "\n")
	}
	return resp.StatusCode, sb.String()
}

// TestTheUpstreamAnswersAsScriptedWithCachedPrefixes: a call is answered
// as the script says, streamed or not; a second call that repeats the
// first's prefix of more than the minimum reads it from the cache in
// steps, and a prompt over the window is refused as the API refuses it.
func TestTheUpstreamAnswersAsScriptedWithCachedPrefixes(t *testing.T) {
	up := responses.Start(t, responses.Config{ContextWindow: 20_000, Script: func(r *responses.Request) (responses.Reply, error) {
		if r.Outputs() == 0 {
			return responses.Say(responses.Reasoning("look first"), responses.FunctionCall("exec_command", map[string]string{"cmd": "ls"})), nil
		}
		return responses.Say(responses.Text("seen " + r.Items[len(r.Items)-1].Output)), nil
	}})
	long := strings.Repeat("instructions ", 1_000) // about 3,250 tokens
	first := `{"model":"gpt-5","instructions":"` + long + `","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"list"}]}]}`
	status, body := post(t, up, first, map[string]string{"Session-Id": "s1", "X-Codex-Turn-Metadata": `{"request_kind":"turn"}`})
	require.Equal(t, http.StatusOK, status, body)
	var resp struct {
		Output []map[string]any `json:"output"`
		Usage  struct {
			InputTokens        int64 `json:"input_tokens"`
			InputTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	require.Len(t, resp.Output, 2)
	require.Equal(t, "exec_command", resp.Output[1]["name"])
	require.Zero(t, resp.Usage.InputTokensDetails.CachedTokens, "nothing was seen before")

	second := strings.TrimSuffix(first, `]}`) + `,{"type":"function_call","call_id":"call_1_1","name":"exec_command","arguments":"{}"},{"type":"function_call_output","call_id":"call_1_1","output":"a.txt"}],"stream":true}`
	status, body = post(t, up, second, nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "event: response.output_text.delta")
	require.Contains(t, body, `"delta":"seen a.txt"`)
	calls := up.Calls()
	require.Len(t, calls, 2)
	require.Equal(t, "turn", calls[0].Request.Kind)
	require.Equal(t, "s1", calls[0].Request.Session)
	u := calls[1].Usage
	require.GreaterOrEqual(t, u.Cached, int64(responses.MinCacheTokens))
	require.Zero(t, (u.Cached-responses.MinCacheTokens)%responses.CacheStep, "in steps past the minimum")
	require.LessOrEqual(t, u.Cached, calls[0].Usage.Input, "no more than the prefix the first call sent")

	status, body = post(t, up, `{"model":"gpt-5","input":"`+strings.Repeat("x ", 50_000)+`"}`, nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, "context_length_exceeded")
}

// TestUpstreamsWithPrefixesHandOutIDsOfTheirOwn: two upstreams that answer
// the same conversation in turn give its function calls distinct ids when
// each has a prefix, and the ids of one without are numbered by the call
// alone.
func TestUpstreamsWithPrefixesHandOutIDsOfTheirOwn(t *testing.T) {
	t.Parallel()
	script := func(*responses.Request) (responses.Reply, error) {
		return responses.Say(responses.FunctionCall("exec_command", map[string]string{"cmd": "ls"})), nil
	}
	body := `{"model":"gpt-5","input":"list"}`
	callID := func(up *responses.Upstream) string {
		t.Helper()
		status, answer := post(t, up, body, nil)
		require.Equal(t, http.StatusOK, status, answer)
		var resp struct {
			Output []struct {
				CallID string `json:"call_id"`
			} `json:"output"`
		}
		require.NoError(t, json.Unmarshal([]byte(answer), &resp))
		require.Len(t, resp.Output, 1)
		return resp.Output[0].CallID
	}
	require.Equal(t, "call_1_0", callID(responses.Start(t, responses.Config{Script: script})))
	require.Equal(t, "call_u1x1_0", callID(responses.Start(t, responses.Config{Script: script, IDPrefix: "u1x"})))
	require.Equal(t, "call_u2x1_0", callID(responses.Start(t, responses.Config{Script: script, IDPrefix: "u2x"})))
}
