// Package jsonwalk walks JSON text already known to be valid (a body
// encoding/json or jsonvalid checked, bytes Mnemos encoded itself) without
// encoding/json's scanner, which steps byte by byte: a 150K-token request
// is 600 KB, and a tool's output is most of a turn. The plain bytes of a
// string are skipped with bytes.IndexByte. Given invalid JSON the answers
// are meaningless.
package jsonwalk

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"unicode/utf8"
)

// IsSpace reports the white space JSON allows between tokens.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// StringEnd is the index just past the string that starts at src[i] (a
// '"'), in valid JSON.
func StringEnd(src []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(src[j:], '"')
		if k < 0 {
			return len(src) // not valid JSON: the caller's promise is broken
		}
		j += k
		backslashes := 0
		for b := j - 1; b > i && src[b] == '\\'; b-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return j + 1
		}
		j++
	}
}

// AppendCompact appends valid JSON src to dst without the white space
// between its tokens: what encoding/json's Compact (and its encoding of a
// json.RawMessage, HTML left unescaped) makes of it, byte for byte.
func AppendCompact(dst, src []byte) []byte {
	start := 0
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '"':
			i = StringEnd(src, i)
		case IsSpace(c):
			dst = append(dst, src[start:i]...)
			for i < len(src) && IsSpace(src[i]) {
				i++
			}
			start = i
		default:
			i++
		}
	}
	return append(dst, src[start:]...)
}

// ValueEnd is the index just past the value that starts at src[i] (not
// white space), in valid JSON.
func ValueEnd(src []byte, i int) int {
	depth := 0
	for ; i < len(src); i++ {
		switch src[i] {
		case '"':
			i = StringEnd(src, i) - 1
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i // the end of the enclosing container: a scalar ended here
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// SkipSpace is the index of the first byte at or after i that is not white space.
func SkipSpace(src []byte, i int) int {
	for i < len(src) && IsSpace(src[i]) {
		i++
	}
	return i
}

// ErrNotArray is SplitArray's error for a value that is no array.
var ErrNotArray = errors.New("want an array")

// SplitArray is the elements of valid JSON src, which must be an array or
// null (nil then), each as its bytes in src: what json.Unmarshal into a
// []json.RawMessage gives, without copying.
func SplitArray(src []byte) ([]json.RawMessage, error) {
	i := SkipSpace(src, 0)
	if bytes.HasPrefix(src[i:], []byte("null")) {
		return nil, nil
	}
	if i >= len(src) || src[i] != '[' {
		return nil, ErrNotArray
	}
	out := []json.RawMessage{}
	i = SkipSpace(src, i+1)
	for i < len(src) && src[i] != ']' {
		end := ValueEnd(src, i)
		out = append(out, src[i:end:end])
		i = SkipSpace(src, end)
		if i < len(src) && src[i] == ',' {
			i = SkipSpace(src, i+1)
		}
	}
	return out, nil
}

// ErrNotObject is SplitObject's error for a value that is no object.
var ErrNotObject = errors.New("want an object")

// SplitObject is the fields of valid JSON src, which must be an object,
// each value as its bytes in src: what json.Unmarshal into a
// map[string]json.RawMessage gives (the last of a repeated key), without
// copying the values.
func SplitObject(src []byte) (map[string]json.RawMessage, error) {
	return splitObject(src, nil)
}

// Fields is SplitObject's answer with only the fields named: an item of
// a long history is read for its type and role, and its other keys are
// neither decoded nor kept.
func Fields(src []byte, names ...string) (map[string]json.RawMessage, error) {
	return splitObject(src, names)
}

// splitObject splits src's fields, all of them or, with names, only those.
func splitObject(src []byte, names []string) (map[string]json.RawMessage, error) {
	i := SkipSpace(src, 0)
	if i >= len(src) || src[i] != '{' {
		return nil, ErrNotObject
	}
	out := make(map[string]json.RawMessage, len(names))
	i = SkipSpace(src, i+1)
	for i < len(src) && src[i] == '"' {
		end := StringEnd(src, i)
		key, wanted := keyOf(src[i:end], names)
		i = SkipSpace(src, end)
		i = SkipSpace(src, i+1) // past ':'
		end = ValueEnd(src, i)
		if wanted {
			out[key] = src[i:end:end]
		}
		i = SkipSpace(src, end)
		if i < len(src) && src[i] == ',' {
			i = SkipSpace(src, i+1)
		}
	}
	return out, nil
}

// keyOf decodes the key src (its quotes included) when it is one of names,
// or any key when names is nil.
func keyOf(src []byte, names []string) (string, bool) {
	inner := src[1 : len(src)-1]
	if names != nil && bytes.IndexByte(inner, '\\') < 0 {
		// Without an escape a name can only be its own bytes (invalid
		// UTF-8 would decode to U+FFFD, which no name holds).
		for _, name := range names {
			if string(inner) == name {
				return name, true
			}
		}
		return "", false
	}
	key, plain := PlainString(src)
	if !plain && json.Unmarshal(src, &key) != nil {
		return "", false
	}
	return key, names == nil || slices.Contains(names, key)
}

// PlainString is the value of src, a JSON string (its quotes included),
// when it holds no escape and is valid UTF-8: the bytes between its
// quotes, as json.Unmarshal would decode them. It reports false for any
// other string, which encoding/json decodes (it replaces invalid UTF-8).
func PlainString(src []byte) (string, bool) {
	if len(src) < 2 || src[0] != '"' || src[len(src)-1] != '"' {
		return "", false
	}
	inner := src[1 : len(src)-1]
	if bytes.IndexByte(inner, '\\') >= 0 || !utf8.Valid(inner) {
		return "", false
	}
	return string(inner), true
}
