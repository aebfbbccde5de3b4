package turn

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mnemos-ai/mnemos/pkg/jsonvalid"
)

// SchemaJSON is the JSON Schema of mnemos.turn.v1, as committed in the repository.
//
//go:embed mnemos.turn.v1.schema.json
var SchemaJSON []byte

// Reason names why an input was refused. Reasons are stable: they label
// metrics, HTTP error bodies and dead-letter headers.
type Reason string

// The reasons an event is refused.
const (
	ReasonTooLarge        Reason = "too_large"
	ReasonInvalidUTF8     Reason = "invalid_utf8"
	ReasonNULCharacter    Reason = "nul_character"
	ReasonBadJSON         Reason = "bad_json"
	ReasonUnknownSchema   Reason = "unknown_schema"
	ReasonSchemaViolation Reason = "schema_violation"
	ReasonNegativeUsage   Reason = "negative_usage"
	ReasonTenantMismatch  Reason = "tenant_mismatch"
	ReasonSessionMismatch Reason = "session_mismatch"
	ReasonDuplicateUUID   Reason = "duplicate_uuid"
	ReasonSeqConflict     Reason = "seq_conflict"
	ReasonLate            Reason = "late"
	ReasonUnknownTenant   Reason = "unknown_tenant"
	// ReasonDuplicateKey: an object names the same key twice.
	ReasonDuplicateKey Reason = "duplicate_key"
	// ReasonSeqTooFar: seq is further ahead of the session's applied seq
	// than the tenant's window.
	ReasonSeqTooFar Reason = "seq_too_far"
	// ReasonTooManyMessages: the turn carries more messages than the
	// tenant's limit (413).
	ReasonTooManyMessages Reason = "too_many_messages"
	// ReasonSessionFull: the session holds the most messages the tenant's
	// limit allows (413).
	ReasonSessionFull Reason = "session_full"
	// ReasonBadContextWindow, ReasonBadMaxOutputTokens: the event's window
	// or output size leaves no room for the tenant's thresholds, or is
	// outside what any model has.
	ReasonBadContextWindow   Reason = "bad_context_window"
	ReasonBadMaxOutputTokens Reason = "bad_max_output_tokens" //nolint:gosec // a reason code that names a field, not a credential
)

// InputError is bad input: the sender must change the event, retrying it
// unchanged can never succeed.
type InputError struct {
	Reason Reason
	Detail string
}

func (e *InputError) Error() string {
	return fmt.Sprintf("%s: %s", e.Reason, e.Detail)
}

