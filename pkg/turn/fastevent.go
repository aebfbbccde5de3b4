package turn

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
)

// Decoding an event in one pass. Decode checks an event's bytes before it
// decodes them (checkEncoding: valid UTF-8, valid JSON, no key named
// twice), and json.Unmarshal then scanned the whole event again to check it
// once more, and a third time to decode it, finding each content's end
// before Content.UnmarshalJSON read it a fourth time. Decoding was the
// largest cost of the accountant's own work.
//
// decodeEvent walks the event once, on bytes checkEncoding has passed, and
// fills the structs itself for what it is sure of, as decodeContent does
// for content (fastcontent.go): keys spelled as the tags spell them, values
// of the fields' types, numbers that are integers, no null. Anything else it
// declines, having decided nothing, and json.Unmarshal decodes the event as
// before, with its own errors. What it accepts decodes exactly as
// encoding/json decodes it (FuzzEventFastPathAgrees).

// slowEventOnly switches decodeEvent off, for the tests that compare it
// with encoding/json alone.
var slowEventOnly atomic.Bool

// decodeEvent decodes the event data holds, or reports false. data must be
// valid JSON with no key repeated in an object: a repeated key is decoded
// as encoding/json decodes it (the last wins), except in content, which
// decodeContent declines then.
func decodeEvent(data []byte) (Event, bool) {
	var ev Event
	if slowEventOnly.Load() {
		return ev, false
	}
	p := contentParser{data: data}
	if p.next() != '{' {
		return ev, false
	}
	ok := p.object(func(key []byte) bool { return p.eventField(&ev, key) })
	return ev, ok && jsonwalk.SkipSpace(p.data, p.i) == len(p.data)
}

func (p *contentParser) eventField(ev *Event, key []byte) bool {
	switch string(key) {
	case "schema":
		return p.str(&ev.Schema)
	case "event_id":
		return p.str(&ev.EventID)
	case "tenant_id":
		return p.str(&ev.TenantID)
	case "session_id":
		return p.str(&ev.SessionID)
	case "seq":
		return p.int(&ev.Seq)
	case "agent_id":
		return p.str(&ev.AgentID)
	case "memory_scope":
		return p.stringMap(&ev.MemoryScope)
	case "model":
		return p.str(&ev.Model)
	case "context_window":
		return p.int(&ev.ContextWindow)
	case "max_output_tokens":
		return p.int(&ev.MaxOutputTokens)
	case "input_messages":
		return p.messages(&ev.InputMessages)
	case "response":
		return objectInto(p, &ev.Response, p.messageField)
	case "usage":
		return objectInto(p, &ev.Usage, p.usageField)
	case "request_prefix":
		return objectInto(p, &ev.RequestPrefix, p.requestPrefixField)
	case "client_compaction":
		return objectInto(p, &ev.ClientCompaction, p.clientCompactionField)
	case "occurred_at":
		return p.time(&ev.OccurredAt)
	}
	return p.other(key, eventFields)
}

// objectInto decodes the object at p.i into a new T that *dst then points
// at, as encoding/json does for a nil pointer.
func objectInto[T any](p *contentParser, dst **T, field func(*T, []byte) bool) bool {
	if p.data[p.i] != '{' {
		return false
	}
	v := new(T)
	*dst = v
	return p.object(func(key []byte) bool { return field(v, key) })
}

func (p *contentParser) messages(ms *[]Message) bool {
	if p.data[p.i] != '[' {
		return false
	}
	out := make([]Message, 0, 2) // an empty array decodes to an empty slice, not nil
	ok := p.list(']', func() bool {
		if p.data[p.i] != '{' {
			return false
		}
		out = append(out, Message{})
		m := &out[len(out)-1]
		return p.object(func(key []byte) bool { return p.messageField(m, key) })
	})
	*ms = out
	return ok
}

func (p *contentParser) messageField(m *Message, key []byte) bool {
	switch string(key) {
	case "uuid":
		return p.str(&m.UUID)
	case "role":
		return p.str(&m.Role)
	case "stop_reason":
		return p.str(&m.StopReason)
	case "content":
		return p.messageContent(&m.Content)
	}
	return p.other(key, messageFields)
}

