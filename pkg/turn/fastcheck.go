package turn

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// The schema's verdict, fast. Validating an event against the JSON Schema
// (validateSchema) builds a tree of the whole event and walks it through
// every rule, each block through six if/then rules: about half of what
// decoding an ordinary event costs. schemaAccepts walks the event's bytes
// once instead and says yes only to what the schema (and checkKeyCase)
// surely accept. It is stricter than the schema where that keeps it short
// (an escaped key or id, a number written with a fraction or an exponent,
// a leap second, nested content that is not blocks): those events go to
// validateSchema, which decides them and words the refusal. So the schema
// stays the contract, and FuzzFastCheckAgreesWithSchema holds the two
// together: what schemaAccepts accepts, validateSchema accepts.
//
// It runs on bytes that checkEncoding passed (one valid JSON object, no key
// named twice) and that decoded into an Event.

// schemaAccepts reports whether data surely satisfies the turn schema.
func schemaAccepts(data []byte) bool {
	c := scan{b: data}
	var ev eventCheck
	if !c.object(func(key []byte) bool { return c.eventMember(key, &ev) }) || ev.have != hasAllRequired {
		return false
	}
	switch string(ev.schema) {
	case SchemaV1_1:
		return true
	case SchemaV1:
		return !ev.v11Only
	}
	return false
}

// The event's required properties, as bits of eventCheck.have.
const (
	hasEventID = 1 << iota
	hasSession
	hasSeq
	hasMessages
	hasOccurred
	hasAllRequired = hasEventID | hasSession | hasSeq | hasMessages | hasOccurred
)

// eventCheck is what the walk of an event keeps until its end.
type eventCheck struct {
	have    int    // the required properties seen
	schema  []byte // the schema's name
	v11Only bool   // request_prefix or client_compaction: v1.1's own fields
}

// eventMember checks one property of the event; the event takes no
// property the schema does not name.
func (c *scan) eventMember(key []byte, ev *eventCheck) bool {
	switch string(key) {
	case "schema":
		s, ok := c.plainString()
		ev.schema = s
		return ok
	case "event_id":
		ev.have |= hasEventID
		return c.id(true)
	case "session_id":
		ev.have |= hasSession
		return c.id(false)
	case "seq":
		ev.have |= hasSeq
		return c.countWithin(1, maxCount)
	case "input_messages":
		ev.have |= hasMessages
		return c.array(func() bool { return c.message(false) })
	case "occurred_at":
		ev.have |= hasOccurred
		s, ok := c.plainString()
		return ok && dateTime(s)
	case "request_prefix":
		ev.v11Only = true
		return c.requestPrefix()
	case "client_compaction":
		ev.v11Only = true
		return c.clientCompaction()
	}
	return c.optionalMember(key)
}

// optionalMember checks the event's optional properties of v1.
func (c *scan) optionalMember(key []byte) bool {
	switch string(key) {
	case "tenant_id", "agent_id":
		return c.id(false)
	case "memory_scope":
		return c.object(func(k []byte) bool {
			switch string(k) {
			case "user", "project", "local", "agent":
				return c.id(false)
			}
			return false
		})
	case "model":
		s, ok := c.plainString()
		return ok && utf8.RuneCount(s) <= 200
	case "context_window":
		return c.countWithin(1000, 100_000_000)
	case "max_output_tokens":
		return c.countWithin(1, 10_000_000)
	case "response":
		return c.message(true)
	case "usage":
		return c.usage()
	}
	return false
}

// clientCompaction checks v1.1's client_compaction.
func (c *scan) clientCompaction() bool {
	return c.object(func(k []byte) bool {
		switch string(k) {
		case "trigger":
			s, ok := c.plainString()
			return ok && (string(s) == "manual" || string(s) == "auto")
		case "pre_tokens":
			return c.countWithin(0, maxCount)
		}
		return false
	})
}

// schemaNamed reports whether data, a JSON object, names a schema this
// server reads, written without escapes.
func schemaNamed(data []byte) bool {
	c := scan{b: data}
	var name []byte
	c.object(func(key []byte) bool {
		if string(key) != "schema" {
			return c.skip()
		}
		name, _ = c.plainString()
		return false // found: the walk ends here
	})
	return string(name) == SchemaV1 || string(name) == SchemaV1_1
}

