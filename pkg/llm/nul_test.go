package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// TestGuardTakesNULsOutOfAnswers: no answer leaves Guard with a NUL
// character, which Postgres text cannot hold: not in its text, not in a
// JSON answer's strings, not in a tool call's input. What only looks like
// one (a JSON escaped backslash followed by u0000, the six characters
// \u0000 in plain text) is the model's and stays.
func TestGuardTakesNULsOutOfAnswers(t *testing.T) {
	t.Parallel()
	answer := llm.Response{
		Text: "The build\x00 is green; \\u0000 is how JSON writes NUL.",
		ToolCalls: []llm.ToolCall{
			{ID: "t1", Name: "memory_write", Input: json.RawMessage(`{"name":"builds","body":"Use the gamma\u0000 toolchain <fast> & \"safe\".","tags":["a\u0000b",{"k\u0000":"v"}],"n":12345678901234567890}`)},
			{ID: "t2", Name: "memory_write", Input: json.RawMessage(`{"body":"a literal \\u0000 stays"}`)},
			{ID: "t3", Name: "memory_write", Input: json.RawMessage("{\"body\":\"raw\x00\" broken")},
		},
	}
	g := llm.Guard(&fake{results: []result{{resp: answer}}}, llm.GuardOptions{})
	resp, err := g.Complete(context.Background(), req())
	require.NoError(t, err)
	require.Equal(t, "The build is green; \\u0000 is how JSON writes NUL.", resp.Text)

	var first map[string]any
	dec := json.NewDecoder(bytes.NewReader(resp.ToolCalls[0].Input))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&first))
	require.Equal(t, "Use the gamma toolchain <fast> & \"safe\".", first["body"])
	require.Equal(t, []any{"ab", map[string]any{"k": "v"}}, first["tags"])
	require.Equal(t, json.Number("12345678901234567890"), first["n"], "numbers keep their digits")
	require.JSONEq(t, `{"body":"a literal \\u0000 stays"}`, string(resp.ToolCalls[1].Input))
	require.Equal(t, "{\"body\":\"raw\" broken", string(resp.ToolCalls[2].Input), "input that does not decode loses its raw NULs only, for the tool to refuse")

	// A JSON answer (the request named a schema) has its strings cleaned.
	jsonAnswer := llm.Response{Text: `{"memories":["project:repo-x/build\u0000-flags"]}`}
	g = llm.Guard(&fake{results: []result{{resp: jsonAnswer}}}, llm.GuardOptions{})
	r := req()
	r.JSONSchema = json.RawMessage(`{"type":"object"}`)
	resp, err = g.Complete(context.Background(), r)
	require.NoError(t, err)
	require.JSONEq(t, `{"memories":["project:repo-x/build-flags"]}`, resp.Text)
}
