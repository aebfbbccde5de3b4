package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// TurnsPath is the ingest endpoint, relative to the server URL.
const TurnsPath = "/v1/turns"

// SendOptions say where and how to send events.
type SendOptions struct {
	// URL is the server's base URL, e.g. http://localhost:8080.
	URL string
	// APIKey is sent as "Authorization: Bearer <APIKey>"; it names the tenant.
	APIKey string
	// Client sends the requests; nil means a client with a 30 s timeout.
	Client *http.Client
	// MaxAttempts bounds the tries of one event when the server answers 429
	// or 5xx, or cannot be reached; 0 means 5.
	MaxAttempts int
	// Backoff is the wait before the first retry, doubled before each next
	// one up to MaxBackoff; 0 means 500 ms and 10 s. A Retry-After header of
	// the server, in seconds, replaces the computed wait (capped at MaxBackoff).
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// SendStats says what Send did.
type SendStats struct {
	// Sent is the number of events the server accepted.
	Sent int
	// Duplicates is how many of the Sent the server answered were
	// duplicates of events it had accepted already (its `duplicate`):
	// nothing new was published for them, so a session that lost them
	// does not get them back.
	Duplicates int
	// Retries is the number of requests repeated after a 429, a 5xx or a transport error.
	Retries int
}

// SendError is an event the server refused, or kept failing on.
type SendError struct {
	EventID string
	Session string
	Seq     int64
	// Status is the last HTTP status, 0 when the server could not be reached.
	Status int
	// Message is the server's reason, or the transport error.
	Message string
}

func (e *SendError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("replay: event %s (session %s, seq %d): %s", e.EventID, e.Session, e.Seq, e.Message)
	}
	return fmt.Sprintf("replay: event %s (session %s, seq %d): server answered %d %s: %s",
		e.EventID, e.Session, e.Seq, e.Status, http.StatusText(e.Status), e.Message)
}

// Send posts each event, in order, to <URL>/v1/turns through the API's
// client and expects 202 Accepted with a body {"event_id": …} naming the event. A 429 or
// 5xx answer, or a transport error, is retried with backoff; any other answer
// stops the replay with a *SendError naming the event and the server's
// message. Events already accepted stay counted in the stats.
func Send(ctx context.Context, events []turn.Event, opts SendOptions) (SendStats, error) {
	var stats SendStats
	if opts.URL == "" {
		return stats, errors.New("replay: send: a server URL is required")
	}
	if opts.APIKey == "" {
		return stats, errors.New("replay: send: an API key is required")
	}
	hc := opts.Client
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	s := newSender(opts, client.New(opts.URL, opts.APIKey, client.WithHTTPClient(hc)))
	for i := range events {
		retries, duplicate, err := s.send(ctx, &events[i])
		stats.Retries += retries
		if err != nil {
			return stats, err
		}
		stats.Sent++
		if duplicate {
			stats.Duplicates++
		}
	}
	return stats, nil
}

type sender struct {
	opts SendOptions
	mn   *client.Client
}

// newSender is a sender to mn with opts, the retry settings it leaves
// unset filled in: 5 attempts, 0.5 s to 10 s apart.
func newSender(opts SendOptions, mn *client.Client) sender {
	s := sender{opts: opts, mn: mn}
	if s.opts.MaxAttempts <= 0 {
		s.opts.MaxAttempts = 5
	}
	if s.opts.Backoff <= 0 {
		s.opts.Backoff = 500 * time.Millisecond
	}
	if s.opts.MaxBackoff <= 0 {
		s.opts.MaxBackoff = 10 * time.Second
	}
	return s
}

