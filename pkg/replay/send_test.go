package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/replay"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// ingest is a fake POST /v1/turns: it checks the request, decodes the event
// with the service's own decoder and answers with what respond returns.
type ingest struct {
	mu      sync.Mutex
	events  []turn.Event
	bodies  [][]byte
	calls   int
	respond func(call int, ev turn.Event) (status int, body string, header http.Header)
}

func (in *ingest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.calls++
	if r.Method != http.MethodPost || r.URL.Path != "/v1/turns" {
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
		return
	}
	if r.Header.Get("Authorization") != "Bearer key-123" {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"reason":"unauthorized","error":"bad API key"}`)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	ev, err := turn.Decode(body, turn.DecodeOptions{Tenant: "acme"})
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	status, answer, header := http.StatusAccepted, "", http.Header(nil)
	if in.respond != nil {
		status, answer, header = in.respond(in.calls, ev)
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	if status == http.StatusAccepted && answer == "" {
		in.events = append(in.events, ev)
		in.bodies = append(in.bodies, body)
		answer = `{"event_id":"` + ev.EventID + `"}`
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

type sendSetup struct {
	ingest *ingest
	events []turn.Event
	opts   replay.SendOptions
}

func setupSend(t *testing.T, respond func(call int, ev turn.Event) (int, string, http.Header)) sendSetup {
	t.Helper()
	// tool_heavy.jsonl: 6 API rounds (README), and awk programs with '>' in
	// their Bash commands.
	f, err := os.Open(claudecodetest.Path(t, "tool_heavy.jsonl"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	recs, err := claudecode.Parse(f)
	require.NoError(t, err)

	in := &ingest{respond: respond}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	return sendSetup{
		ingest: in,
		events: replay.Events(recs, replay.Options{Window: 200_000}),
		opts: replay.SendOptions{
			URL: srv.URL + "/", APIKey: "key-123", Client: srv.Client(),
			Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		},
	}
}

func TestSendAllInOrder(t *testing.T) {
	t.Parallel()

	s := setupSend(t, nil)
	stats, err := replay.Send(context.Background(), s.events, s.opts)
	require.NoError(t, err)
	require.Equal(t, replay.SendStats{Sent: 6}, stats)

	require.Len(t, s.ingest.events, 6)
	for i, ev := range s.ingest.events {
		require.Equal(t, int64(i+1), ev.Seq)
		require.Equal(t, s.events[i].EventID, ev.EventID)
		require.Equal(t, "acme", ev.TenantID, "the API key names the tenant")
		require.Equal(t, int64(200_000), ev.ContextWindow)
	}
	// Tool inputs reach the server byte for byte: '>' stays '>' (json.Marshal
	// would write \u003e, and the server would estimate more bytes).
	withArrow := 0
	for i, ev := range s.ingest.events {
		require.Equal(t, s.events[i].Response.Content, ev.Response.Content)
		require.Equal(t, s.events[i].InputMessages, ev.InputMessages)
		for _, b := range ev.Response.Content {
			require.NotContains(t, string(b.Input), `\u00`)
			if strings.Contains(string(b.Input), ">") {
				withArrow++
			}
		}
	}
	require.Positive(t, withArrow)
}

func TestSendRetries(t *testing.T) {
	t.Parallel()

	s := setupSend(t, func(call int, ev turn.Event) (int, string, http.Header) {
		switch call {
		case 1:
			return http.StatusServiceUnavailable, `{"error":"starting"}`, nil
		case 2:
			return http.StatusTooManyRequests, `{"error":"slow down"}`, http.Header{"Retry-After": {"0"}}
		case 5:
			return http.StatusBadGateway, "upstream", nil
		}
		return http.StatusAccepted, "", nil
	})
	stats, err := replay.Send(context.Background(), s.events[:3], s.opts)
	require.NoError(t, err)
	require.Equal(t, replay.SendStats{Sent: 3, Retries: 3}, stats)
	require.Equal(t, 6, s.ingest.calls)
	require.Len(t, s.ingest.events, 3)
	for i, ev := range s.ingest.events {
		require.Equal(t, s.events[i].EventID, ev.EventID)
	}
}

// TestSendCountsDuplicates: an event the server answers is a duplicate of
// one it accepted before is counted as sent and as a duplicate, so the
// replay can say that nothing new was published for it.
func TestSendCountsDuplicates(t *testing.T) {
	t.Parallel()

	s := setupSend(t, func(call int, ev turn.Event) (int, string, http.Header) {
		if call%2 == 0 {
			return http.StatusAccepted, `{"event_id":"` + ev.EventID + `","subject":"s","duplicate":true}`, nil
		}
		return http.StatusAccepted, "", nil
	})
	stats, err := replay.Send(context.Background(), s.events[:5], s.opts)
	require.NoError(t, err)
	require.Equal(t, replay.SendStats{Sent: 5, Duplicates: 2}, stats)
}

func TestSendGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()

	s := setupSend(t, func(int, turn.Event) (int, string, http.Header) {
		return http.StatusInternalServerError, `{"error":"database down"}`, nil
	})
	s.opts.MaxAttempts = 3
	stats, err := replay.Send(context.Background(), s.events, s.opts)
	var se *replay.SendError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusInternalServerError, se.Status)
	require.Equal(t, s.events[0].EventID, se.EventID)
	require.ErrorContains(t, err, "database down (gave up after 3 attempts)")
	require.Equal(t, replay.SendStats{Sent: 0, Retries: 2}, stats)
	require.Equal(t, 3, s.ingest.calls)
}

func TestSendStopsOnClientError(t *testing.T) {
	t.Parallel()

	s := setupSend(t, func(call int, ev turn.Event) (int, string, http.Header) {
		if ev.Seq == 4 {
			return http.StatusUnprocessableEntity, `{"reason":"seq_conflict","error":"seq 4 already holds another event"}`, nil
		}
		return http.StatusAccepted, "", nil
	})
	stats, err := replay.Send(context.Background(), s.events, s.opts)
	require.Error(t, err)
	require.Equal(t, replay.SendStats{Sent: 3}, stats)
	require.Equal(t, 4, s.ingest.calls, "4xx is not retried, later events are not sent")

	var se *replay.SendError
	require.ErrorAs(t, err, &se)
	require.Equal(t, &replay.SendError{EventID: s.events[3].EventID, Session: s.events[3].SessionID, Seq: 4,
		Status: http.StatusUnprocessableEntity, Message: "seq_conflict: seq 4 already holds another event"}, se)
	require.ErrorContains(t, err, s.events[3].EventID)
	require.ErrorContains(t, err, "422 Unprocessable Entity: seq_conflict: seq 4 already holds another event")
}

func TestSendUnauthorizedAndPlainTextErrors(t *testing.T) {
	t.Parallel()

	s := setupSend(t, nil)
	s.opts.APIKey = "wrong"
	_, err := replay.Send(context.Background(), s.events, s.opts)
	require.ErrorContains(t, err, "401 Unauthorized: unauthorized: bad API key")

	s2 := setupSend(t, func(int, turn.Event) (int, string, http.Header) {
		return http.StatusBadRequest, "plain text reason\n", nil
	})
	_, err = replay.Send(context.Background(), s2.events, s2.opts)
	require.ErrorContains(t, err, "400 Bad Request: plain text reason")
}

func TestSendChecksTheAcknowledgement(t *testing.T) {
	t.Parallel()

	s := setupSend(t, func(int, turn.Event) (int, string, http.Header) {
		return http.StatusAccepted, `{"event_id":"someone-else"}`, nil
	})
	_, err := replay.Send(context.Background(), s.events, s.opts)
	require.ErrorContains(t, err, `answer names event "someone-else"`)
	require.Equal(t, 1, s.ingest.calls)
}

func TestSendContextCanceledDuringBackoff(t *testing.T) {
	t.Parallel()

	s := setupSend(t, func(int, turn.Event) (int, string, http.Header) {
		return http.StatusServiceUnavailable, "", nil
	})
	s.opts.Backoff, s.opts.MaxBackoff = time.Hour, time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := replay.Send(ctx, s.events, s.opts)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
}

func TestSendUnreachableServer(t *testing.T) {
	t.Parallel()

	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more

	ev := turn.Event{Schema: turn.SchemaV1, EventID: "e1", SessionID: "s", Seq: 1}
	stats, err := replay.Send(context.Background(), []turn.Event{ev}, replay.SendOptions{
		URL: url, APIKey: "k", MaxAttempts: 2, Backoff: time.Millisecond,
	})
	var se *replay.SendError
	require.ErrorAs(t, err, &se)
	require.Zero(t, se.Status)
	require.ErrorContains(t, err, "gave up after 2 attempts")
	require.Equal(t, 1, stats.Retries)
}

func TestSendNeedsURLAndKey(t *testing.T) {
	t.Parallel()

	_, err := replay.Send(context.Background(), nil, replay.SendOptions{APIKey: "k"})
	require.ErrorContains(t, err, "URL")
	_, err = replay.Send(context.Background(), nil, replay.SendOptions{URL: "http://x"})
	require.ErrorContains(t, err, "API key")
}

func TestReadSessionsReadsEachSessionOnce(t *testing.T) {
	t.Parallel()

	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.Path)
		mu.Unlock()
		require.Equal(t, "Bearer key-123", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/v1/sessions/main" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no session"}}`)
			return
		}
		_, _ = io.WriteString(w, `{"session_id":"main","applied_seq":2,"tokens":{"count":900,"state":"ok"}}`)
	}))
	t.Cleanup(srv.Close)
	events := []turn.Event{{SessionID: "main", Seq: 1}, {SessionID: "main-agent-x", Seq: 1}, {SessionID: "main", Seq: 2}}
	sessions, err := replay.ReadSessions(context.Background(), events, replay.SendOptions{URL: srv.URL, APIKey: "key-123"})
	require.NoError(t, err)
	require.Len(t, sessions, 1, "a session the server does not have yet is left out")
	require.Equal(t, int64(900), sessions[0].Tokens.Count)
	require.Equal(t, []string{"/v1/sessions/main", "/v1/sessions/main-agent-x"}, asked, "each session once, in order")

	srv.Close()
	_, err = replay.ReadSessions(context.Background(), events, replay.SendOptions{URL: srv.URL, APIKey: "key-123"})
	require.ErrorContains(t, err, "read session main")
}
