package proxy

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
)

// encodeFields is fields encoded as json.Marshal (HTML left unescaped, as
// turn.Marshal) encodes a map[string]json.RawMessage — keys sorted, values
// compacted — with the array of messages written in the place of the field
// named field: the request sent up, in one buffer of its final size.
func encodeFields(fields map[string]json.RawMessage, field string, messages []json.RawMessage) ([]byte, error) {
	keys := make([]string, 0, len(fields)+1)
	size := 2
	for k, v := range fields {
		keys = append(keys, k)
		size += len(k) + 4
		if k != field {
			size += len(v) // the field's own value is not written: messages are
		}
	}
	if _, ok := fields[field]; !ok {
		keys = append(keys, field)
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
		if k != field {
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
