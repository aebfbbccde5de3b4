package jsonwalk_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
)

// The gateway's FuzzJSONWalk and the turn package's
// FuzzContentFastPathAgrees hold these to encoding/json on any input; this
// is the package's own check on the shapes that trip a walk.
func TestTheWalkAgreesWithEncodingJSON(t *testing.T) {
	for _, src := range []string{
		` { "a" : [ 1 , 2.5e3 , -0 , true , false , null ] , "b\"" : "x \\" } `,
		`"a \\\" b"`, `"\\\\"`, `[]`, `{}`, ` 12 `, `null`, `[{"k":"]}"},"}{"]`,
	} {
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, []byte(src)))
		require.Equal(t, want.String(), string(jsonwalk.AppendCompact(nil, []byte(src))), src)

		start := jsonwalk.SkipSpace([]byte(src), 0)
		end := jsonwalk.ValueEnd([]byte(src), start)
		require.Equal(t, string(bytes.TrimSpace([]byte(src))), src[start:end], "the value of %q", src)
	}
	require.Equal(t, 5, jsonwalk.StringEnd([]byte(`"a\\"b"`), 0), "an escaped backslash does not escape the quote after it")
}

// TestPlainStringIsWhatEncodingJSONDecodes: a string PlainString takes
// decodes to its bytes; those it leaves (escapes, invalid UTF-8, no
// string at all) are for encoding/json.
func TestPlainStringIsWhatEncodingJSONDecodes(t *testing.T) {
	for _, src := range []string{`"user"`, `""`, `"é <b>&</b> \u2028"`, "\"a\u2028b\""} {
		got, ok := jsonwalk.PlainString([]byte(src))
		var want string
		require.NoError(t, json.Unmarshal([]byte(src), &want))
		if ok {
			require.Equal(t, want, got, src)
		}
	}
	for _, src := range []string{`"a\"b"`, `"\u00e9"`, "\"\xff\"", `12`, `"`, `null`} {
		_, ok := jsonwalk.PlainString([]byte(src))
		require.False(t, ok, src)
	}
	got, ok := jsonwalk.PlainString([]byte(`"assistant"`))
	require.True(t, ok)
	require.Equal(t, "assistant", got)
}
