package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/jsonvalid"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// idKind names what a path id is, for the error code and message.
type idKind string

const (
	sessionIDs    idKind = "session"
	compactionIDs idKind = "compaction"
	toolResultIDs idKind = "tool result"
	dreamIDs      idKind = "dream"
)

// pathID reads the route's {id} and checks it: every id the API takes in a
// path is a token as the turn event's schema defines it (turn.ValidToken),
// the rule every session was created under, so an id that fails it names
// nothing and never reaches Postgres (which refuses NUL and invalid UTF-8
// with an error, not an empty answer). It answers 400 bad_session_id or
// bad_id, counted, when the id is bad.
func (g *Gateway) pathID(w http.ResponseWriter, r *http.Request, kind idKind) (string, bool) {
	id := r.PathValue("id")
	if turn.ValidToken(id) {
		return id, true
	}
	code := "bad_id"
	if kind == sessionIDs {
		code = "bad_session_id"
	}
	g.refuseRequest(w, r, http.StatusBadRequest, code, fmt.Sprintf("%s ids are 1 to %d ASCII letters, digits, '_' and '-', starting with a letter or a digit; got %s",
		kind, turn.MaxIDLen, describe(id)))
	return "", false
}

// describe quotes a refused value for an error message, shortened; bytes
// that are not UTF-8 show as escapes.
func describe(v string) string {
	const most = 64
	if len(v) > most {
		return fmt.Sprintf("%q… (%d bytes)", v[:most], len(v))
	}
	return fmt.Sprintf("%q", v)
}

// checkText refuses a free-text value the gateway stores (a header, a
// query parameter): Postgres cannot store invalid UTF-8 or NUL, and the
// value is bounded so request metadata cannot outweigh what it describes.
func checkText(what, v string, maxBytes int) error {
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

// refuseRequest answers a request the gateway refuses before any route
// logic runs (a bad id, an ambiguous or refused credential), counted by code.
func (g *Gateway) refuseRequest(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	g.keys.Refused(w, r, httpapi.Mnemos, &httpapi.Error{Status: status, Code: code, Message: msg})
}

// errDuplicateKey is a JSON body naming a key twice in one object.
var errDuplicateKey = errors.New("duplicate key")

// decodeBody decodes a JSON request body into v as strictly as turn events
// are read: unknown fields and a key named twice in one object (which
// encoding/json would settle silently, last one wins) are refused. An empty
// body is io.EOF.
func decodeBody(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return io.EOF
	}
	if jsonvalid.Valid(data) {
		if at, key := turn.DuplicateKey(data); at >= 0 {
			return fmt.Errorf("%w: %s at byte %d repeats a key of the same object; name each key once", errDuplicateKey, describe(key), at)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// bodyErrorCode is the error code of a body decodeBody refused.
func bodyErrorCode(err error) string {
	if errors.Is(err, errDuplicateKey) {
		return string(turn.ReasonDuplicateKey)
	}
	return "bad_json"
}
