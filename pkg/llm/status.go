package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// StatusKind classifies the HTTP status of a failed call: 429 is
// KindRateLimited; 5xx (and 529, overloaded) KindServer; 401 and 403
// KindAuth; 408 KindTimeout; any other status KindRequest. A prompt that
// is too long is a 400 a provider recognises by its body, not by status.
func StatusKind(status int) ErrorKind {
	switch {
	case status == http.StatusTooManyRequests:
		return KindRateLimited
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return KindAuth
	case status == http.StatusRequestTimeout:
		return KindTimeout
	case status >= 500:
		return KindServer
	default:
		return KindRequest
	}
}

// TransportError classifies an error that came without an HTTP answer: a
// deadline is KindTimeout; a failed connection (a *url.Error) KindServer,
// so it is retried; an answer whose body is not the JSON the API speaks
// KindBadResponse; a cancelled context is returned as it is, wrapped, since
// nobody wants the call any more; anything else (a request that could not
// be built) is KindRequest.
func TransportError(provider string, err error) error {
	wrapped := fmt.Errorf("%s: %w", provider, err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Kind: KindTimeout, Err: wrapped}
	case errors.Is(err, context.Canceled):
		return wrapped
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return &Error{Kind: KindServer, Err: wrapped}
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syntax) || errors.As(err, &typ) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &Error{Kind: KindBadResponse, Err: wrapped}
	}
	return &Error{Kind: KindRequest, Err: wrapped}
}

// RetryAfter reads how long a response asked the client to wait: the
// retry-after-ms header (milliseconds), else retry-after in seconds or as
// an HTTP date (relative to now). It is 0 when there is no usable hint.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}
