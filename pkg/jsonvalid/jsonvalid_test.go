package jsonvalid_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/jsonvalid"
)

// seeds are texts at the edges of JSON's grammar, valid and not, and
// request bodies in the shapes the Messages proxy meets.
var seeds = []string{
	`{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":"hello"}]}`,
	" {\n  \"messages\" : [ {\"role\": \"user\", \"content\": [ {\"type\": \"text\", \"text\": \"a \\\"quoted\\\" <b>&amp;</b> \\\\\"} ] } ],\t\"system\":\"x\\u2028y\u2028z\" }\r\n",
	`{"a\"b":1,"c\\":"\\\\","<&>":{"x":[]},"messages":null,"e\u00e9":"\\u00e9"}`,
	``, ` `, `"`, `"a`, `"\"`, `"\u12"`, `"\u12G4"`, `"\x"`, "\"tab\there\"", "\"nl\nhere\"", "\"\x1f\"", "\"\x7f\xff\xfe\"",
	`"0123456789abcdef\"0123456789abcdef\\"`, `"` + strings.Repeat("a", 31) + `\u00e9` + strings.Repeat("b", 17) + `"`,
	`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-7`, `-1.5e+300`, `1ee2`, `+1`,
	`true`, `tru`, `truex`, `nul`, `null `, ` false`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a" 1}`, `{1:2}`, `{"a":1 "b":2}`,
	`[]`, `{}`, `[ ]`, `{ }`, `[[[]]]`, `[1] [2]`, `{"a":[{"b":{}}]}`, "\t[\r\n1\n]\n",
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range seeds {
		require.Equal(t, json.Valid([]byte(s)), jsonvalid.Valid([]byte(s)), "%.80q", s)
	}
}

// FuzzValid: Valid says what encoding/json's Valid says, on
// every input.
func FuzzValid(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if got, want := jsonvalid.Valid(src), json.Valid(src); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", src, got, want)
		}
	})
}

// BenchmarkValid: a request body of about 600 KB (150K tokens) checked
// by encoding/json and by Valid.
func BenchmarkValid(b *testing.B) {
	var msgs []string
	for i := range 200 {
		msgs = append(msgs, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_`+strings.Repeat("x", 20)+`","content":"`+
			strings.Repeat("line "+strings.Repeat("y", i%50)+` with \"quotes\" and a tab\t `, 60)+`"}]}`)
	}
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[` + strings.Join(msgs, ",") + `]}`)
	for _, c := range []struct {
		name  string
		valid func([]byte) bool
	}{{"encoding_json", json.Valid}, {"jsonvalid", jsonvalid.Valid}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !c.valid(body) {
					b.Fatal("not valid")
				}
			}
		})
	}
}
