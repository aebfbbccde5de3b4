package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
)

func TestStatusKind(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]llm.ErrorKind{
		400: llm.KindRequest, 404: llm.KindRequest, 422: llm.KindRequest,
		401: llm.KindAuth, 403: llm.KindAuth,
		408: llm.KindTimeout,
		429: llm.KindRateLimited,
		500: llm.KindServer, 502: llm.KindServer, 503: llm.KindServer, 529: llm.KindServer,
	} {
		require.Equal(t, want, llm.StatusKind(status), "status %d", status)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"milliseconds win", map[string]string{"Retry-After": "3", "Retry-After-Ms": "250"}, 250 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 90 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"negative", map[string]string{"Retry-After": "-4"}, 0},
		{"garbage", map[string]string{"Retry-After": "soon", "Retry-After-Ms": "later"}, 0},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		require.Equal(t, tc.want, llm.RetryAfter(h, now), tc.name)
	}
	require.Zero(t, llm.RetryAfter(nil, now))
}

func TestTransportError(t *testing.T) {
	t.Parallel()
	urlErr := &url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name string
		err  error
		kind llm.ErrorKind
	}{
		{"deadline", fmt.Errorf("post: %w", context.DeadlineExceeded), llm.KindTimeout},
		{"deadline inside a url error", &url.Error{Op: "Post", Err: context.DeadlineExceeded}, llm.KindTimeout},
		{"connection", urlErr, llm.KindServer},
		{"cancelled", context.Canceled, ""},
		{"other", errors.New("could not encode"), llm.KindRequest},
		{"an answer that is not JSON", fmt.Errorf("error parsing response json: %w", json.Unmarshal([]byte("<html>"), new(any))), llm.KindBadResponse},
		{"an answer cut short", fmt.Errorf("error parsing response json: %w", io.ErrUnexpectedEOF), llm.KindBadResponse},
		{"an empty answer", fmt.Errorf("error parsing response json: %w", io.EOF), llm.KindBadResponse},
	} {
		err := llm.TransportError("p", tc.err)
		require.Equal(t, tc.kind, llm.KindOf(err), tc.name)
		require.ErrorIs(t, err, tc.err, tc.name)
		require.ErrorContains(t, err, "p: ", tc.name)
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	require.Equal(t, "llm: rate_limited (HTTP 429): slow", (&llm.Error{Kind: llm.KindRateLimited, Status: 429, Err: errors.New("slow")}).Error())
	require.Equal(t, "llm: timeout: late", (&llm.Error{Kind: llm.KindTimeout, Err: errors.New("late")}).Error())
}
