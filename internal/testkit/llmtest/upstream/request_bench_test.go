package upstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// longCall is the body of a long session's call as an agent sends it: n
// rounds of a request, a tool call and its 3,200-byte result, then an
// answer; about 150K tokens for n = 150.
func longCall(n int) []byte {
	type block = map[string]any
	var msgs []map[string]any
	for i := range n {
		msgs = append(msgs,
			map[string]any{"role": "user", "content": []block{{"type": "text", "text": fmt.Sprintf("step %d: look at the next file", i)}}},
			map[string]any{"role": "assistant", "content": []block{{"type": "tool_use", "id": fmt.Sprintf("toolu_%03d", i), "name": "Read", "input": block{"file_path": fmt.Sprintf("/src/f%d.go", i)}}}},
			map[string]any{"role": "user", "content": []block{{"type": "tool_result", "tool_use_id": fmt.Sprintf("toolu_%03d", i), "content": strings.Repeat(fmt.Sprintf("line %d of the file\n", i), 160)}}},
			map[string]any{"role": "assistant", "content": []block{{"type": "text", "text": "Read it; the next one."}}},
		)
	}
	body, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 8192,
		"system": []block{{"type": "text", "text": "You are a careful agent.", "cache_control": block{"type": "ephemeral"}}}, "messages": msgs})
	return body
}

// BenchmarkDecodeAndMeasure is what the upstream does with each call
// before its script runs, on a call whose blocks it has seen before (a
// session's next round resends them all).
func BenchmarkDecodeAndMeasure(b *testing.B) {
	body := longCall(150)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req, err := decodeRequest(body)
		if err != nil {
			b.Fatal(err)
		}
		if Measure(&req).Total() == 0 {
			b.Fatal("nothing measured")
		}
	}
}
