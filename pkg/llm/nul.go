package llm

import (
	"bytes"
	"encoding/json"
	"strings"
)

// withoutNUL returns resp with the NUL characters taken out of its text
// (out of its strings, when req asked for a JSON answer) and out of the
// strings of its tool calls' inputs. Postgres text cannot hold NUL, and
// nothing a model writes needs one: every service that stores model output
// gets it from Guard already clean.
func withoutNUL(req Request, resp Response) Response {
	if req.JSONSchema != nil {
		resp.Text = string(inputWithoutNUL(json.RawMessage(resp.Text)))
	} else {
		resp.Text = strings.ReplaceAll(resp.Text, "\x00", "")
	}
	for i, c := range resp.ToolCalls {
		resp.ToolCalls[i].Input = inputWithoutNUL(c.Input)
	}
	return resp
}

// inputWithoutNUL removes NUL from a tool call's JSON input: from its
// strings, where JSON writes it as the escape \u0000, and any raw one.
// Input that does not decode is returned as it is, without raw NULs, for
// the tool to refuse.
func inputWithoutNUL(in json.RawMessage) json.RawMessage {
	in = bytes.ReplaceAll(in, []byte{0}, nil)
	if !bytes.Contains(in, []byte(`\u0000`)) {
		return in
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return in
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cleanStrings(v)); err != nil {
		return in
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

// cleanStrings removes NUL from every string of a decoded JSON value,
// object keys included.
func cleanStrings(v any) any {
	switch t := v.(type) {
	case string:
		return strings.ReplaceAll(t, "\x00", "")
	case []any:
		for i := range t {
			t[i] = cleanStrings(t[i])
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[strings.ReplaceAll(k, "\x00", "")] = cleanStrings(e)
		}
		return out
	}
	return v
}
