// Package jsonvalid checks JSON text as encoding/json's Valid does, several
// times faster: the plain bytes of a string, most of an agent's request,
// are skipped eight at a time instead of stepped through one by one.
package jsonvalid

import (
	"encoding/binary"
	"math/bits"
)

// Valid reports what encoding/json's Valid reports of src: whether it is
// one JSON value with white space around it, nested at most MaxDepth deep
// (a string may hold any byte from 0x20 up, as there). FuzzValid holds it
// to encoding/json.
func Valid(src []byte) bool {
	v := validator{src: src}
	i, ok := v.value(v.space(0), 0)
	return ok && v.space(i) == len(src)
}

// MaxDepth is encoding/json's limit on nesting.
const MaxDepth = 10000

type validator struct{ src []byte }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (v *validator) space(i int) int {
	for i < len(v.src) && isSpace(v.src[i]) {
		i++
	}
	return i
}

// value checks the value at src[i] (no white space before it) and
// returns the index just past it.
func (v *validator) value(i, depth int) (int, bool) {
	if i >= len(v.src) {
		return i, false
	}
	switch c := v.src[i]; {
	case c == '"':
		return v.str(i)
	case c == '{':
		return v.object(i, depth+1)
	case c == '[':
		return v.array(i, depth+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return v.number(i)
	case c == 't':
		return v.literal(i, "true")
	case c == 'f':
		return v.literal(i, "false")
	case c == 'n':
		return v.literal(i, "null")
	}
	return i, false
}

func (v *validator) literal(i int, word string) (int, bool) {
	if len(v.src)-i < len(word) || string(v.src[i:i+len(word)]) != word {
		return i, false
	}
	return i + len(word), true
}

// object checks the object at src[i] ('{').
func (v *validator) object(i, depth int) (int, bool) {
	return v.container(i, depth, '}', func(i int) (int, bool) {
		if i >= len(v.src) || v.src[i] != '"' {
			return i, false
		}
		i, ok := v.str(i)
		if !ok {
			return i, false
		}
		i = v.space(i)
		if i >= len(v.src) || v.src[i] != ':' {
			return i, false
		}
		return v.value(v.space(i+1), depth)
	})
}

// array checks the array at src[i] ('[').
func (v *validator) array(i, depth int) (int, bool) {
	return v.container(i, depth, ']', func(i int) (int, bool) { return v.value(i, depth) })
}

// container checks an object or array at src[i], its members checked by
// member (at their first byte) and separated by commas, up to end.
func (v *validator) container(i, depth int, end byte, member func(int) (int, bool)) (int, bool) {
	if depth > MaxDepth {
		return i, false
	}
	i = v.space(i + 1)
	if i < len(v.src) && v.src[i] == end {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = member(i); !ok {
			return i, false
		}
		i = v.space(i)
		switch {
		case i >= len(v.src):
			return i, false
		case v.src[i] == ',':
			i = v.space(i + 1)
		case v.src[i] == end:
			return i + 1, true
		default:
			return i, false
		}
	}
}

// SWAR constants: a byte of each word set to 0x01, 0x80, '"' and '\\'.
const (
	lsb       = 0x0101010101010101
	msb       = 0x8080808080808080
	quotes    = '"' * lsb
	backslash = '\\' * lsb
	below0x20 = 0x20 * lsb
)

// special marks the bytes of x that end a string's plain run: '"', '\\'
// and those under 0x20, each by its high bit (exact for every byte, not
// only the first: no borrow crosses a byte).
func special(x uint64) uint64 {
	eq := func(y uint64) uint64 { // bytes of y that are 0
		return ^(((y &^ msb) + ^uint64(msb)) | y) & msb
	}
	under := ^(((x &^ msb) + (msb - below0x20)) | x) & msb // bytes below 0x20: high bit clear and x+0x60 < 0x80
	return eq(x^quotes) | eq(x^backslash) | under
}

func (v *validator) str(i int) (int, bool) {
	src := v.src
	j := i + 1
	for {
		for j+8 <= len(src) {
			if m := special(binary.LittleEndian.Uint64(src[j:])); m != 0 {
				j += bits.TrailingZeros64(m) / 8
				break
			}
			j += 8
		}
		if j >= len(src) {
			return j, false
		}
		switch c := src[j]; {
		case c == '"':
			return j + 1, true
		case c == '\\':
			if j+1 >= len(src) {
				return j, false
			}
			switch src[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(src) {
					return j, false
				}
				for _, h := range src[j+2 : j+6] {
					if !isHex(h) {
						return j, false
					}
				}
				j += 6
			default:
				return j, false
			}
		case c < 0x20:
			return j, false
		default:
			j++ // the tail, under eight bytes, one at a time
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (v *validator) number(i int) (int, bool) {
	src := v.src
	if src[i] == '-' {
		i++
	}
	switch {
	case i >= len(src) || !isDigit(src[i]):
		return i, false
	case src[i] == '0':
		i++
	default:
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && src[i] == '.' {
		i++
		if i >= len(src) || !isDigit(src[i]) {
			return i, false
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) || !isDigit(src[i]) {
			return i, false
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	return i, true
}
