package openaiwire_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/openaiwire"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// field reads one field of a JSON request fixture as its list of elements,
// each element's bytes as the file holds them.
func field(t testing.TB, file, name string) []json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	require.NoError(t, err)
	var req map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(data, &req))
	var items []json.RawMessage
	require.NoError(t, json.Unmarshal(req[name], &items))
	return items
}

// stored is msgs as a round's event records them: encoded, then decoded
// and validated the way every entry point does (turn.Decode).
func stored(t testing.TB, msgs []turn.Message, response *turn.Message) ([]turn.Message, *turn.Message) {
	t.Helper()
	in := make([]turn.Message, len(msgs))
	copy(in, msgs)
	for i := range in {
		in[i].UUID = fmt.Sprintf("m-%d", i)
	}
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: "ev-1", TenantID: "t1", SessionID: "s1", Seq: 1,
		InputMessages: in, OccurredAt: time.Date(2025, 10, 1, 12, 0, 0, 0, time.UTC),
	}
	if response != nil {
		r := *response
		r.UUID = "m-response"
		ev.Response = &r
	}
	data, err := turn.Marshal(ev)
	require.NoError(t, err)
	got, err := turn.Decode(data, turn.DecodeOptions{Tenant: "t1"})
	require.NoError(t, err, "%s", data)
	return got.InputMessages, got.Response
}

func requireSameItems(t testing.TB, want, got []json.RawMessage) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, openaiwire.SameJSON(want[i], got[i]), "item %d:\nwant %s\n got %s", i, want[i], got[i])
	}
}

func requireSameBytes(t testing.TB, want, got []json.RawMessage) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, string(want[i]), string(got[i]), "item %d", i)
	}
}

// blockTypes lists each message's role and block types, for shape checks.
func blockTypes(msgs []turn.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		types := make([]string, len(m.Content))
		for j, b := range m.Content {
			types[j] = b.Type
		}
		out[i] = m.Role + ": " + strings.Join(types, " ")
	}
	return out
}

func TestResponsesCodexSession(t *testing.T) {
	t.Parallel()
	items := field(t, "responses_request.json", "input")
	conv, err := openaiwire.ResponsesInput(items)
	require.NoError(t, err)

	require.Len(t, conv.Instructions, 1, "the developer message the input opens with is the prefix")
	require.Equal(t, string(items[0]), string(conv.Instructions[0]))
	require.Equal(t, []string{
		"user: text text text",
		"assistant: openai_item tool_use",
		"user: tool_result",
		"assistant: openai_item tool_use",
		"user: tool_result",
		"assistant: text",
		"user: text",
	}, blockTypes(conv.Messages))

	n, spans := openaiwire.ResponsesSpans(items)
	require.Equal(t, 1, n)
	require.Equal(t, []int{3, 2, 1, 2, 1, 1, 1}, spans, "the spans fold the items as the mapping does: the three user items are one message")

	call := conv.Messages[1].Content[1]
	require.Equal(t, "call_7Qm2x", call.ID)
	require.Equal(t, "exec_command", call.Name)
	require.JSONEq(t, `{"cmd":"go test ./ledger -run TestBalance","workdir":"/home/dev/ledger"}`, string(call.Input))
	result := conv.Messages[2].Content[0]
	require.Equal(t, "call_7Qm2x", result.ToolUseID)
	require.Contains(t, (*result.Content)[0].Text, "balance = 90, want 100")
	require.Empty(t, conv.Messages[0].Content[0].Source, "a plain item needs no note")

	t.Run("back byte for byte", func(t *testing.T) {
		t.Parallel()
		out, err := openaiwire.ResponsesItems(conv.Messages, openaiwire.NewOriginals(items))
		require.NoError(t, err)
		requireSameBytes(t, items, append(append([]json.RawMessage{}, conv.Instructions...), out...))
	})
	t.Run("the same JSON without the client's bytes", func(t *testing.T) {
		t.Parallel()
		out, err := openaiwire.ResponsesItems(conv.Messages, nil)
		require.NoError(t, err)
		requireSameItems(t, items[1:], out)
	})
	t.Run("the same JSON from the stored event", func(t *testing.T) {
		t.Parallel()
		msgs, _ := stored(t, conv.Messages, nil)
		out, err := openaiwire.ResponsesItems(msgs, nil)
		require.NoError(t, err)
		requireSameItems(t, items[1:], out)
		// The reasoning item's encrypted content comes back byte for byte.
		require.Contains(t, string(out[3]), `"encrypted_content":"gAAAAABo3x9Kq1mLZpR7vT0w2cY5`)
		var reasoning struct {
			EncryptedContent string `json:"encrypted_content"`
		}
		var sent struct {
			EncryptedContent string `json:"encrypted_content"`
		}
		require.NoError(t, json.Unmarshal(out[3], &reasoning))
		require.NoError(t, json.Unmarshal(items[4], &sent))
		require.Equal(t, sent.EncryptedContent, reasoning.EncryptedContent)
	})
}

