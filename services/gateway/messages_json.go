package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"

	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
)

var errNotArray = errors.New("want an array")

// splitArray is the elements of valid JSON src, which must be an array or
// null (nil then), each as its bytes in src: what json.Unmarshal into a
// []json.RawMessage gives, without copying.
func splitArray(src []byte) ([]json.RawMessage, error) {
	i := jsonwalk.SkipSpace(src, 0)
	if bytes.HasPrefix(src[i:], []byte("null")) {
		return nil, nil
	}
	if i >= len(src) || src[i] != '[' {
		return nil, errNotArray
	}
	out := []json.RawMessage{}
	i = jsonwalk.SkipSpace(src, i+1)
	for i < len(src) && src[i] != ']' {
		end := jsonwalk.ValueEnd(src, i)
		out = append(out, src[i:end:end])
		i = jsonwalk.SkipSpace(src, end)
		if i < len(src) && src[i] == ',' {
			i = jsonwalk.SkipSpace(src, i+1)
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
	i := jsonwalk.SkipSpace(src, 0)
	if i >= len(src) || src[i] != '{' {
		return nil, errNotObject
	}
	out := map[string]json.RawMessage{}
	i = jsonwalk.SkipSpace(src, i+1)
	for i < len(src) && src[i] == '"' {
		end := jsonwalk.StringEnd(src, i)
		var key string
		if err := json.Unmarshal(src[i:end], &key); err != nil {
			return nil, err
		}
		i = jsonwalk.SkipSpace(src, end)
		i = jsonwalk.SkipSpace(src, i+1) // past ':'
		end = jsonwalk.ValueEnd(src, i)
		out[key] = src[i:end:end]
		i = jsonwalk.SkipSpace(src, end)
		if i < len(src) && src[i] == ',' {
			i = jsonwalk.SkipSpace(src, i+1)
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
			out = jsonwalk.AppendCompact(out, fields[k])
			continue
		}
		out = append(out, '[')
		for i, m := range messages {
			if i > 0 {
				out = append(out, ',')
			}
			out = jsonwalk.AppendCompact(out, m)
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
