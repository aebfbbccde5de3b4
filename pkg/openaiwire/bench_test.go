package openaiwire_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mnemos-ai/mnemos/pkg/openaiwire"
)

// codexHistory is a Codex-like input of rounds: a developer message, the
// user's task, then reasoning, a command call and its output each round,
// about size bytes in all.
func codexHistory(size int) []json.RawMessage {
	items := []json.RawMessage{
		json.RawMessage(`{"type":"message","role":"developer","content":[{"type":"input_text","text":"You are a coding agent."}]}`),
		json.RawMessage(`{"type":"message","role":"user","content":[{"type":"input_text","text":"count the lines of every file"}]}`),
	}
	output := strings.Repeat("line of a command's output, 42 bytes long\n", 100)
	n := 0
	for i := 0; n < size; i++ {
		round := []string{
			fmt.Sprintf(`{"type":"reasoning","id":"rs_%d","summary":[],"content":null,"encrypted_content":"gAAAA%d"}`, i, i),
			fmt.Sprintf(`{"type":"function_call","id":"fc_%d","call_id":"call_%d","name":"exec_command","arguments":"{\"cmd\":\"wc -l file%d\"}","status":"completed"}`, i, i, i),
			fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d","output":%q}`, i, output),
		}
		for _, it := range round {
			items = append(items, json.RawMessage(it))
			n += len(it)
		}
	}
	return items
}

// BenchmarkResponsesInput maps a whole Codex-like input, as a caller
// without spans does for every request; BenchmarkResponsesSpans splits the
// same inputs as the proxy does every request, mapping nothing.
func BenchmarkResponsesInput(b *testing.B) {
	benchSizes(b, func(items []json.RawMessage) {
		if _, err := openaiwire.ResponsesInput(items); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkResponsesSpans(b *testing.B) {
	benchSizes(b, func(items []json.RawMessage) { openaiwire.ResponsesSpans(items) })
}

// benchSizes runs do on inputs of about 40 KB and 600 KB (10K and 150K
// tokens).
func benchSizes(b *testing.B, do func([]json.RawMessage)) {
	for _, size := range []int{40_000, 600_000} {
		items := codexHistory(size)
		b.Run(fmt.Sprintf("%dKB", size/1000), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				do(items)
			}
		})
	}
}