func TestResponsesChangedItemOnly(t *testing.T) {
	t.Parallel()
	items := field(t, "responses_request.json", "input")
	conv, err := openaiwire.ResponsesInput(items)
	require.NoError(t, err)
	msgs, _ := stored(t, conv.Messages, nil)

	// Micro-compaction clears the first tool result; recall puts a memory
	// beside the last user message.
	cleared := turn.Content{{Type: turn.BlockText, Text: assembly.ClearedText}}
	msgs[2].Content[0].Content = &cleared
	last := &msgs[len(msgs)-1]
	last.Content = append(last.Content, turn.Block{Type: turn.BlockText, Text: "<memory>Dana prefers table-driven tests.</memory>"})

	out, err := openaiwire.ResponsesItems(msgs, openaiwire.NewOriginals(items))
	require.NoError(t, err)
	require.Len(t, out, len(items))
	for i, it := range out {
		switch i {
		case 5: // the cleared output
			require.JSONEq(t, `{"type":"function_call_output","call_id":"call_7Qm2x","output":"[Old tool result content cleared]"}`, string(it))
		case 11: // the memory, an item of its own after the client's
			require.JSONEq(t, `{"type":"message","role":"user","content":[{"type":"input_text","text":"<memory>Dana prefers table-driven tests.</memory>"}]}`, string(it))
		default:
			require.Equal(t, string(items[i+1]), string(it), "item %d is the client's own bytes", i)
		}
	}
}

func TestResponsesUnknownItemsAndFields(t *testing.T) {
	t.Parallel()
	items := []json.RawMessage{
		json.RawMessage(`{"role":"user","content":"plain string, no type"}`),
		json.RawMessage(`{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"https://example.test/a.png","detail":"high"},{"type":"input_file","file_id":"file-9","filename":"spec.pdf"}],"x_extra":{"keep":[1,2.50,"three"]}}`),
		json.RawMessage(`{"type":"message","role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}`),
		json.RawMessage(`{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"go 1.26 release"}}`),
		json.RawMessage(`{"type":"custom_tool_call","id":"ctc_1","call_id":"call_P","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"}`),
		json.RawMessage(`{"type":"custom_tool_call_output","call_id":"call_P","output":[{"type":"input_text","text":"Done"},{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/4AAQ"}]}`),
		json.RawMessage(`{"type":"function_call","id":"fc_9","status":"completed","call_id":"call_Q","name":"lookup","arguments":"not json {"}`),
		json.RawMessage(`{"type":"function_call_output","call_id":"call_Q","output":"ok","status":"completed"}`),
		json.RawMessage(`{"type":"message","role":"developer","content":"Mid-session instruction."}`),
		json.RawMessage(`{"type":"item_reference","id":"msg_old"}`),
		json.RawMessage(`{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"I can't help with that."}]}`),
		json.RawMessage(`{"type":"local_shell_call_output","id":"lsco_1","output":"{\"stdout\":\"\"}"}`),
		json.RawMessage(`{"type":"future_item","payload":{"nested":[true,null]},"content":5,"id":7,"text":false}`),
	}
	conv, err := openaiwire.ResponsesInput(items)
	require.NoError(t, err)
	require.Empty(t, conv.Instructions)
	require.Equal(t, []string{
		"user: text text image document openai_item",
		"assistant: openai_item tool_use",
		"user: tool_result",
		"assistant: tool_use",
		"user: tool_result openai_item",
		"assistant: openai_item text",
		"user: openai_item",
		"assistant: openai_item",
	}, blockTypes(conv.Messages))
	image := conv.Messages[0].Content[2]
	require.Equal(t, int64(tokens.MediaTokens), tokens.EstimateBlock(image), "an image counts as one")

	msgs, _ := stored(t, conv.Messages, nil)
	out, err := openaiwire.ResponsesItems(msgs, nil)
	require.NoError(t, err)
	requireSameItems(t, items, out)

	out, err = openaiwire.ResponsesItems(msgs, openaiwire.NewOriginals(items))
	require.NoError(t, err)
	requireSameBytes(t, items, out)
}

