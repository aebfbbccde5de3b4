package turn

import "encoding/json"

// For the tests of package turn_test.
var (
	SchemaAccepts  = schemaAccepts
	SchemaNamed    = schemaNamed
	ValidateSchema = validateSchema
	CheckEncoding  = checkEncoding
)

// DecodeContentFast is the one-pass content decoder; ok false when it
// declines.
func DecodeContentFast(data []byte) (Content, bool) { return decodeContent(data) }

// DecodeContentSlowly decodes content through encoding/json alone, nested
// content included, as before the one-pass decoder. Not for parallel tests.
func DecodeContentSlowly(data []byte) (Content, error) {
	slowContentOnly.Store(true)
	defer slowContentOnly.Store(false)
	var c Content
	err := json.Unmarshal(data, &c)
	return c, err
}

// MarshalContentSlowly encodes content through encoding/json alone, as
// before the one-pass encoder. Not for parallel tests.
func MarshalContentSlowly(c Content) ([]byte, error) {
	slowContentOnly.Store(true)
	defer slowContentOnly.Store(false)
	return Marshal(c)
}

// EncodesInOnePass reports whether the one-pass encoder takes b.
func EncodesInOnePass(b Block) bool {
	_, ok := appendBlock(nil, &b)
	return ok
}

// DecodeEventFast is the one-pass event decoder alone (fastevent.go).
func DecodeEventFast(data []byte) (Event, bool) { return decodeEvent(data) }

// DecodeSlowly is Decode with the one-pass event decoder off, as before it.
// Not for parallel tests.
func DecodeSlowly(data []byte, opts DecodeOptions) (Event, error) {
	slowEventOnly.Store(true)
	defer slowEventOnly.Store(false)
	return Decode(data, opts)
}
