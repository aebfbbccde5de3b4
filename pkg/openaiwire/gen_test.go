package openaiwire_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mnemos-ai/mnemos/pkg/openaiwire"
)

// gen makes random item lists of the shapes the mapping reads, with
// random extra fields and forms, so the round trip is tried on what
// clients send rather than on what random bytes rarely spell.
type gen struct{ r *rand.Rand }

func (g gen) pick(options ...any) any { return options[g.r.IntN(len(options))] }

func (g gen) text() string {
	return g.pick("", "hi", "a <b> & \"c\"", "line\nbreak\ttab", "ünïcödé ☃", `{"looks":"json"}`, "\\u0041").(string)
}

// extras adds zero to two fields no mapping reads.
func (g gen) extras(o map[string]any) map[string]any {
	for range g.r.IntN(3) {
		o[g.pick("id", "status", "x_meta", "annotations", "name", "logprobs").(string)] =
			g.pick("v1", 3, 2.50, nil, true, []any{}, map[string]any{"k": []any{1, "x"}})
	}
	return o
}

func (g gen) args() string {
	return g.pick("{}", `{"cmd":"ls"}`, `{"b": 1, "a": [true]}`, "{\n  \"x\": null\n}", "not json", "", `["list"]`, `{"a":1e2}`).(string)
}

func (g gen) responsesPart(role string) any {
	switch g.r.IntN(6) {
	case 0:
		return g.extras(map[string]any{"type": "input_image", "image_url": g.pick("https://x.test/i.png", "data:image/png;base64,iVBOR", "data:;base64,AA").(string), "detail": "auto"})
	case 1:
		return g.extras(map[string]any{"type": "input_file", g.pick("file_id", "file_data", "file_url").(string): g.pick("file-1", "data:application/pdf;base64,JVB", "raw==").(string)})
	case 2:
		return g.extras(map[string]any{"type": "refusal", "refusal": g.text()})
	default:
		t := "input_text"
		if role == "assistant" && g.r.IntN(4) > 0 {
			t = "output_text"
		}
		return g.extras(map[string]any{"type": t, "text": g.text()})
	}
}

func (g gen) responsesItem() any {
	switch g.r.IntN(9) {
	case 0, 1, 2:
		role := g.pick("user", "assistant", "developer", "system").(string)
		item := g.extras(map[string]any{"role": role})
		if g.r.IntN(4) > 0 {
			item["type"] = "message"
		}
		if g.r.IntN(3) == 0 {
			item["content"] = g.text()
		} else {
			parts := make([]any, g.r.IntN(3)+1)
			for i := range parts {
				parts[i] = g.responsesPart(role)
			}
			item["content"] = parts
		}
		return item
	case 3:
		return g.extras(map[string]any{"type": "function_call", "call_id": "call_" + fmt.Sprint(g.r.IntN(5)), "name": "exec", "arguments": g.args()})
	case 4:
		return g.extras(map[string]any{"type": "custom_tool_call", "call_id": "c", "name": "patch", "input": g.text()})
	case 5:
		var output any = g.text()
		if g.r.IntN(2) == 0 {
			output = []any{g.responsesPart("user"), g.responsesPart("user")}
		}
		return g.extras(map[string]any{"type": g.pick("function_call_output", "custom_tool_call_output").(string), "call_id": "call_1", "output": output})
	case 6:
		return map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}, "encrypted_content": "gAAA/+=="}
	case 7:
		return g.extras(map[string]any{"type": g.pick("web_search_call", "item_reference", "local_shell_call_output").(string)})
	default:
		return g.pick(map[string]any{"type": "message", "role": "user", "content": []any{}}, map[string]any{"type": "function_call", "call_id": "", "name": "x", "arguments": "{}"}, "a string", 5)
	}
}

func (g gen) chatPart(role string) any {
	switch g.r.IntN(5) {
	case 0:
		if role == "user" {
			return g.extras(map[string]any{"type": "image_url", "image_url": map[string]any{"url": g.pick("https://x.test/i.png", "data:image/jpeg;base64,/9j").(string), "detail": "low"}})
		}
	case 1:
		if role == "user" {
			return map[string]any{"type": "file", "file": map[string]any{g.pick("file_id", "file_data").(string): "data:application/pdf;base64,JVB", "filename": "a.pdf"}}
		}
	case 2:
		if role == "assistant" {
			return map[string]any{"type": "refusal", "refusal": g.text()}
		}
	}
	return g.extras(map[string]any{"type": "text", "text": g.text()})
}

func (g gen) chatMessage() any {
	switch g.r.IntN(6) {
	case 0, 1:
		m := g.extras(map[string]any{"role": "user"})
		if g.r.IntN(2) == 0 {
			m["content"] = g.text()
		} else {
			m["content"] = []any{g.chatPart("user"), g.chatPart("user")}
		}
		return m
	case 2, 3:
		m := map[string]any{"role": "assistant"}
		switch g.r.IntN(4) {
		case 0:
			m["content"] = g.text()
		case 1:
			m["content"] = []any{g.chatPart("assistant")}
		case 2:
			m["content"] = nil
		}
		var calls []any
		for range g.r.IntN(3) {
			if g.r.IntN(3) == 0 {
				calls = append(calls, map[string]any{"id": "cc", "type": "custom", "custom": map[string]any{"name": "n", "input": g.text()}})
			} else {
				calls = append(calls, map[string]any{"id": "call_" + fmt.Sprint(g.r.IntN(5)), "type": "function", "function": map[string]any{"name": "f", "arguments": g.args()}})
			}
		}
		if calls != nil || g.r.IntN(3) == 0 {
			m["tool_calls"] = calls
		}
		return g.extras(m)
	case 4:
		var content any = g.text()
		if g.r.IntN(3) == 0 {
			content = []any{g.chatPart("tool")}
		}
		return g.extras(map[string]any{"role": "tool", "tool_call_id": "call_1", "content": content})
	default:
		return g.pick(map[string]any{"role": "system", "content": "s"}, map[string]any{"role": "function", "name": "f", "content": "x"}, map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_audio", "input_audio": map[string]any{"data": "AA", "format": "wav"}}}})
	}
}

func (g gen) list(item func() any) []byte {
	items := make([]any, g.r.IntN(8))
	for i := range items {
		items[i] = item()
	}
	data, err := json.Marshal(items)
	if err != nil {
		panic(err)
	}
	return data
}

func TestRoundTripGenerated(t *testing.T) {
	t.Parallel()
	g := gen{rand.New(rand.NewPCG(61, 4))}
	for i := range 1500 {
		data := g.list(g.responsesItem)
		items, ok := fuzzItems(data)
		if !ok {
			t.Fatalf("list %d is no list: %s", i, data)
		}
		conv, err := openaiwire.ResponsesInput(items)
		if err != nil {
			t.Fatalf("list %d: %v\n%s", i, err, data)
		}
		checkRoundTrip(t, items, conv, openaiwire.ResponsesItems)

		data = g.list(g.chatMessage)
		if items, ok = fuzzItems(data); !ok {
			t.Fatalf("list %d is no list: %s", i, data)
		}
		if conv, err = openaiwire.ChatInput(items); err != nil {
			t.Fatalf("list %d: %v\n%s", i, err, data)
		}
		checkRoundTrip(t, items, conv, openaiwire.ChatMessages)
	}
}
