package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Base is what every route group of Mnemos's own API starts from: the keys
// that authenticate its requests and count their refusals (nil for routes
// that check no tenant's key), and the log its failures go to. Its answers
// are in the Mnemos dialect.
type Base struct {
	Keys *Keys
	Log  *slog.Logger
}

// Auth resolves the request's bearer key to its tenant before next runs,
// refusing a key without scope (a store.Scope*).
func (b Base) Auth(scope string, next Handler) http.Handler {
	return b.Keys.Auth(Mnemos, BearerKey, scope, next)
}

// Internal answers 500 for what failed with err.
func (b Base) Internal(w http.ResponseWriter, what string, err error) {
	Internal(w, Mnemos, b.Log, what, err)
}

// RefuseRequest answers a request refused before any route logic runs (a
// bad id, an ambiguous or refused credential), counted by code.
func (b Base) RefuseRequest(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	b.Keys.Refused(w, r, Mnemos, &Error{Status: status, Code: code, Message: msg})
}

// IDKind names what a path id is, for the error code and message.
type IDKind string

// The kinds of ids the API takes in a path.
const (
	SessionIDs    IDKind = "session"
	CompactionIDs IDKind = "compaction"
	ToolResultIDs IDKind = "tool result"
	DreamIDs      IDKind = "dream"
	KeyIDs        IDKind = "key"
)

// PathID reads the route's {id} and checks it: every id the API takes in a
// path is a token as the turn event's schema defines it (turn.ValidToken),
// the rule every session was created under, so an id that fails it names
// nothing and never reaches Postgres (which refuses NUL and invalid UTF-8
// with an error, not an empty answer). It answers 400 bad_session_id or
// bad_id, counted, when the id is bad.
func (b Base) PathID(w http.ResponseWriter, r *http.Request, kind IDKind) (string, bool) {
	id := r.PathValue("id")
	if turn.ValidToken(id) {
		return id, true
	}
	code := "bad_id"
	if kind == SessionIDs {
		code = "bad_session_id"
	}
	b.RefuseRequest(w, r, http.StatusBadRequest, code, fmt.Sprintf("%s ids are 1 to %d ASCII letters, digits, '_' and '-', starting with a letter or a digit; got %s",
		kind, turn.MaxIDLen, Describe(id)))
	return "", false
}

// SessionFailed answers a request whose work on session id failed with
// err: 404 when the session does not exist, 500 otherwise, nothing when
// the client went away. It reports whether err was a failure.
func (b Base) SessionFailed(w http.ResponseWriter, r *http.Request, id, doing string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrNotFound):
		Fail(w, http.StatusNotFound, "not_found", "no session "+id)
	case r.Context().Err() == nil:
		b.Internal(w, doing, err)
	}
	return true
}

// Fail answers an error in the Mnemos dialect.
func Fail(w http.ResponseWriter, status int, code, msg string) {
	Mnemos.WriteError(w, &Error{Status: status, Code: code, Message: msg})
}
