package turn_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// schemaDecides reports whether data reaches the schema in Decode: one JSON
// object that decodes into an Event.
func schemaDecides(data []byte) bool {
	var ev turn.Event
	return turn.CheckEncoding(data, 1<<30) == nil && json.Unmarshal(data, &ev) == nil
}

// FuzzFastCheckAgreesWithSchema: what the fast check accepts, the schema
// accepts (the fast check may send more to the schema, never less); and
// the schema name it finds is the one decoding the event finds. Its seeds
// are the round-trip events; its own corpus is in
// testdata/fuzz/FuzzFastCheckAgreesWithSchema.
func FuzzFastCheckAgreesWithSchema(f *testing.F) {
	for _, data := range roundTripEvents {
		f.Add([]byte(data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if turn.CheckEncoding(data, 1<<30) == nil && turn.SchemaNamed(data) {
			var head struct {
				Schema string `json:"schema"`
			}
			var fields map[string]json.RawMessage
			if json.Unmarshal(data, &fields) != nil || json.Unmarshal(fields["schema"], &head.Schema) != nil ||
				head.Schema != turn.SchemaV1 && head.Schema != turn.SchemaV1_1 {
				t.Fatalf("the fast check found a schema name decoding does not find:\n%s", data)
			}
		}
		if !schemaDecides(data) || !turn.SchemaAccepts(data) {
			return
		}
		if err := turn.ValidateSchema(data); err != nil {
			t.Fatalf("the fast check accepted what the schema refuses (%v):\n%s", err, data)
		}
	})
}

// TestFastCheckAgreesOnTheSeeds runs the fuzz target's property over every
// seed of FuzzDecode, and checks that the fast check is taken: it accepts
// every round-trip event and the valid seeds, and refuses every seed the
// schema refuses.
func TestFastCheckAgreesOnTheSeeds(t *testing.T) {
	t.Parallel()

	for name, data := range roundTripEvents {
		require.True(t, turn.SchemaAccepts([]byte(data)), "round-trip event %s: the fast check sends it to the schema", name)
	}
	var refused int
	for name, data := range decodeSeeds(t) {
		if !schemaDecides(data) {
			continue
		}
		schemaErr := turn.ValidateSchema(data)
		fast := turn.SchemaAccepts(data)
		if schemaErr != nil {
			refused++
			require.False(t, fast, "%s: the fast check accepts what the schema refuses: %v", name, schemaErr)
		}
		if strings.HasPrefix(name, "valid_") {
			require.True(t, fast, "%s: the fast check sends a valid seed to the schema", name)
		}
	}
	require.Positive(t, refused, "no seed reached the schema and was refused there")
}

// TestFastCheckRefusesWhatTheSchemaRefuses: each case breaks one rule of
// the schema in an event that otherwise passes, and neither check accepts
// it.
func TestFastCheckRefusesWhatTheSchemaRefuses(t *testing.T) {
	t.Parallel()

	const base = `{"schema":"mnemos.turn.v1.1","event_id":"e1","session_id":"s1","seq":1,` +
		`"input_messages":[{"uuid":"u1","role":"user","content":[%s]}],%s"occurred_at":"2026-01-02T03:04:05Z"}`
	const okBlock = `{"type":"text","text":"hi"}`
	ok := fmt.Sprintf(base, okBlock, "")
	require.True(t, turn.SchemaAccepts([]byte(ok)))
	require.NoError(t, turn.ValidateSchema([]byte(ok)))

	for name, data := range map[string]string{
		"text block without text":        fmt.Sprintf(base, `{"type":"text"}`, ""),
		"thinking without thinking":      fmt.Sprintf(base, `{"type":"thinking","signature":"x"}`, ""),
		"redacted thinking without data": fmt.Sprintf(base, `{"type":"redacted_thinking"}`, ""),
		"tool use with an empty id":      fmt.Sprintf(base, `{"type":"tool_use","id":"","name":"Bash","input":{}}`, ""),
		"tool use without input":         fmt.Sprintf(base, `{"type":"tool_use","id":"t","name":"Bash"}`, ""),
		"tool use with input an array":   fmt.Sprintf(base, `{"type":"tool_use","id":"t","name":"Bash","input":[]}`, ""),
		"tool result without its use":    fmt.Sprintf(base, `{"type":"tool_result","content":"x"}`, ""),
		"nested block without text":      fmt.Sprintf(base, `{"type":"tool_result","tool_use_id":"t","content":[{"type":"text"}]}`, ""),
		"image without source":           fmt.Sprintf(base, `{"type":"image"}`, ""),
		"block type upper case":          fmt.Sprintf(base, `{"type":"Text","text":"hi"}`, ""),
		"block key in another case":      fmt.Sprintf(base, `{"type":"text","text":"hi","Text":"x"}`, ""),
		"unknown event property":         fmt.Sprintf(base, okBlock, `"extra":1,`),
		"seq zero":                       strings.Replace(ok, `"seq":1`, `"seq":0`, 1),
		"bad event id":                   strings.Replace(ok, `"e1"`, `"-e1"`, 1),
		"role system":                    strings.Replace(ok, `"role":"user"`, `"role":"system"`, 1),
		"response from the user":         fmt.Sprintf(base, okBlock, `"response":{"uuid":"u2","role":"user","content":"x"},`),
		"usage without output":           fmt.Sprintf(base, okBlock, `"usage":{"input_tokens":1},`),
		"usage over its bound":           fmt.Sprintf(base, okBlock, `"usage":{"input_tokens":1000000000001,"output_tokens":1},`),
		"context window too small":       fmt.Sprintf(base, okBlock, `"context_window":999,`),
		"unknown memory scope":           fmt.Sprintf(base, okBlock, `"memory_scope":{"team":"a"},`),
		"prefix in a v1 event":           strings.Replace(fmt.Sprintf(base, okBlock, `"request_prefix":{"tokens":5},`), `v1.1`, `v1`, 1),
		"system block not text":          fmt.Sprintf(base, okBlock, `"request_prefix":{"system":[{"type":"image","text":"x"}]},`),
		"unknown compaction trigger":     fmt.Sprintf(base, okBlock, `"client_compaction":{"trigger":"later"},`),
		"the thirtieth of February":      strings.Replace(ok, `2026-01-02`, `2026-02-30`, 1),
		"minute sixty":                   strings.Replace(ok, `03:04:05Z`, `03:60:05Z`, 1),
		"offset of 24 hours":             strings.Replace(ok, `03:04:05Z`, `03:04:05+24:00`, 1),
		"no time zone":                   strings.Replace(ok, `03:04:05Z`, `03:04:05`, 1),
	} {
		require.False(t, turn.SchemaAccepts([]byte(data)), "%s: the fast check accepts it", name)
		if schemaDecides([]byte(data)) {
			require.Error(t, turn.ValidateSchema([]byte(data)), "%s: the schema accepts it: the case tests nothing", name)
		}
	}
}

// benchEvent is an ordinary turn event (a tool result, and an answer calling
// the next tool), 1.2 KB: what the decode benchmarks decode.
var benchEvent = []byte(`{"schema":"mnemos.turn.v1","event_id":"bench-s1-7","session_id":"bench-s1","seq":7,` +
	`"model":"claude-sonnet-4-5","context_window":200000,` +
	`"input_messages":[{"uuid":"bench-s1-7-in","role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_6",` +
	`"content":"` + strings.Repeat("line of a file the tool read; ", 24) + `"}]}],` +
	`"response":{"uuid":"bench-s1-7-out","role":"assistant","stop_reason":"tool_use","content":[{"type":"text","text":"Reading the next file."},` +
	`{"type":"tool_use","id":"toolu_7","name":"Read","input":{"file_path":"/src/pkg/file7.go"}}]},` +
	`"usage":{"input_tokens":12,"cache_read_input_tokens":5400,"cache_creation_input_tokens":310,"output_tokens":64},` +
	`"occurred_at":"2026-11-29T03:00:00.123Z"}`)

// BenchmarkDecode: benchEvent decoded as the accountant decodes it, the
// same without the one-pass event decoder (fastevent.go), and the two
// checks decoding is made of.
func BenchmarkDecode(b *testing.B) {
	data := benchEvent
	require.True(b, turn.SchemaAccepts(data))
	opts := turn.DecodeOptions{Tenant: "acme"}
	benchSteps(b, len(data), map[string]func() error{
		"decode":        func() error { _, err := turn.Decode(data, opts); return err },
		"decode-slowly": func() error { _, err := turn.DecodeSlowly(data, opts); return err },
		"fast-check": func() error {
			if !turn.SchemaAccepts(data) {
				return errors.New("the fast check refused it")
			}
			return nil
		},
		"schema": func() error { return turn.ValidateSchema(data) },
	})
}

// benchSteps runs each step as a sub-benchmark over size bytes, with its
// allocations.
func benchSteps(b *testing.B, size int, steps map[string]func() error) {
	for name, step := range steps {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if err := step(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