// message checks a message (the response when response is set: its role
// is the assistant's).
func (c *scan) message(response bool) bool {
	const (
		hasUUID = 1 << iota
		hasRole
		hasContent
	)
	var have int
	ok := c.object(func(key []byte) bool {
		switch string(key) {
		case "uuid":
			have |= hasUUID
			return c.id(true)
		case "role":
			have |= hasRole
			s, ok := c.plainString()
			return ok && (string(s) == "assistant" || !response && string(s) == "user")
		case "content":
			have |= hasContent
			return c.content()
		case "stop_reason":
			if c.peek() == 'n' {
				return c.skip() // null
			}
			_, ok := c.str()
			return ok
		}
		return c.other(key, messageFields)
	})
	return ok && have == hasUUID|hasRole|hasContent
}

// content checks a string or an array of blocks.
func (c *scan) content() bool {
	if c.peek() == '"' {
		_, ok := c.str()
		return ok
	}
	return c.array(c.block)
}

// block checks a content block: its type's pattern and the rules the
// schema gives its type. Nested content must be a string or blocks
// whatever the type (the schema asks it only of a tool result's).
func (c *scan) block() bool {
	var typ []byte
	var text, thinking, data, id, name, input, toolUseID, source, badIsError bool
	ok := c.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			s, ok := c.plainString()
			typ = s
			return ok && blockType(s)
		case "text":
			text = c.peek() == '"'
		case "thinking":
			thinking = c.peek() == '"'
		case "data":
			data = true
		case "id":
			return c.nonEmptyString(&id)
		case "name":
			return c.nonEmptyString(&name)
		case "input":
			input = c.peek() == '{'
		case "tool_use_id":
			return c.nonEmptyString(&toolUseID)
		case "source":
			source = c.peek() == '{'
		case "is_error":
			p := c.peek()
			badIsError = p != 't' && p != 'f'
		case "content":
			return c.content()
		default:
			return c.other(key, blockFields)
		}
		return c.skip()
	})
	if !ok || typ == nil {
		return false
	}
	switch string(typ) {
	case BlockText:
		return text
	case BlockThinking:
		return thinking
	case BlockRedactedThinking:
		return data
	case BlockToolUse:
		return id && name && input
	case BlockToolResult:
		return toolUseID && !badIsError
	case BlockImage, BlockDocument:
		return source
	}
	return true
}

// blockType matches the schema's ^[a-z][a-z0-9_]{0,63}$.
func blockType(s []byte) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for _, b := range s[1:] {
		if (b < 'a' || b > 'z') && (b < '0' || b > '9') && b != '_' {
			return false
		}
	}
	return true
}

// usage checks a usage: counts, input and output required; other
// properties are allowed.
func (c *scan) usage() bool {
	var in, out bool
	ok := c.object(func(key []byte) bool {
		switch string(key) {
		case "input_tokens":
			in = true
		case "output_tokens":
			out = true
		case "cache_creation_input_tokens", "cache_read_input_tokens":
		default:
			return c.other(key, usageFields)
		}
		return c.countWithin(0, maxCount)
	})
	return ok && in && out
}

// requestPrefix checks v1.1's request_prefix.
func (c *scan) requestPrefix() bool {
	return c.object(func(key []byte) bool {
		switch string(key) {
		case "system":
			if c.peek() == '"' {
				_, ok := c.str()
				return ok
			}
			return c.array(func() bool {
				var text, typ bool
				ok := c.object(func(k []byte) bool {
					switch string(k) {
					case "type":
						s, ok := c.plainString()
						typ = ok && string(s) == "text"
						return ok
					case "text":
						text = c.peek() == '"'
					}
					return c.skip()
				})
				return ok && text && typ
			})
		case "tools":
			return c.array(func() bool { return c.peek() == '{' && c.skip() })
		case "tokens", "bytes":
			return c.countWithin(0, maxCount)
		case "hash":
			s, ok := c.plainString()
			n := utf8.RuneCount(s)
			return ok && n >= 1 && n <= 128
		}
		return false
	})
}

// other passes over a property the schema does not name, where the object
// takes any: unless it differs from a field's name only in letter case,
// which checkKeyCase refuses.
func (c *scan) other(key []byte, fields []string) bool {
	if !slices.Contains(fields, string(key)) {
		for _, f := range fields {
			if strings.EqualFold(string(key), f) {
				return false
			}
		}
	}
	return c.skip()
}

// dateTime matches RFC 3339's date-time, as the schema's format asserts,
// without a leap second and with an upper-case T and Z:
// 2006-01-02T15:04:05[.frac](Z|±07:00).
func dateTime(s []byte) bool {
	if len(s) < 20 || s[10] != 'T' || !fullDate(s[:10]) || !clock(s[11:19], 23) {
		return false
	}
	rest := s[19:]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 {
			return false
		}
		rest = rest[n:]
	}
	switch {
	case len(rest) == 1:
		return rest[0] == 'Z'
	case len(rest) == 6:
		return (rest[0] == '+' || rest[0] == '-') && clock(rest[1:6], 23)
	}
	return false
}

