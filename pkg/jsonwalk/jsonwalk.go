// Package jsonwalk walks JSON text already known to be valid (a body
// encoding/json or jsonvalid checked, bytes Mnemos encoded itself) without
// encoding/json's scanner, which steps byte by byte: a 150K-token request
// is 600 KB, and a tool's output is most of a turn. The plain bytes of a
// string are skipped with bytes.IndexByte. Given invalid JSON the answers
// are meaningless.
package jsonwalk

import "bytes"

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
