package turn_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// obj is a JSON object under construction; events are built as obj so that a
// test case can delete or replace any field.
type obj = map[string]any

// validEvent is a small event that Decode accepts with DecodeOptions{}: one
// user message, an assistant response that calls a tool, and usage.
func validEvent() obj {
	return obj{
		"schema":            turn.SchemaV1,
		"event_id":          "ev-1",
		"tenant_id":         "acme",
		"session_id":        "s-123",
		"seq":               7,
		"agent_id":          "main",
		"memory_scope":      obj{"user": "u-42", "project": "repo-x"},
		"model":             "claude-sonnet-4-5",
		"context_window":    200000,
		"max_output_tokens": 32000,
		"input_messages": []any{
			obj{"uuid": "m-1", "role": "user", "content": "list the files"},
		},
		"response": obj{
			"uuid": "m-2", "role": "assistant", "stop_reason": "tool_use",
			"content": []any{
				obj{"type": "text", "text": "Listing."},
				obj{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": obj{"command": "ls"}},
			},
		},
		"usage": obj{
			"input_tokens": 1, "cache_creation_input_tokens": 955,
			"cache_read_input_tokens": 165803, "output_tokens": 301,
		},
		"occurred_at": "2026-11-22T10:00:00Z",
	}
}

// encode writes v as JSON; the test fails if it cannot.
func encode(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return data
}

// with returns validEvent() changed by edit.
func with(edit func(ev obj)) obj {
	ev := validEvent()
	edit(ev)
	return ev
}

func inputMessage(ev obj, i int) obj  { return ev["input_messages"].([]any)[i].(obj) }
func responseBlock(ev obj, i int) obj { return ev["response"].(obj)["content"].([]any)[i].(obj) }
func usageOf(ev obj) obj              { return ev["usage"].(obj) }
func setUsage(field string, v int) func(obj) {
	return func(ev obj) { usageOf(ev)[field] = v }
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()

	valid := encode(t, validEvent())
	badUTF8 := []byte(`{"schema":"mnemos.turn.v1","model":"caf` + "\xe9" + `"}`)
	tests := []struct {
		name   string
		data   []byte
		opts   turn.DecodeOptions
		reason turn.Reason
		// detail lists substrings the detail must contain: what to fix, and where.
		detail []string
	}{
		{
			name: "too large", data: valid, opts: turn.DecodeOptions{MaxBytes: len(valid) - 1},
			reason: turn.ReasonTooLarge, detail: []string{"limit"},
		},
		{
			name:   "invalid utf-8",
			data:   badUTF8,
			reason: turn.ReasonInvalidUTF8, detail: []string{fmt.Sprintf("at byte %d", bytes.IndexByte(badUTF8, 0xe9))},
		},
		{
			name:   "a NUL character in a tool input",
			data:   encode(t, with(func(ev obj) { responseBlock(ev, 1)["input"] = obj{"command": "printf 'a\x00b'"} })),
			reason: turn.ReasonNULCharacter, detail: []string{`\u0000`, "at byte"},
		},
		{
			name:   "a NUL character in text",
			data:   []byte(`{"schema":"mnemos.turn.v1","model":"a\u0000b"}`),
			reason: turn.ReasonNULCharacter, detail: []string{"at byte 37"},
		},
		{
			name: "truncated json", data: valid[:len(valid)-1],
			reason: turn.ReasonBadJSON, detail: []string{"invalid JSON"},
		},
		{
			name: "trailing comma", data: []byte(`{"schema":"mnemos.turn.v1",}`),
			reason: turn.ReasonBadJSON, detail: []string{"invalid JSON at byte"},
		},
		{
			name: "empty body", data: nil,
			reason: turn.ReasonBadJSON, detail: []string{"invalid JSON"},
		},
		{
			name: "array instead of object", data: []byte(`[` + string(valid) + `]`),
			reason: turn.ReasonBadJSON, detail: []string{"must be a JSON object", "an array"},
		},
		{
			name: "number instead of object", data: []byte(`42`),
			reason: turn.ReasonBadJSON, detail: []string{"must be a JSON object", "a number"},
		},
		{
			name: "null instead of object", data: []byte(`null`),
			reason: turn.ReasonBadJSON, detail: []string{"must be a JSON object", "null"},
		},
		{
			name:   "schema missing",
			data:   encode(t, with(func(ev obj) { delete(ev, "schema") })),
			reason: turn.ReasonUnknownSchema, detail: []string{`missing "schema"`, turn.SchemaV1},
		},
		{
			name:   "schema of another version",
			data:   encode(t, with(func(ev obj) { ev["schema"] = "mnemos.turn.v2" })),
			reason: turn.ReasonUnknownSchema, detail: []string{`"mnemos.turn.v2" is not supported`},
		},
		{
			name:   "schema not a string",
			data:   encode(t, with(func(ev obj) { ev["schema"] = 1 })),
			reason: turn.ReasonUnknownSchema, detail: []string{`"schema" must be a string`},
		},
		{
			// Keys are matched exactly: "SCHEMA" does not name the schema.
			name: "schema key in other case",
			data: encode(t, with(func(ev obj) {
				ev["SCHEMA"] = ev["schema"]
				delete(ev, "schema")
			})),
			reason: turn.ReasonUnknownSchema, detail: []string{`missing "schema"`},
		},
		{
			name:   "event_id missing",
			data:   encode(t, with(func(ev obj) { delete(ev, "event_id") })),
			reason: turn.ReasonSchemaViolation, detail: []string{"event_id"},
		},
		{
			name:   "seq 0",
			data:   encode(t, with(func(ev obj) { ev["seq"] = 0 })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/seq", "minimum"},
		},
		{
			name:   "seq not an integer",
			data:   encode(t, with(func(ev obj) { ev["seq"] = 1.5 })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/seq"},
		},
		{
			// The schema calls 1.0 an integer; Go does not, and says which field.
			name:   "seq written as 1.0",
			data:   []byte(strings.Replace(string(valid), `"seq":7`, `"seq":7.0`, 1)),
			reason: turn.ReasonSchemaViolation, detail: []string{"Event.seq"},
		},
		{
			name: "block type that is no type name",
			data: encode(t, with(func(ev obj) {
				responseBlock(ev, 0)["type"] = "Server Tool Use"
			})),
			reason: turn.ReasonSchemaViolation, detail: []string{"/response/content/0/type"},
		},
		{
			name: "block type that is no type name, in a tool result",
			data: encode(t, with(func(ev obj) {
				inputMessage(ev, 0)["content"] = []any{obj{
					"type": "tool_result", "tool_use_id": "toolu_0",
					"content": []any{obj{"type": "", "source": obj{}}},
				}}
			})),
			reason: turn.ReasonSchemaViolation, detail: []string{"/input_messages/0/content/0/content/0/type"},
		},
		{
			name:   "tool_use without id",
			data:   encode(t, with(func(ev obj) { delete(responseBlock(ev, 1), "id") })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/response/content/1", "id"},
		},
		{
			name:   "tool_use with empty id",
			data:   encode(t, with(func(ev obj) { responseBlock(ev, 1)["id"] = "" })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/response/content/1/id"},
		},
		{
			name:   "tool_use input not an object",
			data:   encode(t, with(func(ev obj) { responseBlock(ev, 1)["input"] = "ls" })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/response/content/1/input"},
		},
		{
			name:   "text block without text",
			data:   encode(t, with(func(ev obj) { delete(responseBlock(ev, 0), "text") })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/response/content/0", "text"},
		},
		{
			name:   "role system",
			data:   encode(t, with(func(ev obj) { inputMessage(ev, 0)["role"] = "system" })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/input_messages/0/role"},
		},
		{
			name:   "response from the user",
			data:   encode(t, with(func(ev obj) { ev["response"].(obj)["role"] = "user" })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/response/role"},
		},
		{
			// encoding/json matches keys regardless of case; the schema does
			// not, so "Role" would have smuggled a system message past it.
			name:   "role smuggled in another letter case",
			data:   encode(t, with(func(ev obj) { inputMessage(ev, 0)["Role"] = "system" })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/input_messages/0", `"Role"`, `"role"`},
		},
		{
			name: "block field in another case, with a long s",
			data: encode(t, with(func(ev obj) {
				responseBlock(ev, 0)["type"] = "thinking"
				responseBlock(ev, 0)["thinking"] = "hmm"
				responseBlock(ev, 0)["\u017fignature"] = "sig"
			})),
			reason: turn.ReasonSchemaViolation, detail: []string{"/response/content/0", `"signature"`},
		},
		{
			name:   "extra top-level field",
			data:   encode(t, with(func(ev obj) { ev["priority"] = "high" })),
			reason: turn.ReasonSchemaViolation, detail: []string{"priority"},
		},
		{
			name:   "occurred_at not a date-time",
			data:   encode(t, with(func(ev obj) { ev["occurred_at"] = "yesterday" })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/occurred_at"},
		},
		{
			name:   "occurred_at without a zone",
			data:   encode(t, with(func(ev obj) { ev["occurred_at"] = "2026-11-22T10:00:00" })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/occurred_at"},
		},
		{
			// Valid RFC 3339, but in UTC it is year -1, which no encoder writes back.
			name:   "occurred_at before year 0 in UTC",
			data:   encode(t, with(func(ev obj) { ev["occurred_at"] = "0000-01-01T00:30:00+01:00" })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/occurred_at"},
		},
		{
			name:   "content neither string nor blocks",
			data:   encode(t, with(func(ev obj) { inputMessage(ev, 0)["content"] = 12 })),
			reason: turn.ReasonSchemaViolation, detail: []string{"/input_messages/0/content"},
		},
		{
			name:   "tenant_id missing and not named by the transport",
			data:   encode(t, with(func(ev obj) { delete(ev, "tenant_id") })),
			reason: turn.ReasonSchemaViolation, detail: []string{"tenant_id is required"},
		},
		{
			name:   "negative input_tokens",
			data:   encode(t, with(setUsage("input_tokens", -1))),
			reason: turn.ReasonNegativeUsage, detail: []string{"usage.input_tokens is -1"},
		},
		{
			name:   "negative cache_creation_input_tokens",
			data:   encode(t, with(setUsage("cache_creation_input_tokens", -955))),
			reason: turn.ReasonNegativeUsage, detail: []string{"usage.cache_creation_input_tokens is -955"},
		},
		{
			name:   "negative cache_read_input_tokens",
			data:   encode(t, with(setUsage("cache_read_input_tokens", -2))),
			reason: turn.ReasonNegativeUsage, detail: []string{"usage.cache_read_input_tokens is -2"},
		},
		{
			name:   "negative output_tokens",
			data:   encode(t, with(setUsage("output_tokens", -301))),
			reason: turn.ReasonNegativeUsage, detail: []string{"usage.output_tokens is -301"},
		},
		{
			name: "tenant in the body is not the transport's", data: valid,
			opts:   turn.DecodeOptions{Tenant: "globex"},
			reason: turn.ReasonTenantMismatch, detail: []string{`"acme"`, `"globex"`},
		},
		{
			name: "session in the body is not the transport's", data: valid,
			opts:   turn.DecodeOptions{Tenant: "acme", Session: "s-999"},
			reason: turn.ReasonSessionMismatch, detail: []string{`"s-123"`, `"s-999"`},
		},
		{
			name: "same uuid twice with different content",
			data: encode(t, with(func(ev obj) {
				ev["input_messages"] = append(ev["input_messages"].([]any),
					obj{"uuid": "m-1", "role": "user", "content": "list the files, please"})
			})),
			reason: turn.ReasonDuplicateUUID, detail: []string{"m-1", "different content"},
		},
		{
			name: "same uuid twice with another role",
			data: encode(t, with(func(ev obj) {
				ev["input_messages"] = append(ev["input_messages"].([]any),
					obj{"uuid": "m-1", "role": "assistant", "content": "list the files"})
			})),
			reason: turn.ReasonDuplicateUUID, detail: []string{"m-1"},
		},
		{
			// encoding/json keeps the last value, another reader the first.
			name:   "tenant_id twice",
			data:   []byte(`{"schema":"mnemos.turn.v1","tenant_id":"acme","tenant_id":"globex"}`),
			reason: turn.ReasonDuplicateKey, detail: []string{`"tenant_id"`, "at byte 46"},
		},
		{
			name:   "a key twice deep in a tool input",
			data:   bytes.Replace(valid, []byte(`"input":{`), []byte(`"input":{"a":{"b":[{"c":1,"c":2}]},`), 1),
			reason: turn.ReasonDuplicateKey, detail: []string{`"c"`},
		},
		{
			name:   "a key twice, once escaped",
			data:   []byte(`{"schema":"mnemos.turn.v1","seq":1,"s\u0065q":2}`),
			reason: turn.ReasonDuplicateKey, detail: []string{`"seq"`},
		},
		{
			name:   "response uuid equal to an input uuid",
			data:   encode(t, with(func(ev obj) { ev["response"].(obj)["uuid"] = "m-1" })),
			reason: turn.ReasonDuplicateUUID, detail: []string{"response uuid m-1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev, err := turn.Decode(tt.data, tt.opts)
			require.Error(t, err)
			require.Zero(t, ev, "a refused event must not be half returned")
			ie, ok := turn.AsInputError(err)
			require.True(t, ok, "want an *InputError, got %T: %v", err, err)
			require.Equal(t, tt.reason, ie.Reason, "detail: %s", ie.Detail)
			for _, want := range tt.detail {
				require.Contains(t, ie.Detail, want)
			}
			require.Equal(t, string(tt.reason)+": "+ie.Detail, err.Error())
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	t.Parallel()

	t.Run("full event", func(t *testing.T) {
		t.Parallel()
		ev, err := turn.Decode(encode(t, validEvent()), turn.DecodeOptions{Tenant: "acme", Session: "s-123"})
		require.NoError(t, err)
		require.Equal(t, turn.Event{
			Schema: turn.SchemaV1, EventID: "ev-1", TenantID: "acme", SessionID: "s-123", Seq: 7,
			AgentID: "main", MemoryScope: map[string]string{"user": "u-42", "project": "repo-x"},
			Model: "claude-sonnet-4-5", ContextWindow: 200000, MaxOutputTokens: 32000,
			InputMessages: []turn.Message{
				{UUID: "m-1", Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "list the files"}}},
			},
			Response: &turn.Message{UUID: "m-2", Role: "assistant", StopReason: "tool_use", Content: turn.Content{
				{Type: turn.BlockText, Text: "Listing."},
				{Type: turn.BlockToolUse, ID: "toolu_1", Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
			}},
			Usage:      &turn.Usage{InputTokens: 1, CacheCreationInputTokens: 955, CacheReadInputTokens: 165803, OutputTokens: 301},
			OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		}, ev)
	})

	t.Run("tenant filled in from the transport", func(t *testing.T) {
		t.Parallel()
		data := encode(t, with(func(ev obj) { delete(ev, "tenant_id") }))
		ev, err := turn.Decode(data, turn.DecodeOptions{Tenant: "acme"})
		require.NoError(t, err)
		require.Equal(t, "acme", ev.TenantID)
	})

	t.Run("only the required fields", func(t *testing.T) {
		t.Parallel()
		data := []byte(`{"schema":"mnemos.turn.v1","event_id":"e","session_id":"s","seq":1,"input_messages":[],"occurred_at":"2026-01-02T03:04:05Z"}`)
		ev, err := turn.Decode(data, turn.DecodeOptions{Tenant: "t"})
		require.NoError(t, err)
		require.Equal(t, "t", ev.TenantID)
		require.Equal(t, turn.MainAgent, ev.Agent())
		require.Nil(t, ev.Response)
		require.Nil(t, ev.Usage)
		require.Empty(t, ev.Messages())
	})

	t.Run("exact duplicate message dropped", func(t *testing.T) {
		t.Parallel()
		data := encode(t, with(func(ev obj) {
			msgs := ev["input_messages"].([]any)
			// The same message again, its content spelled as blocks this time.
			again := obj{"uuid": "m-1", "role": "user", "content": []any{obj{"type": "text", "text": "list the files"}}}
			ev["input_messages"] = append(msgs, obj{"uuid": "m-0", "role": "user", "content": "first"}, again)
		}))
		ev, err := turn.Decode(data, turn.DecodeOptions{})
		require.NoError(t, err)
		uuids := make([]string, 0, len(ev.InputMessages))
		for _, m := range ev.InputMessages {
			uuids = append(uuids, m.UUID)
		}
		require.Equal(t, []string{"m-1", "m-0"}, uuids, "the first occurrence stays in place")
	})

	t.Run("string content becomes one text block", func(t *testing.T) {
		t.Parallel()
		ev, err := turn.Decode(encode(t, validEvent()), turn.DecodeOptions{})
		require.NoError(t, err)
		require.Equal(t, turn.Content{{Type: turn.BlockText, Text: "list the files"}}, ev.InputMessages[0].Content)
	})

	t.Run("occurred_at with an offset is kept in UTC", func(t *testing.T) {
		t.Parallel()
		data := encode(t, with(func(ev obj) { ev["occurred_at"] = "2026-11-22T12:30:00.5+02:30" }))
		ev, err := turn.Decode(data, turn.DecodeOptions{})
		require.NoError(t, err)
		require.Equal(t, time.Date(2026, 11, 22, 10, 0, 0, 5e8, time.UTC), ev.OccurredAt)
		require.Equal(t, time.UTC, ev.OccurredAt.Location())
	})

	t.Run("raw json is compacted", func(t *testing.T) {
		t.Parallel()
		data := []byte(strings.Replace(string(encode(t, validEvent())), `{"command":"ls"}`, "{ \"command\" :\n\t\"ls\" }", 1))
		require.Contains(t, string(data), "\n\t")
		ev, err := turn.Decode(data, turn.DecodeOptions{})
		require.NoError(t, err)
		require.Equal(t, `{"command":"ls"}`, string(ev.Response.Content[1].Input))
	})

	t.Run("stop_reason null", func(t *testing.T) {
		t.Parallel()
		data := encode(t, with(func(ev obj) { ev["response"].(obj)["stop_reason"] = nil }))
		ev, err := turn.Decode(data, turn.DecodeOptions{})
		require.NoError(t, err)
		require.Empty(t, ev.Response.StopReason)
	})
}

func TestAsInputError(t *testing.T) {
	t.Parallel()

	ie := turn.Refuse(turn.ReasonSeqConflict, "seq %d already holds event %s", 3, "ev-9")
	require.Equal(t, "seq_conflict: seq 3 already holds event ev-9", ie.Error())

	got, ok := turn.AsInputError(errors.Join(errors.New("context"), ie))
	require.True(t, ok)
	require.Same(t, ie, got)

	_, ok = turn.AsInputError(errors.New("database is down"))
	require.False(t, ok)
}

func TestClosesUserTurn(t *testing.T) {
	t.Parallel()

	text := turn.Block{Type: turn.BlockText, Text: "done"}
	toolUse := turn.Block{Type: turn.BlockToolUse, ID: "toolu_1", Name: "Bash", Input: json.RawMessage(`{}`)}
	tests := []struct {
		name     string
		response *turn.Message
		want     bool
	}{
		{"no response", nil, false},
		{"end_turn without tool_use", &turn.Message{StopReason: "end_turn", Content: turn.Content{text}}, true},
		{"end_turn with empty content", &turn.Message{StopReason: "end_turn"}, true},
		{"end_turn with a tool_use", &turn.Message{StopReason: "end_turn", Content: turn.Content{text, toolUse}}, false},
		{"tool_use", &turn.Message{StopReason: "tool_use", Content: turn.Content{toolUse}}, false},
		{"max_tokens", &turn.Message{StopReason: "max_tokens", Content: turn.Content{text}}, false},
		{"stop_reason missing", &turn.Message{Content: turn.Content{text}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev := turn.Event{Response: tt.response}
			require.Equal(t, tt.want, ev.ClosesUserTurn())
		})
	}
}

func TestEventHelpers(t *testing.T) {
	t.Parallel()

	in := []turn.Message{{UUID: "a", Role: "user"}, {UUID: "b", Role: "user"}}
	resp := &turn.Message{UUID: "c", Role: "assistant"}
	ev := turn.Event{InputMessages: in, Response: resp}
	require.Equal(t, []turn.Message{in[0], in[1], *resp}, ev.Messages())
	require.Equal(t, turn.MainAgent, ev.Agent())

	ev.Response = nil
	ev.AgentID = "explore-1"
	require.Equal(t, in, ev.Messages())
	require.Equal(t, "explore-1", ev.Agent())

	m := turn.Message{Content: turn.Content{
		{Type: turn.BlockToolUse}, {Type: turn.BlockText}, {Type: turn.BlockToolUse}, {Type: turn.BlockToolResult},
	}}
	require.Equal(t, 2, m.ToolUseCount())
}

func TestUsage(t *testing.T) {
	t.Parallel()

	u := turn.Usage{InputTokens: 1, CacheCreationInputTokens: 955, CacheReadInputTokens: 165803, OutputTokens: 301}
	require.Equal(t, u.InputTokens+u.CacheCreationInputTokens+u.CacheReadInputTokens, u.InputSide())
	require.Equal(t, int64(1+955+165803), u.InputSide())
	require.Equal(t, u.InputSide()+u.OutputTokens, u.Total())
	require.Equal(t, int64(1+955+165803+301), u.Total())
	require.Zero(t, turn.Usage{}.Total())
}

func TestDuplicateAfterADroppedRepeatComparesWithTheFirst(t *testing.T) {
	t.Parallel()
	msg := func(uuid, text string) string {
		return `{"uuid":"` + uuid + `","role":"user","content":"` + text + `"}`
	}
	// x, x (exact repeat, dropped), a, b, a (exact repeat): accepted. Dropping
	// the repeat shifts the kept messages, so the last a must be compared with
	// the first a, not with whatever now sits at a's original index (b).
	body := `{"schema":"mnemos.turn.v1","event_id":"e1","tenant_id":"t","session_id":"s","seq":1,"occurred_at":"2026-11-22T10:00:00Z","input_messages":[` +
		msg("x", "1") + "," + msg("x", "1") + "," + msg("a", "2") + "," + msg("b", "3") + "," + msg("a", "2") + `]}`
	ev, err := turn.Decode([]byte(body), turn.DecodeOptions{})
	require.NoError(t, err)
	require.Len(t, ev.InputMessages, 3)
	for i, want := range []string{"x", "a", "b"} {
		require.Equal(t, want, ev.InputMessages[i].UUID)
	}
}

func TestDecodeTakesAnEscapedBackslashBeforeU0000AsText(t *testing.T) {
	t.Parallel()
	// The text is a backslash followed by "u0000": six printable characters.
	data := encode(t, with(func(ev obj) { responseBlock(ev, 0)["text"] = `\u0000` }))
	require.Contains(t, string(data), `\\u0000`)
	ev, err := turn.Decode(data, turn.DecodeOptions{})
	require.NoError(t, err)
	require.Equal(t, `\u0000`, ev.Response.Content[0].Text)
}

// TestSchemaV1_1: request_prefix and client_compaction are read under
// mnemos.turn.v1.1 only; a v1 event naming them is refused with the field,
// and a v1 event without them reads as before.
func TestSchemaV1_1(t *testing.T) {
	t.Parallel()

	fields := func(ev obj) {
		ev["request_prefix"] = obj{"system": []obj{{"type": "text", "text": "You are careful."}}, "tools": []obj{{"name": "Read"}}, "hash": "sha256:ab"}
		ev["client_compaction"] = obj{"trigger": "manual", "pre_tokens": 155686}
	}
	ev, err := turn.Decode(encode(t, with(func(ev obj) { ev["schema"] = turn.SchemaV1_1; fields(ev) })), turn.DecodeOptions{Tenant: "acme"})
	require.NoError(t, err)
	require.Equal(t, turn.SchemaV1_1, ev.Schema)
	require.Equal(t, "sha256:ab", ev.RequestPrefix.Hash)
	require.JSONEq(t, `[{"type":"text","text":"You are careful."}]`, string(ev.RequestPrefix.System))
	require.Equal(t, &turn.ClientCompaction{Trigger: "manual", PreTokens: 155686}, ev.ClientCompaction)

	_, err = turn.Decode(encode(t, with(fields)), turn.DecodeOptions{Tenant: "acme"})
	ie, ok := turn.AsInputError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, turn.ReasonSchemaViolation, ie.Reason)

	for name, bad := range map[string]obj{
		"system not text blocks": {"system": []obj{{"type": "image"}}},
		"tools not an array":     {"tools": obj{"name": "Read"}},
		"negative tokens":        {"tokens": -1},
	} {
		_, err := turn.Decode(encode(t, with(func(ev obj) { ev["schema"] = turn.SchemaV1_1; ev["request_prefix"] = bad })), turn.DecodeOptions{Tenant: "acme"})
		ie, ok := turn.AsInputError(err)
		require.True(t, ok, "%s: %v", name, err)
		require.Equal(t, turn.ReasonSchemaViolation, ie.Reason, name)
		require.Contains(t, ie.Detail, "request_prefix", name)
	}
	_, err = turn.Decode(encode(t, with(func(ev obj) { ev["schema"] = "mnemos.turn.v2" })), turn.DecodeOptions{Tenant: "acme"})
	ie, ok = turn.AsInputError(err)
	require.True(t, ok)
	require.Equal(t, turn.ReasonUnknownSchema, ie.Reason)
	require.Contains(t, ie.Detail, turn.SchemaV1_1)
}
