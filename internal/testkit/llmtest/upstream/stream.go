package upstream

import (
	"fmt"
	"net/http"
	"time"
)

// stream writes the answer as the API's server-sent events: message_start
// with the input side of the usage and output_tokens 1, a ping, each
// block's content_block_start, deltas (text_delta; thinking_delta then
// signature_delta; input_json_delta) and content_block_stop, then
// message_delta with the stop reason and the final usage, and message_stop.
func stream(w http.ResponseWriter, a answer, model string, usage Usage, delay time.Duration) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data map[string]any) {
		data["type"] = event
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, marshal(data))
		if flusher != nil {
			flusher.Flush()
		}
		if delay > 0 {
			time.Sleep(delay)
		}
	}
	send("message_start", map[string]any{"message": map[string]any{
		"id": a.msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": wire(usage, 1),
	}})
	send("ping", map[string]any{})
	for i, c := range a.content {
		delta := func(d map[string]any) { send("content_block_delta", map[string]any{"index": i, "delta": d}) }
		switch c["type"] {
		case "text":
			send("content_block_start", map[string]any{"index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range chunks(c["text"].(string), 60) {
				delta(map[string]any{"type": "text_delta", "text": part})
			}
		case "thinking":
			send("content_block_start", map[string]any{"index": i,
				"content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, part := range chunks(c["thinking"].(string), 60) {
				delta(map[string]any{"type": "thinking_delta", "thinking": part})
			}
			delta(map[string]any{"type": "signature_delta", "signature": c["signature"]})
		case "tool_use":
			send("content_block_start", map[string]any{"index": i,
				"content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			for _, part := range chunks(string(marshal(c["input"])), 40) {
				delta(map[string]any{"type": "input_json_delta", "partial_json": part})
			}
		}
		send("content_block_stop", map[string]any{"index": i})
	}
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": a.stop, "stop_sequence": nil},
		"usage": wire(usage, usage.OutputTokens)})
	send("message_stop", map[string]any{})
}

// chunks splits s into pieces of about n bytes, on rune boundaries.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut < len(s) && (s[cut]&0xC0) == 0x80 {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" || out == nil {
		out = append(out, s)
	}
	return out
}
