package turn_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/jsonvalid"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// eventsTheFastPathTakes are events as clients send them, beside
// roundTripEvents: whitespace between tokens, a key the structs do not
// have, a time with an offset, the v1.1 fields, escapes in the scope's keys.
var eventsTheFastPathTakes = []string{
	` { "schema" : "mnemos.turn.v1" , "event_id" : "e" , "session_id" : "s" , "seq" : 0 , "agent_id" : null , "context_window" : null ,
	    "input_messages" : [ { "uuid" : "u" , "role" : "user" , "stop_reason" : null } ] , "occurred_at" : "2026-12-03T19:00:00.5+02:00" , "extra" : { "a" : [ null ] } } `,
	`{"schema":"mnemos.turn.v1.1","event_id":"e","tenant_id":"acme","session_id":"s","seq":-3,"memory_scope":{},
	  "input_messages":[{"uuid":"u","role":"user","content":"plain"}],
	  "request_prefix":{"system":[{"type":"text","text":"sys"}],"tools":[ ],"tokens":12,"bytes":40,"hash":"h"},
	  "client_compaction":{"trigger":"auto","pre_tokens":9000},"occurred_at":"2026-12-03T19:00:00Z"}`,
	`{"schema":"mnemos.turn.v1","event_id":"e","session_id":"s","seq":9223372036854775807,"memory_scope":{"us\u0065r":"é\n"},
	  "input_messages":[{"uuid":"u","role":"user","content":[{"type":"server_tool_use","id":"x","input":{}}]}],
	  "response":{"uuid":"r","role":"assistant","content":[],"unknown":1},"usage":{"input_tokens":1,"other":2},
	  "occurred_at":"2026-12-03T19:00:00Z"}`,
}

// fastPathEvents are eventsTheFastPathTakes and roundTripEvents.
func fastPathEvents() []string {
	events := append([]string{}, eventsTheFastPathTakes...)
	for _, data := range roundTripEvents {
		events = append(events, data)
	}
	return events
}

func TestTheEventFastPathTakesEventsAsClientsSendThem(t *testing.T) {
	for _, in := range fastPathEvents() {
		fast, ok := turn.DecodeEventFast([]byte(in))
		require.True(t, ok, "declined %s", in)
		var slow turn.Event
		require.NoError(t, json.Unmarshal([]byte(in), &slow), in)
		require.Equal(t, slow, fast, in)
	}
}

// TestTheEventFastPathDeclinesWhatItIsNotSureOf: encoding/json decodes
// each of these by a rule of its own, or refuses it with its own words.
func TestTheEventFastPathDeclinesWhatItIsNotSureOf(t *testing.T) {
	for _, in := range []string{
		`[]`,
		`"event"`,
		`{"response":null}`,
		`{"input_messages":null}`,
		`{"input_messages":[{"content":null}]}`,
		`{"request_prefix":{"system":null}}`,
		`{"occurred_at":null}`,
		`{"Schema":"mnemos.turn.v1"}`,
		`{"ſchema":"mnemos.turn.v1"}`,
		`{"sch\u0065ma":"mnemos.turn.v1"}`,
		`{"seq":1.0}`,
		`{"seq":1e3}`,
		`{"seq":"1"}`,
		`{"seq":9223372036854775808}`,
		`{"session_id":5}`,
		`{"input_messages":{}}`,
		`{"input_messages":[null]}`,
		`{"input_messages":[{"content":5}]}`,
		`{"input_messages":[{"Role":"user"}]}`,
		`{"response":[]}`,
		`{"usage":{"input_tokens":-1.5}}`,
		`{"memory_scope":{"user":1}}`,
		`{"occurred_at":"yesterday"}`,
		`{"occurred_at":1764788400}`,
		`{"request_prefix":{"tokens":true}}`,
		`{"client_compaction":"auto"}`,
		`{"model":"\ud83d\ude00"}`,
	} {
		_, ok := turn.DecodeEventFast([]byte(in))
		require.False(t, ok, "took %s", in)
	}
}

// TestDecodeGivesTheSameEventsAndRefusalsBothWays: Decode with and
// without the one-pass decoder, on every event of the tests.
func TestDecodeGivesTheSameEventsAndRefusalsBothWays(t *testing.T) {
	inputs := fastPathEvents()
	for _, data := range decodeSeeds(t) {
		inputs = append(inputs, string(data))
	}
	for _, in := range inputs {
		requireDecodesTheSameBothWays(t, []byte(in))
	}
}

func requireDecodesTheSameBothWays(t *testing.T, data []byte) {
	t.Helper()
	opts := turn.DecodeOptions{Tenant: "acme"}
	fast, ferr := turn.Decode(data, opts)
	slow, serr := turn.DecodeSlowly(data, opts)
	require.Equal(t, reason(serr), reason(ferr), "%q", data) // not the detail: the schema's lists its properties in any order
	require.Equal(t, slow, fast, "%q", data)
}

// reason is the refusal's reason, "" for none.
func reason(err error) turn.Reason {
	if ie, ok := turn.AsInputError(err); ok {
		return ie.Reason
	}
	if err != nil {
		return "not an InputError: " + turn.Reason(err.Error())
	}
	return ""
}

// FuzzEventFastPathAgrees: on valid JSON that names no key twice (what
// Decode has checked before it decodes), the one-pass decoder either
// declines or decodes exactly what encoding/json decodes; it never takes
// what encoding/json refuses. Decode gives the same events and the same
// refusals with it and without it.
func FuzzEventFastPathAgrees(f *testing.F) {
	for _, in := range fastPathEvents() {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		requireDecodesTheSameBothWays(t, data)
		if !jsonvalid.Valid(data) {
			return
		}
		if at, _ := turn.DuplicateKey(data); at >= 0 {
			return
		}
		fast, ok := turn.DecodeEventFast(data)
		if !ok {
			return
		}
		var slow turn.Event
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("the fast path took %q, which encoding/json refuses: %v", data, err)
		}
		require.Equal(t, slow, fast, "%q", data)
	})
}
