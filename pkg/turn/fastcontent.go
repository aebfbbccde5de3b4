package turn

import (
	"bytes"
	"sync/atomic"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/jsonvalid"
	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
)

// Decoding content in one pass. encoding/json decodes a message's content
// through Content.UnmarshalJSON, which decodes its blocks through
// Block.UnmarshalJSON, each a json.Unmarshal of its own that scans its bytes
// once to check them and once more to decode them, and a tool result's
// content goes through both again: every byte of a tool's output was read
// five times or more. Decoding content was the largest cost of the
// accountant (the events it decodes) and of the compactor (the sessions
// it loads).
//
// decodeContent walks content once and builds the blocks itself, for what
// it is sure of: blocks of the types Mnemos knows, with keys spelled as the
// struct's tags spell them, values of the fields' types, strings whose
// escapes are plain. Everything else (a null, a key in another case, an
// unknown block type, a surrogate escape) it declines, and
// Content.UnmarshalJSON decodes as before. Declining is always correct; what
// it accepts must decode exactly as encoding/json would
// (FuzzContentFastPathAgrees).

// slowContentOnly switches decodeContent off, for the tests that compare it
// with encoding/json alone.
var slowContentOnly atomic.Bool

// contentParser reads one valid JSON value: encoding/json checks the whole
// document before it calls an UnmarshalJSON method, so the parser need not
// check what it skips.
type contentParser struct {
	data []byte
	i    int
}

// decodeContent decodes content (a string, or an array of blocks) or
// reports false, having decided nothing.
func decodeContent(data []byte) (Content, bool) {
	p := contentParser{data: data}
	c, ok := p.content()
	if !ok {
		return nil, false
	}
	return c, jsonwalk.SkipSpace(p.data, p.i) == len(p.data)
}

// next skips whitespace and returns the next byte, 0 at the end.
func (p *contentParser) next() byte {
	p.i = jsonwalk.SkipSpace(p.data, p.i)
	if p.i == len(p.data) {
		return 0
	}
	return p.data[p.i]
}

// list reads the elements of the array or object whose bracket is at p.i,
// calling each with p.i at the start of every element; end is ']' or '}'.
func (p *contentParser) list(end byte, each func() bool) bool {
	p.i++ // [ or {
	if p.next() == end {
		p.i++
		return true
	}
	for {
		if !each() {
			return false
		}
		switch p.next() {
		case ',':
			p.i++
			p.next()
		case end:
			p.i++
			return true
		default:
			return false
		}
	}
}

// object reads the object at p.i, calling field with p.i at each key's
// value. A field function skips the keys it does not know with other.
func (p *contentParser) object(field func(key []byte) bool) bool {
	return p.list('}', func() bool {
		if p.next() != '"' {
			return false
		}
		key, ok := p.key()
		if !ok || p.next() != ':' {
			return false
		}
		p.i++
		p.next()
		return field(key)
	})
}

// other skips the value of a key spelled as none of fields, as
// encoding/json skips a key no field has, and declines a key it would
// match to one of them in its folding: in another case, or with a byte
// outside ASCII (Unicode's folding: "ſ" matches "s").
func (p *contentParser) other(key []byte, fields []string) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	for _, f := range fields {
		if bytes.EqualFold(key, []byte(f)) {
			return false
		}
	}
	return p.skip()
}

// skip moves past the value at p.i, as encoding/json skips a key no field has.
func (p *contentParser) skip() bool {
	p.i = jsonwalk.ValueEnd(p.data, p.i)
	return true
}

func (p *contentParser) content() (Content, bool) {
	switch p.next() {
	case '"':
		s, ok := p.string()
		if !ok {
			return nil, false
		}
		return Content{{Type: BlockText, Text: s}}, true
	case '[': // blocks, below
	default:
		return nil, false // null, or no content at all: encoding/json decides
	}
	blocks := make([]Block, 0, 2)
	ok := p.list(']', func() bool {
		if p.data[p.i] != '{' {
			return false
		}
		blocks = append(blocks, Block{})
		return p.block(&blocks[len(blocks)-1])
	})
	if !ok {
		return nil, false
	}
	return blocks, true
}

// block decodes the object at p.i into b.
func (p *contentParser) block(b *Block) bool {
	return p.object(func(key []byte) bool {
		if p.data[p.i] == 'n' {
			return false // null: each field type has its own rule
		}
		return p.field(b, key)
	}) && Known(b.Type) // another type keeps its JSON (Block.Raw)
}

// field decodes the value at p.i into b's field named key; a later key of
// the same name overwrites, as in encoding/json.
func (p *contentParser) field(b *Block, key []byte) bool {
	var s *string
	var raw *[]byte
	switch string(key) { // no allocation: the compiler compares in place
	case "type":
		s = &b.Type
	case "text":
		s = &b.Text
	case "thinking":
		s = &b.Thinking
	case "signature":
		s = &b.Signature
	case "data":
		s = &b.Data
	case "id":
		s = &b.ID
	case "name":
		s = &b.Name
	case "tool_use_id":
		s = &b.ToolUseID
	case "title":
		s = &b.Title
	case "context":
		s = &b.Context
	case "citations":
		raw = (*[]byte)(&b.Citations)
	case "input":
		raw = (*[]byte)(&b.Input)
	case "source":
		raw = (*[]byte)(&b.Source)
	case "cache_control":
		raw = (*[]byte)(&b.CacheControl)
	case "is_error":
		return p.bool(&b.IsError)
	case "content":
		c, ok := p.content()
		if !ok {
			return false
		}
		b.Content = &c
		return true
	default:
		return p.other(key, blockFields)
	}
	if s != nil {
		if p.data[p.i] != '"' {
			return false
		}
		v, ok := p.string()
		*s = v
		return ok
	}
	start := p.i
	p.i = jsonwalk.ValueEnd(p.data, p.i)
	*raw = append([]byte(nil), p.data[start:p.i]...) // what json.RawMessage keeps: a copy of the value
	return true
}