// Refuse builds an InputError.
func Refuse(reason Reason, format string, args ...any) *InputError {
	return &InputError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// AsInputError reports whether err is, or wraps, an InputError.
func AsInputError(err error) (*InputError, bool) {
	var ie *InputError
	ok := errors.As(err, &ie)
	return ie, ok
}

// DefaultMaxEventBytes bounds one encoded event unless configured otherwise.
const DefaultMaxEventBytes = 8 << 20

// DecodeOptions says what the transport already knows about the event.
type DecodeOptions struct {
	// MaxBytes bounds the encoded event; 0 means DefaultMaxEventBytes.
	MaxBytes int
	// Tenant is the tenant named by the API key or the NATS subject. A body
	// naming another tenant is refused; a body naming none gets this one.
	Tenant string
	// Session, when set (from the NATS subject or the URL), must equal the body's session_id.
	Session string
}

// Decode parses and validates one encoded event. Every failure is an
// *InputError. The event comes back in canonical form (see normalize): for
// any event it accepts, decoding what Marshal writes of it gives an equal event.
func Decode(data []byte, opts DecodeOptions) (Event, error) {
	var ev Event
	limit := opts.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxEventBytes
	}
	if err := checkEncoding(data, limit); err != nil {
		return ev, err
	}
	if err := checkSchemaName(data); err != nil {
		return ev, err
	}
	if fast, ok := decodeEvent(data); ok { // fastevent.go: the usual event, in one pass
		ev = fast
	} else if err := json.Unmarshal(data, &ev); err != nil {
		// The schema names the failing location; Go's error often does not
		// (a bad occurred_at only says which time it could not parse).
		if serr := validateSchema(data); serr != nil {
			return Event{}, serr
		}
		return Event{}, Refuse(ReasonSchemaViolation, "%v", err)
	}
	if err := checkUsage(ev.Usage); err != nil {
		return Event{}, err
	}
	if !schemaAccepts(data) { // fastcheck.go: most events are decided without the schema's tree
		if err := validateSchema(data); err != nil {
			return Event{}, err
		}
	}
	if opts.Tenant != "" {
		switch ev.TenantID {
		case "":
			ev.TenantID = opts.Tenant
		case opts.Tenant:
		default:
			return Event{}, Refuse(ReasonTenantMismatch, "event names tenant %q but was sent for tenant %q", ev.TenantID, opts.Tenant)
		}
	}
	if ev.TenantID == "" {
		return Event{}, Refuse(ReasonSchemaViolation, "tenant_id is required when the transport does not name the tenant")
	}
	if opts.Session != "" && ev.SessionID != opts.Session {
		return Event{}, Refuse(ReasonSessionMismatch, "event names session %q but was sent for session %q", ev.SessionID, opts.Session)
	}
	if err := checkUniqueUUIDs(&ev); err != nil {
		return Event{}, err
	}
	if err := normalize(&ev); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// checkEncoding refuses what is no JSON event at all: too large, not UTF-8,
// not JSON, a NUL Postgres cannot store, a key named twice.
func checkEncoding(data []byte, limit int) error {
	if len(data) > limit {
		return Refuse(ReasonTooLarge, "event is %d bytes, the limit is %d", len(data), limit)
	}
	if !utf8.Valid(data) {
		return Refuse(ReasonInvalidUTF8, "event is not valid UTF-8 at byte %d", firstInvalidUTF8(data))
	}
	if !jsonvalid.Valid(data) {
		return Refuse(ReasonBadJSON, "%s", jsonSyntaxDetail(data))
	}
	if at := escapedNUL(data); at >= 0 {
		return Refuse(ReasonNULCharacter, "a string holds \\u0000 (NUL) at byte %d; Postgres cannot store it, remove it", at)
	}
	if at, key := DuplicateKey(data); at >= 0 {
		if len(key) > 64 {
			key = key[:64] + "…"
		}
		return Refuse(ReasonDuplicateKey, "key %q at byte %d repeats a key of the same object; name each key once", key, at)
	}
	return nil
}

// checkSchemaName refuses an event that is no object or names no schema
// this server reads.
func checkSchemaName(data []byte) error {
	if schemaNamed(data) {
		return nil // the usual case, without decoding the event into a map
	}
	var head map[string]json.RawMessage
	if err := json.Unmarshal(data, &head); err != nil || head == nil {
		return Refuse(ReasonBadJSON, "event must be a JSON object, got %s", jsonKind(data))
	}
	rawSchema, ok := head["schema"]
	if !ok || string(rawSchema) == "null" {
		return Refuse(ReasonUnknownSchema, "missing \"schema\"; this server accepts %q", SchemaV1)
	}
	var schema string
	if err := json.Unmarshal(rawSchema, &schema); err != nil {
		return Refuse(ReasonUnknownSchema, "\"schema\" must be a string, got %s; this server accepts %q", jsonKind(rawSchema), SchemaV1)
	}
	if schema != SchemaV1 && schema != SchemaV1_1 {
		return Refuse(ReasonUnknownSchema, "schema %q is not supported; this server accepts %q and %q", schema, SchemaV1, SchemaV1_1)
	}
	return nil
}

// checkUsage refuses negative usage counts.
func checkUsage(u *Usage) error {
	if u == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"input_tokens", u.InputTokens},
		{"cache_creation_input_tokens", u.CacheCreationInputTokens},
		{"cache_read_input_tokens", u.CacheReadInputTokens},
		{"output_tokens", u.OutputTokens},
	} {
		if f.v < 0 {
			return Refuse(ReasonNegativeUsage, "usage.%s is %d; usage counts must be zero or more", f.name, f.v)
		}
	}
	return nil
}

