// Package httpapi is what every HTTP route of Mnemos shares: the error an
// answer carries and the dialects that write it, the API keys that name a
// request's tenant, and the mux routes are registered on.
package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/mnemos-ai/mnemos/api"
)

// Error is an answer that refuses a request: its HTTP status, Mnemos's
// error code, a message for the client and, when set, Retry-After in
// seconds. Status 0 is a request whose client left: nothing is answered.
type Error struct {
	Status     int
	Code       string
	Message    string
	RetryAfter string
}

func (e *Error) Error() string { return e.Message }

// Dialect writes an API's answers: Mnemos's own routes answer in Mnemos,
// the model proxy's in the shape of the API it stands in for. A route
// chooses its dialect when it is registered.
type Dialect interface {
	// WriteError writes e's body with e's status.
	WriteError(w http.ResponseWriter, e *Error)
}

// Refuse answers e in d: with Retry-After when e has one, and nothing when
// the client left.
func Refuse(w http.ResponseWriter, d Dialect, e *Error) {
	if e.Status == 0 {
		return
	}
	if e.RetryAfter != "" {
		w.Header().Set("Retry-After", e.RetryAfter)
	}
	d.WriteError(w, e)
}

// Internal logs what failed with err and answers 500 in d, without err's
// text: that is for the log.
func Internal(w http.ResponseWriter, d Dialect, log *slog.Logger, what string, err error) {
	log.Error(what+" failed", "err", err)
	d.WriteError(w, &Error{Status: http.StatusInternalServerError, Code: "internal", Message: what + " failed"})
}

// Mnemos is the dialect of Mnemos's own API: api.ErrorBody.
var Mnemos Dialect = mnemosDialect{}

type mnemosDialect struct{}

func (mnemosDialect) WriteError(w http.ResponseWriter, e *Error) {
	WriteJSON(w, e.Status, api.ErrorBody{Error: api.ErrorDetail{Code: e.Code, Message: e.Message}})
}

// Anthropic is the dialect of Anthropic's Messages API, which the model
// proxy stands in for: its clients read an error's type from the body.
var Anthropic Dialect = anthropicDialect{}

type anthropicDialect struct{}

// WriteError writes e with the error type its code names when that is one
// of the Messages API's types, else the type of its status.
func (anthropicDialect) WriteError(w http.ResponseWriter, e *Error) {
	kind := AnthropicKind(e.Status)
	if anthropicKinds[e.Code] {
		kind = e.Code
	}
	WriteJSON(w, e.Status, api.AnthropicErrorBody{Type: "error", Error: api.AnthropicDetail{Type: kind, Message: e.Message}})
}

// OpenAI is the dialect of OpenAI's APIs, which the model proxy's OpenAI
// door stands in for: its clients read the error's type and code.
var OpenAI Dialect = openAIDialect{}

type openAIDialect struct{}

// WriteError writes e with OpenAI's type for its status and Mnemos's code;
// the code insufficient_quota (a spent budget) is its type too, as OpenAI
// writes it.
func (openAIDialect) WriteError(w http.ResponseWriter, e *Error) {
	kind := "invalid_request_error"
	switch {
	case e.Code == "insufficient_quota":
		kind = e.Code
	case e.Status >= http.StatusInternalServerError:
		kind = "server_error"
	}
	WriteJSON(w, e.Status, api.OpenAIErrorBody{Error: api.OpenAIDetail{Message: e.Message, Type: kind, Code: e.Code}})
}

// anthropicKinds are the Messages API's error types.
var anthropicKinds = map[string]bool{
	"invalid_request_error": true, "authentication_error": true, "permission_error": true, "not_found_error": true,
	"request_too_large": true, "rate_limit_error": true, "api_error": true, "overloaded_error": true, "billing_error": true,
}

// AnthropicKind is the Messages API's error type for a status.
func AnthropicKind(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing left to tell it
}

// WriteStableJSON answers v as JSON without HTML escaping, so the bytes are
// the content as stored ("<" stays "<").
func WriteStableJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		Fail(w, http.StatusInternalServerError, "internal", "encoding the answer failed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client went away; nothing left to tell it
}
