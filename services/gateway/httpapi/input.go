package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/jsonvalid"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Describe quotes a refused value for an error message, shortened; bytes
// that are not UTF-8 show as escapes.
func Describe(v string) string {
	const most = 64
	if len(v) > most {
		return fmt.Sprintf("%q… (%d bytes)", v[:most], len(v))
	}
	return fmt.Sprintf("%q", v)
}

// CheckText refuses a free-text value the gateway stores (a header, a
// query parameter): Postgres cannot store invalid UTF-8 or NUL, and the
// value is bounded so request metadata cannot outweigh what it describes.
func CheckText(what, v string, maxBytes int) error {
	switch {
	case len(v) > maxBytes:
		return fmt.Errorf("%s is %d bytes, longer than the limit of %d", what, len(v), maxBytes)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not valid UTF-8", what)
	case strings.ContainsRune(v, 0):
		return fmt.Errorf("%s holds a NUL character", what)
	}
	return nil
}

// errDuplicateKey is a JSON body naming a key twice in one object.
var errDuplicateKey = errors.New("duplicate key")

// DecodeBody decodes a JSON request body into v as strictly as turn events
// are read: unknown fields and a key named twice in one object (which
// encoding/json would settle silently, last one wins) are refused. An empty
// body is io.EOF.
func DecodeBody(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return io.EOF
	}
	if jsonvalid.Valid(data) {
		if at, key := turn.DuplicateKey(data); at >= 0 {
			return fmt.Errorf("%w: %s at byte %d repeats a key of the same object; name each key once", errDuplicateKey, Describe(key), at)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// BodyErrorCode is the error code of a body DecodeBody refused.
func BodyErrorCode(err error) string {
	if errors.Is(err, errDuplicateKey) {
		return string(turn.ReasonDuplicateKey)
	}
	return "bad_json"
}