// normalize puts a decoded event in its canonical form, the one Marshal
// writes, so that decoding an event Marshal wrote gives an equal event:
// raw JSON (tool inputs, sources, citations, cache_control) compacted,
// occurred_at in UTC, an empty memory_scope left out.
func normalize(ev *Event) error {
	ev.OccurredAt = ev.OccurredAt.UTC()
	if y := ev.OccurredAt.Year(); y < 0 || y > 9999 {
		return Refuse(ReasonSchemaViolation, "at /occurred_at: %s is outside years 0000-9999 in UTC", ev.OccurredAt.Format("2006-01-02T15:04:05Z"))
	}
	if len(ev.MemoryScope) == 0 {
		ev.MemoryScope = nil
	}
	for i := range ev.InputMessages {
		if err := compactContent(ev.InputMessages[i].Content); err != nil {
			return Refuse(ReasonSchemaViolation, "at /input_messages/%d/content: %v", i, err)
		}
	}
	if ev.Response != nil {
		if err := compactContent(ev.Response.Content); err != nil {
			return Refuse(ReasonSchemaViolation, "at /response/content: %v", err)
		}
	}
	return nil
}

// compactContent removes insignificant whitespace from the raw JSON fields
// of every block, nested tool result content included. The encoder compacts
// raw JSON when it writes it, so only compact raw JSON survives a round trip.
func compactContent(c Content) error {
	for i := range c {
		b := &c[i]
		for _, raw := range []*json.RawMessage{&b.Citations, &b.Input, &b.Source, &b.CacheControl} {
			if len(*raw) == 0 {
				continue
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, *raw); err != nil {
				return err
			}
			if buf.Len() != len(*raw) {
				*raw = buf.Bytes()
			}
		}
		if b.Content != nil {
			if err := compactContent(*b.Content); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonKind names the kind of a valid JSON value, for error details.
func jsonKind(data []byte) string {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "nothing"
	}
	switch data[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// checkUniqueUUIDs refuses an event that repeats a message uuid with other
// content; an exact repeat is harmless and dropped.
func checkUniqueUUIDs(ev *Event) error {
	first := make(map[string]int, len(ev.InputMessages)+1) // uuid → its index in kept
	kept := ev.InputMessages[:0]                           // only grows, so kept[j] stays put
	for _, m := range ev.InputMessages {
		j, seen := first[m.UUID]
		if !seen {
			first[m.UUID] = len(kept)
			kept = append(kept, m)
			continue
		}
		// Encode only on a collision, which is rare: most events have none.
		a, errA := Marshal(kept[j])
		b, errB := Marshal(m)
		if err := errors.Join(errA, errB); err != nil {
			return Refuse(ReasonSchemaViolation, "message %s: %v", m.UUID, err)
		}
		if !bytes.Equal(a, b) {
			return Refuse(ReasonDuplicateUUID, "message uuid %s appears twice with different content", m.UUID)
		}
	}
	ev.InputMessages = kept
	if ev.Response != nil {
		if _, ok := first[ev.Response.UUID]; ok {
			return Refuse(ReasonDuplicateUUID, "response uuid %s is also an input message uuid", ev.Response.UUID)
		}
	}
	return nil
}

var compiledSchema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const url = "mnemos.turn.v1.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
})

func validateSchema(data []byte) error {
	schema, err := compiledSchema()
	if err != nil {
		return fmt.Errorf("turn: compile embedded schema: %w", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return Refuse(ReasonBadJSON, "%v", err)
	}
	if err := schema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return Refuse(ReasonSchemaViolation, "%s", schemaDetail(ve))
		}
		return Refuse(ReasonSchemaViolation, "%v", err)
	}
	return checkKeyCase(inst)
}

// Field names of the structs an event decodes into, by struct.
var (
	eventFields   = jsonFields(reflect.TypeFor[Event]())
	usageFields   = jsonFields(reflect.TypeFor[Usage]())
	messageFields = jsonFields(reflect.TypeFor[Message]())
	blockFields   = jsonFields(reflect.TypeFor[Block]())

	requestPrefixFields    = jsonFields(reflect.TypeFor[RequestPrefix]())
	clientCompactionFields = jsonFields(reflect.TypeFor[ClientCompaction]())
)

func jsonFields(t reflect.Type) []string {
	names := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// checkKeyCase refuses a key that differs from a field name only in letter
// case ("Role", or "ſignature" with a long s). encoding/json would fill the
// field from it, while the schema checked the exact key or nothing at all:
// {"role": "user", "Role": "system"} would pass as a system message.
func checkKeyCase(inst any) error {
	ev, ok := inst.(map[string]any)
	if !ok {
		return nil
	}
	if err := foldedKey(ev, eventFields, ""); err != nil {
		return err
	}
	if u, ok := ev["usage"].(map[string]any); ok {
		if err := foldedKey(u, usageFields, "/usage"); err != nil {
			return err
		}
	}
	if msgs, ok := ev["input_messages"].([]any); ok {
		for i, m := range msgs {
			if err := checkMessageKeys(m, fmt.Sprintf("/input_messages/%d", i)); err != nil {
				return err
			}
		}
	}
	return checkMessageKeys(ev["response"], "/response")
}

func checkMessageKeys(v any, loc string) error {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if err := foldedKey(m, messageFields, loc); err != nil {
		return err
	}
	return checkBlockKeys(m["content"], loc+"/content")
}

// checkBlockKeys checks an array of blocks; the content of every block type
// decodes into blocks, so nested content is checked whatever the type.
func checkBlockKeys(v any, loc string) error {
	blocks, ok := v.([]any)
	if !ok {
		return nil
	}
	for i, b := range blocks {
		obj, ok := b.(map[string]any)
		if !ok {
			continue
		}
		at := fmt.Sprintf("%s/%d", loc, i)
		if err := foldedKey(obj, blockFields, at); err != nil {
			return err
		}
		if err := checkBlockKeys(obj["content"], at+"/content"); err != nil {
			return err
		}
	}
	return nil
}

func foldedKey(obj map[string]any, fields []string, loc string) error {
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		if slices.Contains(fields, key) {
			continue
		}
		for _, f := range fields {
			if strings.EqualFold(key, f) {
				if loc == "" {
					loc = "/"
				}
				return Refuse(ReasonSchemaViolation, "at %s: property %q differs from %q only in letter case", loc, key, f)
			}
		}
	}
	return nil
}

// schemaDetail names the deepest failing location, which is what a sender
// needs to fix, and what is wrong there. The deepest location matters under
// oneOf: content that is an array of blocks fails both as a string (at the
// content) and inside the faulty block; the block is the one to report.
// Several failures at that location are all listed.
func schemaDetail(ve *jsonschema.ValidationError) string {
	var deepest []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			switch {
			case len(deepest) == 0 || len(e.InstanceLocation) > len(deepest[0].InstanceLocation):
				deepest = []*jsonschema.ValidationError{e}
			case len(e.InstanceLocation) == len(deepest[0].InstanceLocation):
				deepest = append(deepest, e)
			}
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(deepest) == 0 {
		return ve.Error()
	}
	msgs := make([]string, 0, len(deepest))
	for _, leaf := range deepest {
		// A leaf prints as "at '<location>': <what is wrong>"; printed
		// without its location, only what is wrong is left after the prefix.
		bare := *leaf
		bare.InstanceLocation = nil
		msg := strings.TrimPrefix(bare.Error(), "at '': ")
		if !slices.Contains(msgs, msg) {
			msgs = append(msgs, msg)
		}
	}
	return fmt.Sprintf("at %s: %s", jsonPointer(deepest[0].InstanceLocation), strings.Join(msgs, "; "))
}

// jsonPointer writes a location as a JSON pointer (RFC 6901); the root is "/".
func jsonPointer(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	var sb strings.Builder
	for _, tok := range tokens {
		sb.WriteByte('/')
		sb.WriteString(strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
	}
	return sb.String()
}

// escapedNUL returns the offset of the first \u0000 escape in valid JSON,
// or -1. Valid JSON holds a NUL only escaped, inside a string; a backslash
// that is itself escaped ("\\u0000") is not one.
func escapedNUL(data []byte) int {
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			continue
		}
		if data[i+1] == 'u' && i+6 <= len(data) && string(data[i+2:i+6]) == "0000" {
			return i
		}
		i++ // skip the escaped character
	}
	return -1
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

func jsonSyntaxDetail(data []byte) string {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	}
	if err != nil {
		return "invalid JSON: " + err.Error()
	}
	return "invalid JSON"
}