// send delivers one event and returns how many requests it repeated and
// whether the server called the event a duplicate of one it had accepted.
func (s *sender) send(ctx context.Context, ev *turn.Event) (retries int, duplicate bool, err error) {
	body, err := turn.Marshal(ev) // raw tool inputs reach the server byte for byte
	if err != nil {
		return 0, false, fmt.Errorf("replay: encode event %s: %w", ev.EventID, err)
	}
	fail := func(status int, msg string) *SendError {
		return &SendError{EventID: ev.EventID, Session: ev.SessionID, Seq: ev.Seq, Status: status, Message: msg}
	}
	wait := s.opts.Backoff
	for attempt := 1; ; attempt++ {
		ans, err := s.post(ctx, body, ev.EventID)
		switch {
		case err != nil && ctx.Err() != nil:
			return attempt - 1, false, fmt.Errorf("replay: event %s: %w", ev.EventID, ctx.Err())
		case err == nil && ans.accepted:
			return attempt - 1, ans.duplicate, nil
		case err == nil && !retryable(ans.status):
			return attempt - 1, false, fail(ans.status, ans.message)
		}
		msg := ans.message
		if err != nil {
			msg = err.Error()
		}
		if attempt >= s.opts.MaxAttempts {
			return attempt - 1, false, fail(ans.status, fmt.Sprintf("%s (gave up after %d attempts)", msg, attempt))
		}
		d := min(wait, s.opts.MaxBackoff)
		if ans.retryAfter >= 0 {
			d = min(ans.retryAfter, s.opts.MaxBackoff)
		}
		wait *= 2
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt - 1, false, fmt.Errorf("replay: event %s: %w", ev.EventID, ctx.Err())
		case <-t.C:
		}
	}
}

func retryable(status int) bool {
	return status == http.StatusTooManyRequests || status >= 500
}

// answer is the server's answer to one request.
type answer struct {
	status int
	// accepted: 202 with a body naming the event.
	accepted bool
	// duplicate: accepted, and the server had accepted the event before.
	duplicate bool
	// message is the server's reason when not accepted.
	message string
	// retryAfter is the server's Retry-After in seconds, −1 when absent.
	retryAfter time.Duration
}

// post sends the event once. An error means no answer came.
func (s *sender) post(ctx context.Context, body []byte, eventID string) (answer, error) {
	ans := answer{retryAfter: -1}
	ack, err := s.mn.PostTurnJSON(ctx, body)
	if e, ok := client.AsError(err); ok {
		ans.status, ans.retryAfter = e.Status, e.RetryAfter
		ans.message = e.Code + ": " + e.Message
		if e.Code == "" { // no error body of the API: whatever the body says
			ans.message = serverMessage([]byte(e.Message))
		}
		return ans, nil
	}
	if err != nil && !errors.Is(err, client.ErrBadAnswer) {
		return ans, err // no answer came
	}
	ans.status = http.StatusAccepted
	switch {
	case err != nil:
		ans.message = fmt.Sprintf("answer is not {\"event_id\": …}: %v", err)
	case ack.EventID != eventID:
		ans.message = fmt.Sprintf("answer names event %q", ack.EventID)
	default:
		ans.accepted, ans.duplicate = true, ack.Duplicate
	}
	return ans, nil
}

// serverMessage extracts the reason from an error body: the usual JSON
// fields when there are any, else the body itself.
func serverMessage(data []byte) string {
	var body map[string]any
	if json.Unmarshal(data, &body) == nil {
		var parts []string
		for _, k := range []string{"reason", "error", "message", "detail"} {
			if v, ok := body[k].(string); ok && v != "" {
				parts = append(parts, v)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, ": ")
		}
	}
	if s := snippet(data); s != "" {
		return s
	}
	return "(empty body)"
}

func snippet(data []byte) string {
	s := strings.TrimSpace(string(data))
	const limit = 2000
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}

// ReadSessions reads the state of each session events name, in the order
// they first appear, as the server has it now (the accountant applies
// events after the gateway took them, so the last may not be in yet). A
// session the server does not have yet is left out.
func ReadSessions(ctx context.Context, events []turn.Event, opts SendOptions) ([]api.Session, error) {
	hc := opts.Client
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	mn := client.New(opts.URL, opts.APIKey, client.WithHTTPClient(hc))
	var out []api.Session
	seen := map[string]bool{}
	for _, ev := range events {
		if seen[ev.SessionID] {
			continue
		}
		seen[ev.SessionID] = true
		s, err := mn.GetSession(ctx, ev.SessionID)
		if client.IsNotFound(err) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("replay: read session %s: %w", ev.SessionID, err)
		}
		out = append(out, s)
	}
	return out, nil
}