// fullDate matches 2006-01-02, a day the month has.
func fullDate(s []byte) bool {
	if s[4] != '-' || s[7] != '-' {
		return false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	return ok1 && ok2 && ok3 && month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month)
}

// clock matches hh:mm or hh:mm:ss, hours up to maxHour, minutes and
// seconds up to 59.
func clock(s []byte, maxHour int) bool {
	if len(s) != 5 && len(s) != 8 {
		return false
	}
	for i := 2; i < len(s); i += 3 {
		n, ok := digits(s[i+1 : i+3])
		if s[i] != ':' || !ok || n > 59 {
			return false
		}
	}
	h, ok := digits(s[:2])
	return ok && h <= maxHour
}

func digits(s []byte) (int, bool) {
	n := 0
	for _, b := range s {
		if b < '0' || b > '9' {
			return 0, false
		}
		n = n*10 + int(b-'0')
	}
	return n, true
}

func daysIn(year, month int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// scan walks JSON that is known to be valid, one value at a time. Every
// method reports false for what it does not expect, and the walk stops.
type scan struct {
	b []byte
	i int
}

// peek skips whitespace and returns the next byte (0 at the end).
func (c *scan) peek() byte {
	for c.i < len(c.b) {
		switch c.b[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return c.b[c.i]
		}
	}
	return 0
}

// str reads a string: its raw bytes between the quotes, escapes as written.
func (c *scan) str() (raw []byte, ok bool) {
	raw, _, ok = c.rawString()
	return raw, ok
}

func (c *scan) rawString() (raw []byte, escaped, ok bool) {
	if c.peek() != '"' {
		return nil, false, false
	}
	end, escaped := stringEnd(c.b, c.i) // dupkey.go's
	if end < 0 {
		return nil, false, false
	}
	raw, c.i = c.b[c.i+1:end], end+1
	return raw, escaped, true
}

// plainString reads a string without escapes: its bytes are its text.
func (c *scan) plainString() ([]byte, bool) {
	raw, escaped, ok := c.rawString()
	return raw, ok && !escaped
}

// nonEmptyString reads any value, and sets is when it is a string of at
// least one character.
func (c *scan) nonEmptyString(is *bool) bool {
	if c.peek() != '"' {
		return c.skip()
	}
	raw, ok := c.str()
	*is = len(raw) > 0
	return ok
}

// id reads an id ($defs/id, punct) or a token ($defs/token).
func (c *scan) id(punct bool) bool {
	s, ok := c.plainString()
	return ok && validID(string(s), punct)
}

// maxCount is the schema's largest count ($defs/count).
const maxCount = 1_000_000_000_000

// countWithin reads an integer written with digits only, from least to
// most.
func (c *scan) countWithin(least, most int64) bool {
	c.peek()
	var n int64
	start := c.i
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		if c.i-start >= 13 {
			return false // over maxCount, whatever follows
		}
		n = n*10 + int64(c.b[c.i]-'0')
		c.i++
	}
	if c.i == start || n < least || n > most {
		return false
	}
	if c.i < len(c.b) {
		switch c.b[c.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
		default:
			return false // a fraction or an exponent
		}
	}
	return true
}

// skip passes over any value.
func (c *scan) skip() bool {
	switch c.peek() {
	case '"':
		_, ok := c.str()
		return ok
	case '{':
		return c.object(func([]byte) bool { return c.skip() })
	case '[':
		return c.array(c.skip)
	case 0:
		return false
	}
	for c.i < len(c.b) { // a number, true, false or null
		switch c.b[c.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return true
		}
		c.i++
	}
	return true
}

// object walks an object: member calls with each key (raw; an escaped
// key stops the walk) and the scan at its value, which member reads.
func (c *scan) object(member func(key []byte) bool) bool {
	if c.peek() != '{' {
		return false
	}
	c.i++
	if c.peek() == '}' {
		c.i++
		return true
	}
	for {
		key, ok := c.plainString()
		if !ok || c.peek() != ':' {
			return false
		}
		c.i++
		if !member(key) {
			return false
		}
		switch c.peek() {
		case ',':
			c.i++
		case '}':
			c.i++
			return true
		default:
			return false
		}
	}
}

// array walks an array: element reads each one.
func (c *scan) array(element func() bool) bool {
	if c.peek() != '[' {
		return false
	}
	c.i++
	if c.peek() == ']' {
		c.i++
		return true
	}
	for {
		if !element() {
			return false
		}
		switch c.peek() {
		case ',':
			c.i++
		case ']':
			c.i++
			return true
		default:
			return false
		}
	}
}
