package responses

import (
	"encoding/json"
	"fmt"
)

// Reply is what a call answers: its output items, in order.
type Reply struct {
	Out []Out
}

// Out is one output item of a reply.
type Out struct {
	// Type is "message", "function_call" or "reasoning".
	Type string
	// Text is a message's text or a reasoning item's summary.
	Text string
	// Name and Arguments are a function_call's; Arguments is encoded as
	// JSON.
	Name      string
	Arguments any
}

// Say is a reply of outs.
func Say(outs ...Out) Reply { return Reply{Out: outs} }

// Text is an assistant message.
func Text(s string) Out { return Out{Type: "message", Text: s} }

// FunctionCall is a call of the function tool name with arguments.
func FunctionCall(name string, arguments any) Out {
	return Out{Type: "function_call", Name: name, Arguments: arguments}
}

// Reasoning is a reasoning item with summary; its encrypted content is
// opaque to the client, which sends it back as it came.
func Reasoning(summary string) Out { return Out{Type: "reasoning", Text: summary} }

// items are the reply's output items as the API writes them, their ids
// numbered by the call's (call).
func (r Reply) items(call string) []map[string]any {
	out := make([]map[string]any, 0, len(r.Out))
	for i, o := range r.Out {
		id := fmt.Sprintf("%s_%d", call, i)
		switch o.Type {
		case "function_call":
			args, err := json.Marshal(o.Arguments)
			if err != nil {
				panic(err) // a script's arguments: plain values
			}
			out = append(out, map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": "call_" + id, "name": o.Name,
				"arguments": string(args), "status": "completed"})
		case "reasoning":
			out = append(out, map[string]any{"type": "reasoning", "id": "rs_" + id,
				"summary":           []map[string]any{{"type": "summary_text", "text": o.Text}},
				"encrypted_content": "enc:" + id + ":" + o.Text})
		default:
			out = append(out, map[string]any{"type": "message", "id": "msg_" + id, "role": "assistant", "status": "completed",
				"content": []map[string]any{{"type": "output_text", "text": o.Text, "annotations": []any{}}}})
		}
	}
	return out
}

// outputTokens is the reply's size as the cache model counts it.
func (r Reply) outputTokens() int64 {
	var n int64
	for _, o := range r.Out {
		args, _ := json.Marshal(o.Arguments)
		n += int64(len(o.Text)+len(o.Name)+len(args))/4 + 1
	}
	return n
}
