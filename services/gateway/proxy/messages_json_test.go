package proxy

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// jsonWalkSeeds are request bodies and parts of them in the shapes the
// proxy meets: white space everywhere, escapes before quotes, HTML and
// line separators (which encoding/json leaves alone unescaped), nesting.
var jsonWalkSeeds = []string{
	`{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":"hello"}]}`,
	" {\n  \"messages\" : [ {\"role\": \"user\", \"content\": [ {\"type\": \"text\", \"text\": \"a \\\"quoted\\\" <b>&amp;</b> \\\\\"} ] } ,\n {\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"Edit\",\"input\":{\"b\": 1, \"a\" : [1, 2.5e3, -0, true, false, null]}}]} ],\t\"stream\" : false , \"system\":\"x\\u2028y\u2028z\" }\r\n",
	`{"a\"b":1,"c\\":"\\\\","<&>":{"x":[]},"messages":null,"e\u00e9":"\\u00e9"}`,
	`{"type":"message","role":"user","ty\u0070e":"function_call","role":"assistant","rol\u00e9":1}`,
	`{"messages":[],"metadata":{"user_id":"{\"session_id\":\"s1\"}"},"k":"v","k":"w"}`,
	`[1, "two" , {"three": [3]}, [], {}, null, true, -1.5E-7 ]`,
	`[]`, `null`, `"just a string"`, `12`, `{}`,
}

// checkJSONWalk holds the walk to encoding/json on one valid JSON text.
func checkJSONWalk(t *testing.T, src []byte) {
	var want bytes.Buffer
	require.NoError(t, json.Compact(&want, src))
	require.Equal(t, want.String(), string(jsonwalk.AppendCompact(nil, src)), "compact %q", src)

	var arr []json.RawMessage
	arrErr := json.Unmarshal(src, &arr)
	got, err := jsonwalk.SplitArray(src)
	require.Equal(t, arrErr == nil, err == nil, "split array %q", src)
	if err == nil {
		require.Len(t, got, len(arr))
		for i := range arr {
			require.Equal(t, string(arr[i]), string(got[i]), "element %d of %q", i, src)
		}
	}

	var obj map[string]json.RawMessage
	objErr := json.Unmarshal(src, &obj)
	fields, err := jsonwalk.SplitObject(src)
	require.Equal(t, objErr == nil && obj != nil, err == nil, "split object %q", src)
	if err != nil {
		return
	}
	require.Len(t, fields, len(obj))
	for k, v := range obj {
		require.Equal(t, string(v), string(fields[k]), "field %q of %q", k, src)
	}
	// The fields an item is read for, picked among the rest.
	names := []string{"type", "role", "a\"b", "e\u00e9"}
	picked, err := jsonwalk.Fields(src, names...)
	require.NoError(t, err)
	for _, name := range names {
		v, ok := obj[name]
		p, picks := picked[name]
		require.Equal(t, ok, picks, "field %q of %q picked", name, src)
		require.Equal(t, string(v), string(p), "field %q of %q", name, src)
	}
	require.LessOrEqual(t, len(picked), len(names))
	// The body sent up, as it was encoded before encodeFields.
	msgs, err := jsonwalk.SplitArray(obj["messages"])
	if err != nil {
		return // not a body the proxy manages
	}
	msgs = append(make([]json.RawMessage, 0, len(msgs)), msgs...) // as managedBody holds them: never nil
	old := map[string]json.RawMessage{}
	for k, v := range obj {
		old[k] = v
	}
	if old["messages"], err = turn.Marshal(msgs); err != nil {
		t.Fatal(err)
	}
	enc, err := turn.Marshal(old)
	require.NoError(t, err)
	got2, err := encodeFields(fields, "messages", msgs)
	require.NoError(t, err)
	require.Equal(t, string(enc), string(got2), "fields of %q", src)
}

func TestJSONWalkIsEncodingJSONs(t *testing.T) {
	for _, s := range jsonWalkSeeds {
		require.True(t, json.Valid([]byte(s)), s)
		checkJSONWalk(t, []byte(s))
	}
	_, err := jsonwalk.SplitObject([]byte(`[1]`))
	require.ErrorIs(t, err, jsonwalk.ErrNotObject)
	_, err = jsonwalk.SplitArray([]byte(`{"a":1}`))
	require.ErrorIs(t, err, jsonwalk.ErrNotArray)
}

// FuzzJSONWalk: on every valid JSON text, compacting, splitting and
// encoding a body without encoding/json's scanner give what encoding/json
// gives.
func FuzzJSONWalk(f *testing.F) {
	for _, s := range jsonWalkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if !json.Valid(src) {
			return
		}
		checkJSONWalk(t, src)
	})
}
