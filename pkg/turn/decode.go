package turn

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
	ReasonBadJSON         Reason = "bad_json"
	ReasonUnknownSchema   Reason = "unknown_schema"
	ReasonSchemaViolation Reason = "schema_violation"
	ReasonNegativeUsage   Reason = "negative_usage"
	ReasonTenantMismatch  Reason = "tenant_mismatch"
	ReasonSessionMismatch Reason = "session_mismatch"
	ReasonDuplicateUUID   Reason = "duplicate_uuid"
	ReasonSeqConflict     Reason = "seq_conflict"
	ReasonEventIDConflict Reason = "event_id_conflict"
	ReasonUnknownTenant   Reason = "unknown_tenant"
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

// Decode parses and validates one encoded event. Every failure is an *InputError.
func Decode(data []byte, opts DecodeOptions) (Event, error) {
	var ev Event
	limit := opts.MaxBytes
	if limit <= 0 {
		limit = DefaultMaxEventBytes
	}
	if len(data) > limit {
		return ev, Refuse(ReasonTooLarge, "event is %d bytes, the limit is %d", len(data), limit)
	}
	if !utf8.Valid(data) {
		return ev, Refuse(ReasonInvalidUTF8, "event is not valid UTF-8 at byte %d", firstInvalidUTF8(data))
	}
	if !json.Valid(data) {
		return ev, Refuse(ReasonBadJSON, "%s", jsonSyntaxDetail(data))
	}
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return ev, Refuse(ReasonBadJSON, "event must be a JSON object: %v", err)
	}
	if head.Schema == nil {
		return ev, Refuse(ReasonUnknownSchema, "missing \"schema\"; this server accepts %q", SchemaV1)
	}
	if *head.Schema != SchemaV1 {
		return ev, Refuse(ReasonUnknownSchema, "schema %q is not supported; this server accepts %q", *head.Schema, SchemaV1)
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return Event{}, Refuse(ReasonSchemaViolation, "%v", err)
	}
	if u := ev.Usage; u != nil && (u.InputTokens < 0 || u.CacheCreationInputTokens < 0 || u.CacheReadInputTokens < 0 || u.OutputTokens < 0) {
		return Event{}, Refuse(ReasonNegativeUsage, "usage counts must be zero or more, got input=%d cache_creation=%d cache_read=%d output=%d",
			u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens)
	}
	if err := validateSchema(data); err != nil {
		return Event{}, err
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
	return ev, nil
}

// checkUniqueUUIDs refuses an event that repeats a message uuid with other
// content; an exact repeat is harmless and dropped.
func checkUniqueUUIDs(ev *Event) error {
	seen := make(map[string][]byte, len(ev.InputMessages)+1)
	kept := ev.InputMessages[:0]
	for _, m := range ev.InputMessages {
		enc, err := json.Marshal(m)
		if err != nil {
			return Refuse(ReasonSchemaViolation, "message %s: %v", m.UUID, err)
		}
		if prev, ok := seen[m.UUID]; ok {
			if !bytes.Equal(prev, enc) {
				return Refuse(ReasonDuplicateUUID, "message uuid %s appears twice with different content", m.UUID)
			}
			continue
		}
		seen[m.UUID] = enc
		kept = append(kept, m)
	}
	ev.InputMessages = kept
	if ev.Response != nil {
		if _, ok := seen[ev.Response.UUID]; ok {
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
	return nil
}

// schemaDetail names the deepest failing location, which is what a sender needs to fix.
func schemaDetail(ve *jsonschema.ValidationError) string {
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	loc := "/" + strings.Join(leaf.InstanceLocation, "/")
	msg := leaf.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.HasPrefix(msg, "at ") {
		msg = msg[i+2:]
	}
	return fmt.Sprintf("at %s: %s", loc, msg)
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
