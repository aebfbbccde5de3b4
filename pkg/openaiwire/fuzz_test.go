package openaiwire_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/openaiwire"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// fuzzSeeds adds the fixture's list and a few small ones.
func fuzzSeeds(f *testing.F, file, name string, extra ...string) {
	items := field(f, file, name)
	all, err := json.Marshal(items)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(all)
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

// fuzzItems reads data as a list of items a turn event can carry: valid
// UTF-8 JSON without NUL (Postgres cannot store it, and turn.Decode refuses
// it) and without a key named twice (turn.Decode refuses those too).
func fuzzItems(data []byte) ([]json.RawMessage, bool) {
	if !utf8.Valid(data) || bytes.Contains(data, []byte(`\u0000`)) || !json.Valid(data) {
		return nil, false
	}
	if at, _ := turn.DuplicateKey(data); at >= 0 {
		return nil, false
	}
	var items []json.RawMessage
	if json.Unmarshal(data, &items) != nil {
		return nil, false
	}
	return items, true
}

// checkRoundTrip checks what the round trip of a list promises: the
// messages decode as a turn event, render back to the same JSON, and with
// the client's bytes at hand to the same bytes.
func checkRoundTrip(t *testing.T, items []json.RawMessage, conv openaiwire.Conversation,
	render func([]turn.Message, *openaiwire.Originals) ([]json.RawMessage, error)) {
	rest := items[len(conv.Instructions):]
	msgs, _ := stored(t, conv.Messages, nil)
	out, err := render(msgs, nil)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	requireSameItems(t, rest, out)
	again, err := render(conv.Messages, openaiwire.NewOriginals(items))
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	requireSameBytes(t, rest, again)
}

// checkSpans checks that the spans split the items as the whole mapping
// folds them: after its instructions, one span a message, each mapping
// alone to that message.
func checkSpans(t *testing.T, items []json.RawMessage, conv openaiwire.Conversation,
	spans func([]json.RawMessage) (int, []int), message func([]json.RawMessage) (turn.Message, error)) {
	n, lens := spans(items)
	if n != len(conv.Instructions) || len(lens) != len(conv.Messages) {
		t.Fatalf("spans: %d instructions and %d spans, the mapping %d and %d messages", n, len(lens), len(conv.Instructions), len(conv.Messages))
	}
	at := n
	for i, l := range lens {
		m, err := message(items[at : at+l])
		if err != nil {
			t.Fatalf("span %d: %v", i, err)
		}
		want, _ := json.Marshal(conv.Messages[i])
		got, _ := json.Marshal(m)
		if !bytes.Equal(want, got) {
			t.Fatalf("span %d maps to\n%s\nthe whole mapping to\n%s", i, got, want)
		}
		at += l
	}
	if at != len(items) {
		t.Fatalf("the spans cover %d of %d items", at, len(items))
	}
}

func FuzzResponsesRoundTrip(f *testing.F) {
	fuzzSeeds(f, "responses_request.json", "input",
		`[{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"},{"type":"refusal","refusal":"b"}]}]`,
		`[{"type":"function_call","call_id":"c","name":"n","arguments":"{\"b\":1,\"a\":[2]}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"},{"type":"input_file","file_data":"abc"}]}]`,
		`[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"data:;base64,AA"},{"type":"input_file","file_url":"data:x"}]},7,"s",null,[]]`,
		`[{"type":"custom_tool_call","call_id":"c","name":"p","input":""},{"type":"reasoning","summary":[],"encrypted_content":"e"}]`,
	)
	g := gen{rand.New(rand.NewPCG(1, 2))}
	for range 20 {
		f.Add(g.list(g.responsesItem))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		items, ok := fuzzItems(data)
		if !ok {
			return
		}
		conv, err := openaiwire.ResponsesInput(items)
		if err != nil {
			t.Fatalf("ResponsesInput: %v", err)
		}
		checkRoundTrip(t, items, conv, openaiwire.ResponsesItems)
		checkSpans(t, items, conv, openaiwire.ResponsesSpans, openaiwire.ResponsesMessage)
	})
}

func FuzzChatRoundTrip(f *testing.F) {
	fuzzSeeds(f, "chat_request.json", "messages",
		`[{"role":"assistant","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":""}}]}]`,
		`[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBER","filename":"a.pdf"}}]},{"role":"tool","tool_call_id":"a","content":[]}]`,
		`[{"role":"assistant","content":null,"tool_calls":[]},{"role":"system","content":"late"}]`,
	)
	g := gen{rand.New(rand.NewPCG(3, 4))}
	for range 20 {
		f.Add(g.list(g.chatMessage))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		items, ok := fuzzItems(data)
		if !ok {
			return
		}
		conv, err := openaiwire.ChatInput(items)
		if err != nil {
			t.Fatalf("ChatInput: %v", err)
		}
		checkRoundTrip(t, items, conv, openaiwire.ChatMessages)
		checkSpans(t, items, conv, openaiwire.ChatSpans, openaiwire.ChatMessage)
	})
}