// messageContent decodes a message's content where it stands, as
// Content.UnmarshalJSON would decode its bytes: in one pass (content), or,
// where that declines, by unmarshalSlowly.
func (p *contentParser) messageContent(c *Content) bool {
	if p.data[p.i] == 'n' {
		return false // null: encoding/json's rules for a nil slice
	}
	start := p.i
	if !slowContentOnly.Load() {
		if blocks, ok := p.content(); ok {
			*c = blocks
			return true
		}
	}
	p.i = jsonwalk.ValueEnd(p.data, start)
	return c.unmarshalSlowly(p.data[start:p.i]) == nil
}

func (p *contentParser) usageField(u *Usage, key []byte) bool {
	switch string(key) {
	case "input_tokens":
		return p.int(&u.InputTokens)
	case "cache_creation_input_tokens":
		return p.int(&u.CacheCreationInputTokens)
	case "cache_read_input_tokens":
		return p.int(&u.CacheReadInputTokens)
	case "output_tokens":
		return p.int(&u.OutputTokens)
	}
	return p.other(key, usageFields)
}

func (p *contentParser) requestPrefixField(rp *RequestPrefix, key []byte) bool {
	switch string(key) {
	case "system":
		return p.raw((*[]byte)(&rp.System))
	case "tools":
		return p.raw((*[]byte)(&rp.Tools))
	case "tokens":
		return p.int(&rp.Tokens)
	case "bytes":
		return p.int(&rp.Bytes)
	case "hash":
		return p.str(&rp.Hash)
	}
	return p.other(key, requestPrefixFields)
}

func (p *contentParser) clientCompactionField(cc *ClientCompaction, key []byte) bool {
	switch string(key) {
	case "trigger":
		return p.str(&cc.Trigger)
	case "pre_tokens":
		return p.int(&cc.PreTokens)
	}
	return p.other(key, clientCompactionFields)
}

// null reports whether the value at p.i is null, and moves past it.
func (p *contentParser) null() bool {
	if p.data[p.i] != 'n' {
		return false
	}
	p.i += len("null")
	return true
}

// str decodes a string value into s; null leaves s as it is, as in
// encoding/json.
func (p *contentParser) str(s *string) bool {
	if p.null() {
		return true
	}
	if p.data[p.i] != '"' {
		return false
	}
	v, ok := p.string()
	*s = v
	return ok
}

// int decodes an integer into v, as encoding/json does for an int64
// field: digits only (1.0 and 1e3 it refuses), within int64; null leaves
// v as it is.
func (p *contentParser) int(v *int64) bool {
	if p.null() {
		return true
	}
	start := p.i
	j := start
	if j < len(p.data) && p.data[j] == '-' {
		j++
	}
	digits := j
	for j < len(p.data) && '0' <= p.data[j] && p.data[j] <= '9' {
		j++
	}
	if j == digits {
		return false
	}
	if j < len(p.data) {
		switch p.data[j] {
		case '.', 'e', 'E':
			return false
		}
	}
	n, err := strconv.ParseInt(string(p.data[start:j]), 10, 64)
	if err != nil {
		return false
	}
	*v, p.i = n, j
	return true
}

// raw keeps the value's bytes, as a json.RawMessage does: a copy.
func (p *contentParser) raw(v *[]byte) bool {
	if p.data[p.i] == 'n' {
		return false // a json.RawMessage keeps null as its bytes
	}
	start := p.i
	p.i = jsonwalk.ValueEnd(p.data, p.i)
	*v = append([]byte(nil), p.data[start:p.i]...)
	return true
}

// time decodes a string by time.Time's UnmarshalJSON, which is what
// encoding/json calls with the same bytes.
func (p *contentParser) time(t *time.Time) bool {
	if p.data[p.i] != '"' {
		return false
	}
	start := p.i
	p.i = jsonwalk.ValueEnd(p.data, p.i)
	return t.UnmarshalJSON(p.data[start:p.i]) == nil
}

// stringMap decodes an object of strings into a new map, as encoding/json
// does into a nil map.
func (p *contentParser) stringMap(m *map[string]string) bool {
	if p.data[p.i] != '{' {
		return false
	}
	out := map[string]string{}
	*m = out
	return p.list('}', func() bool {
		if p.data[p.i] != '"' {
			return false
		}
		k, ok := p.string() // a map's keys are any strings, escaped or not
		if !ok || p.next() != ':' {
			return false
		}
		p.i++
		if p.next() != '"' {
			return false
		}
		v, ok := p.string()
		out[k] = v
		return ok
	})
}