func TestResponsesToolInputCleared(t *testing.T) {
	t.Parallel()
	items := []json.RawMessage{json.RawMessage(`{"type":"function_call","call_id":"c1","name":"write","arguments":"{\"path\": \"a.go\", \"body\": \"package a\"}"}`)}
	conv, err := openaiwire.ResponsesInput(items)
	require.NoError(t, err)
	conv.Messages[0].Content[0].Input = json.RawMessage(assembly.ClearedInput)
	out, err := openaiwire.ResponsesItems(conv.Messages, openaiwire.NewOriginals(items))
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"function_call","call_id":"c1","name":"write","arguments":"{}"}`, string(out[0]))
}

func TestChatRoundTrip(t *testing.T) {
	t.Parallel()
	messages := field(t, "chat_request.json", "messages")
	conv, err := openaiwire.ChatInput(messages)
	require.NoError(t, err)
	require.Len(t, conv.Instructions, 1)
	require.Equal(t, []string{
		"user: text",
		"assistant: tool_use",
		"user: tool_result",
		"assistant: text",
		"user: text image",
		"assistant: text tool_use tool_use",
		"user: tool_result tool_result openai_item text",
	}, blockTypes(conv.Messages))
	call := conv.Messages[1].Content[0]
	require.Equal(t, "call_Cal1", call.ID)
	require.JSONEq(t, `{"day":"2025-10-17"}`, string(call.Input))
	custom := conv.Messages[5].Content[2]
	require.Equal(t, "note", custom.Name)
	require.JSONEq(t, `{"input":"flyer: street fair, Saturday"}`, string(custom.Input))

	msgs, _ := stored(t, conv.Messages, nil)
	out, err := openaiwire.ChatMessages(msgs, nil)
	require.NoError(t, err)
	requireSameItems(t, messages[1:], out)

	out, err = openaiwire.ChatMessages(msgs, openaiwire.NewOriginals(messages))
	require.NoError(t, err)
	requireSameBytes(t, messages, append(append([]json.RawMessage{}, conv.Instructions...), out...))
}

func TestChatConsecutiveAssistantMessages(t *testing.T) {
	t.Parallel()
	messages := []json.RawMessage{
		json.RawMessage(`{"role":"assistant","content":"First thought."}`),
		json.RawMessage(`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`),
		json.RawMessage(`{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"refusal","refusal":"b"}],"tool_calls":[]}`),
		json.RawMessage(`{"role":"user","content":"one"}`),
		json.RawMessage(`{"role":"user","content":"two"}`),
		json.RawMessage(`{"role":"function","name":"legacy","content":"x"}`),
	}
	conv, err := openaiwire.ChatInput(messages)
	require.NoError(t, err)
	require.Equal(t, []string{"assistant: text tool_use text text", "user: text text openai_item"}, blockTypes(conv.Messages))
	msgs, _ := stored(t, conv.Messages, nil)
	out, err := openaiwire.ChatMessages(msgs, nil)
	require.NoError(t, err)
	requireSameItems(t, messages, out)
}

func TestResponsesStream(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join("testdata", "responses_stream.txt"))
	require.NoError(t, err)
	defer f.Close()
	a, err := openaiwire.ReadResponsesStream(f)
	require.NoError(t, err)
	require.Equal(t, "completed", a.Status)
	require.Len(t, a.Output, 2)
	require.Contains(t, string(a.Output[0]), `"encrypted_content":"gAAAAABo4Aa9Xy/+Zt=="`)
	require.Equal(t, &turn.Usage{InputTokens: 5210 - 4992, CacheReadInputTokens: 4992, OutputTokens: 87}, a.Usage)

	m, err := a.Message()
	require.NoError(t, err)
	require.Equal(t, "assistant", m.Role)
	require.Equal(t, "tool_use", m.StopReason)
	require.Equal(t, []string{"assistant: openai_item tool_use"}, blockTypes([]turn.Message{m}))
	require.JSONEq(t, `{"cmd":"go test ./ledger"}`, string(m.Content[1].Input))

	// Recorded, the answer renders back to the items the client sends next.
	_, resp := stored(t, nil, &m)
	out, err := openaiwire.ResponsesItems([]turn.Message{*resp}, nil)
	require.NoError(t, err)
	requireSameItems(t, a.Output, out)
}

func TestResponsesStreamFailures(t *testing.T) {
	t.Parallel()
	for name, stream := range map[string]string{
		"error event":     "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\"}\n\n",
		"response.failed": "data: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n",
		"cut short":       "data: {\"type\":\"response.created\",\"response\":{\"status\":\"in_progress\"}}\n\n",
	} {
		_, err := openaiwire.ReadResponsesStream(strings.NewReader(stream))
		require.Error(t, err, name)
	}
	_, err := openaiwire.ReadResponsesStream(strings.NewReader("data: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\"}\n\n"))
	require.ErrorContains(t, err, "rate_limit_exceeded: slow down")
}

func TestResponsesIncomplete(t *testing.T) {
	t.Parallel()
	a, err := openaiwire.ParseResponse([]byte(`{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"message","role":"assistant","id":"msg_1","status":"incomplete","content":[{"type":"output_text","text":"Partial","annotations":[]}]}],"usage":{"input_tokens":10,"output_tokens":5}}`))
	require.NoError(t, err)
	m, err := a.Message()
	require.NoError(t, err)
	require.Equal(t, "max_tokens", m.StopReason)
	require.Equal(t, "Partial", m.Content[0].Text)
	require.Equal(t, &turn.Usage{InputTokens: 10, OutputTokens: 5}, a.Usage)
}

func TestChatStream(t *testing.T) {
	t.Parallel()
	f, err := os.Open(filepath.Join("testdata", "chat_stream.txt"))
	require.NoError(t, err)
	defer f.Close()
	a, err := openaiwire.ReadChatStream(f)
	require.NoError(t, err)
	require.Equal(t, "tool_calls", a.FinishReason)
	require.Equal(t, &turn.Usage{InputTokens: 2300 - 2048, CacheReadInputTokens: 2048, OutputTokens: 41}, a.Usage)
	require.JSONEq(t, `{"role":"assistant","content":"Checking both days.","tool_calls":[
		{"id":"call_D1","type":"function","function":{"name":"list_events","arguments":"{\"day\":\"2025-10-17\"}"}},
		{"id":"call_D2","type":"function","function":{"name":"list_events","arguments":"{\"day\":\"2025-10-18\"}"}}]}`, string(a.Message))

	m, err := a.Turn()
	require.NoError(t, err)
	require.Equal(t, "tool_use", m.StopReason)
	require.Equal(t, []string{"assistant: text tool_use tool_use"}, blockTypes([]turn.Message{m}))
	_, resp := stored(t, nil, &m)
	out, err := openaiwire.ChatMessages([]turn.Message{*resp}, nil)
	require.NoError(t, err)
	requireSameItems(t, []json.RawMessage{a.Message}, out)
}

func TestChatStreamWithoutUsageOrContent(t *testing.T) {
	t.Parallel()
	stream := "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"hm\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"reasoning_content\":\"m.\",\"content\":\"Yes\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other choice\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n"
	a, err := openaiwire.ReadChatStream(strings.NewReader(stream))
	require.NoError(t, err)
	require.Nil(t, a.Usage)
	require.JSONEq(t, `{"role":"assistant","reasoning_content":"hmm.","content":"Yes"}`, string(a.Message))
	m, err := a.Turn()
	require.NoError(t, err)
	require.Equal(t, "end_turn", m.StopReason)

	_, err = openaiwire.ReadChatStream(strings.NewReader("data: {\"error\":{\"type\":\"server_error\",\"message\":\"overloaded\"}}\n\n"))
	require.ErrorContains(t, err, "overloaded")
	_, err = openaiwire.ReadChatStream(strings.NewReader("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut\"}}]}\n\n"))
	require.Error(t, err)
}

func TestParseChatCompletion(t *testing.T) {
	t.Parallel()
	a, err := openaiwire.ParseChatCompletion([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Done.","refusal":null,"annotations":[]},"finish_reason":"length"}],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":0}}}`))
	require.NoError(t, err)
	require.Equal(t, &turn.Usage{InputTokens: 100, OutputTokens: 7}, a.Usage)
	m, err := a.Turn()
	require.NoError(t, err)
	require.Equal(t, "max_tokens", m.StopReason)
	out, err := openaiwire.ChatMessages([]turn.Message{m}, nil)
	require.NoError(t, err)
	requireSameItems(t, []json.RawMessage{a.Message}, out)
}

func TestUsage(t *testing.T) {
	t.Parallel()
	u, err := openaiwire.ResponsesUsage(json.RawMessage(`{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":256},"total_tokens":1500}`))
	require.NoError(t, err)
	require.Equal(t, turn.Usage{InputTokens: 176, CacheReadInputTokens: 1024, OutputTokens: 300}, u)
	require.Equal(t, int64(1200), u.InputSide(), "the input side is what the upstream counted as input")

	u, err = openaiwire.ChatUsage(json.RawMessage(`{"prompt_tokens":50,"completion_tokens":9,"total_tokens":59}`))
	require.NoError(t, err)
	require.Equal(t, turn.Usage{InputTokens: 50, OutputTokens: 9}, u)

	u, err = openaiwire.ChatUsage(json.RawMessage(`{"prompt_tokens":10,"completion_tokens":-1,"prompt_tokens_details":{"cached_tokens":20}}`))
	require.NoError(t, err)
	require.Equal(t, turn.Usage{CacheReadInputTokens: 10}, u, "cached never exceeds the input, nothing is negative")
}