func (p *contentParser) bool(v *bool) bool {
	switch {
	case bytes.HasPrefix(p.data[p.i:], []byte("true")):
		*v, p.i = true, p.i+4
	case bytes.HasPrefix(p.data[p.i:], []byte("false")):
		*v, p.i = false, p.i+5
	default:
		return false
	}
	return true
}

// key returns the object key at p.i, declining one with an escape.
func (p *contentParser) key() ([]byte, bool) {
	start := p.i + 1
	for j := start; j < len(p.data); j++ {
		switch p.data[j] {
		case '"':
			p.i = j + 1
			return p.data[start:j], true
		case '\\':
			return nil, false
		}
	}
	return nil, false
}

// string decodes the JSON string at p.i. It declines invalid UTF-8
// (encoding/json replaces it) and escaped surrogates (encoding/json pairs
// them or replaces them).
func (p *contentParser) string() (string, bool) {
	start := p.i + 1
	j := start
	ascii := true
	for j < len(p.data) {
		c := p.data[j]
		if c == '"' {
			if !ascii && !utf8.Valid(p.data[start:j]) {
				return "", false
			}
			p.i = j + 1
			return string(p.data[start:j]), true
		}
		if c == '\\' {
			return p.escapedString(start, j)
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
		j++
	}
	return "", false
}

// escapedString decodes the string that starts at start and has its
// first escape at j.
func (p *contentParser) escapedString(start, j int) (string, bool) {
	if !utf8.Valid(p.data[start:j]) {
		return "", false
	}
	out := make([]byte, 0, len(p.data)-start)
	out = append(out, p.data[start:j]...)
	for j < len(p.data) {
		c := p.data[j]
		switch {
		case c == '"':
			p.i = j + 1
			return string(out), true
		case c != '\\':
			k := j + 1
			for k < len(p.data) && p.data[k] != '"' && p.data[k] != '\\' {
				k++
			}
			if !utf8.Valid(p.data[j:k]) {
				return "", false
			}
			out = append(out, p.data[j:k]...)
			j = k
			continue
		}
		if j+1 >= len(p.data) {
			return "", false
		}
		switch e := p.data[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(p.data[j+2:])
			if !ok || 0xD800 <= r && r <= 0xDFFF {
				return "", false
			}
			out = utf8.AppendRune(out, r)
			j += 4
		default:
			return "", false
		}
		j += 2
	}
	return "", false
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// Encoding a block in one pass, for the same reason: Block.MarshalJSON
// went through an encoder for its wire form, which checked and compacted
// the nested content's encoding again at each level. appendBlock writes
// what that encoder writes (the fields in wireBlock's order, strings
// escaped as encoding/json escapes them without HTML escaping) for blocks
// of the known types whose nested blocks are known too; it declines the
// rest (false), and a raw field that is not valid JSON, whose error the
// encoder words.

// appendBlock appends b's encoding to buf, or reports false.
func appendBlock(buf []byte, b *Block) ([]byte, bool) {
	if !Known(b.Type) {
		return buf, false
	}
	buf = append(buf, `{"type":`...)
	buf = appendString(buf, b.Type)
	ok := true
	str := func(key, v string, required bool) {
		if v != "" || required {
			buf = append(append(append(buf, ",\""...), key...), "\":"...)
			buf = appendString(buf, v)
		}
	}
	raw := func(key string, v []byte, orEmpty bool) {
		if len(v) == 0 && orEmpty {
			v = emptyObject
		}
		if len(v) == 0 || !ok {
			return
		}
		if !jsonvalid.Valid(v) {
			ok = false // the encoder words the error
			return
		}
		buf = append(append(append(buf, ",\""...), key...), "\":"...)
		buf = jsonwalk.AppendCompact(buf, v) // as the encoder writes a json.RawMessage
	}
	str("text", b.Text, b.Type == BlockText)
	raw("citations", b.Citations, false)
	str("thinking", b.Thinking, b.Type == BlockThinking)
	str("signature", b.Signature, b.Type == BlockThinking)
	str("data", b.Data, b.Type == BlockRedactedThinking)
	str("id", b.ID, b.Type == BlockToolUse)
	str("name", b.Name, b.Type == BlockToolUse)
	raw("input", b.Input, b.Type == BlockToolUse)
	str("tool_use_id", b.ToolUseID, b.Type == BlockToolResult)
	if b.Content != nil && ok {
		buf = append(buf, `,"content":[`...)
		for i := range *b.Content {
			if i > 0 {
				buf = append(buf, ',')
			}
			if buf, ok = appendBlock(buf, &(*b.Content)[i]); !ok {
				return buf, false
			}
		}
		buf = append(buf, ']')
	}
	if b.IsError {
		buf = append(buf, `,"is_error":true`...)
	}
	raw("source", b.Source, b.Type == BlockImage || b.Type == BlockDocument)
	str("title", b.Title, false)
	str("context", b.Context, false)
	raw("cache_control", b.CacheControl, false)
	return append(buf, '}'), ok
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it with HTML escaping off: quote, backslash and control
// characters, U+2028 and U+2029, and invalid UTF-8 as U+FFFD.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(append(buf, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(append(buf, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(buf, s[start:]...), '"')
}
