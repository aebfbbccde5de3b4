package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
)

// Walking JSON the proxy already knows to be valid (a body encoding/json
// checked, or bytes it encoded itself) without encoding/json's scanner,
// which steps byte by byte: a 150K-token request is 600 KB, read, split and
// written once each per round.

// isSpace reports the white space JSON allows between tokens.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// stringEnd is the index just past the string that starts at src[i] (a
// '"'), in valid JSON.
func stringEnd(src []byte, i int) int {
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

// appendCompact appends valid JSON src to dst without the white space
// between its tokens: what encoding/json's Compact (and its encoding of a
// json.RawMessage, HTML left unescaped) makes of it, byte for byte.
func appendCompact(dst, src []byte) []byte {
	start := 0
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '"':
			i = stringEnd(src, i)
		case isSpace(c):
			dst = append(dst, src[start:i]...)
			for i < len(src) && isSpace(src[i]) {
				i++
			}
			start = i
		default:
			i++
		}
	}
	return append(dst, src[start:]...)
}

// valueEnd is the index just past the value that starts at src[i] (not
// white space), in valid JSON.
func valueEnd(src []byte, i int) int {
	depth := 0
	for ; i < len(src); i++ {
		switch src[i] {
		case '"':
			i = stringEnd(src, i) - 1
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

// skipSpace is the index of the first byte at or after i that is not white space.
func skipSpace(src []byte, i int) int {
	for i < len(src) && isSpace(src[i]) {
		i++
	}
	return i
}

var errNotArray = errors.New("want an array")

// splitArray is the elements of valid JSON src, which must be an array or
// null (nil then), each as its bytes in src: what json.Unmarshal into a
// []json.RawMessage gives, without copying.
func splitArray(src []byte) ([]json.RawMessage, error) {
	i := skipSpace(src, 0)
	if bytes.HasPrefix(src[i:], []byte("null")) {
		return nil, nil
	}
	if i >= len(src) || src[i] != '[' {
		return nil, errNotArray
	}
	out := []json.RawMessage{}
	i = skipSpace(src, i+1)
	for i < len(src) && src[i] != ']' {
		end := valueEnd(src, i)
		out = append(out, src[i:end:end])
		i = skipSpace(src, end)
		if i < len(src) && src[i] == ',' {
			i = skipSpace(src, i+1)
		}
	}
	return out, nil
}

var errNotObject = errors.New("want an object")

// splitObject is the fields of valid JSON src, which must be an object,
// each value as its bytes in src: what json.Unmarshal into a
// map[string]json.RawMessage gives (the last of a repeated key), without
// copying the values.
func splitObject(src []byte) (map[string]json.RawMessage, error) {
	i := skipSpace(src, 0)
	if i >= len(src) || src[i] != '{' {
		return nil, errNotObject
	}
	out := map[string]json.RawMessage{}
	i = skipSpace(src, i+1)
	for i < len(src) && src[i] == '"' {
		end := stringEnd(src, i)
		var key string
		if err := json.Unmarshal(src[i:end], &key); err != nil {
			return nil, err
		}
		i = skipSpace(src, end)
		i = skipSpace(src, i+1) // past ':'
		end = valueEnd(src, i)
		out[key] = src[i:end:end]
		i = skipSpace(src, end)
		if i < len(src) && src[i] == ',' {
			i = skipSpace(src, i+1)
		}
	}
	return out, nil
}

// encodeFields is fields encoded as json.Marshal (HTML left unescaped, as
// turn.Marshal) encodes a map[string]json.RawMessage — keys sorted, values
// compacted — with each of the messages written in its place: the request
// sent up, in one buffer of its final size.
func encodeFields(fields map[string]json.RawMessage, messages []json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(fields)+1)
	size := 2
	for k, v := range fields {
		keys = append(keys, k)
		size += len(k) + len(v) + 4
	}
	if _, ok := fields["messages"]; !ok {
		keys = append(keys, "messages")
	}
	for _, m := range messages {
		size += len(m) + 1
	}
	slices.Sort(keys)
	out := make([]byte, 0, size+16)
	out = append(out, '{')
	for n, k := range keys {
		if n > 0 {
			out = append(out, ',')
		}
		key, err := marshalKey(k)
		if err != nil {
			return nil, err
		}
		out = append(out, key...)
		out = append(out, ':')
		if k != "messages" {
			out = appendCompact(out, fields[k])
			continue
		}
		out = append(out, '[')
		for i, m := range messages {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendCompact(out, m)
		}
		out = append(out, ']')
	}
	return append(out, '}'), nil
}

// marshalKey is an object key as encoding/json writes it, HTML unescaped.
func marshalKey(k string) ([]byte, error) {
	plain := true
	for i := 0; i < len(k) && plain; i++ {
		c := k[i]
		plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\'
	}
	if plain {
		return append(append([]byte{'"'}, k...), '"'), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(k); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
