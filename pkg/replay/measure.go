package replay

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// RequestLog is what a Claude Code transcript records of the API requests
// themselves (the CLI's api-request, api-request-blob and
// api-request-shape records): each main-agent request's system prompt and
// tools, and the user messages it carried, which include what the CLI adds
// to the prompt (reminders, the files it re-attaches) and the user records
// do not hold.
type RequestLog struct {
	Requests []LoggedRequest
}

// LoggedRequest is one request of the log.
type LoggedRequest struct {
	Model string
	// System and Tools are the request's, from its shape.
	System, Tools json.RawMessage
	// New are the user messages no earlier request carried, in order.
	New []turn.Message
}

// ReadRequestLog reads the request records of a transcript. A transcript
// without them gives an empty log; a record that does not decode is an
// error naming its line.
func ReadRequestLog(r io.Reader) (RequestLog, error) {
	type shape struct {
		System json.RawMessage `json:"system"`
		Tools  json.RawMessage `json:"tools"`
	}
	var (
		log    RequestLog
		shapes = map[string]shape{}
		blobs  = map[string]turn.Message{}
		seen   = map[string]bool{}
		sc     = bufio.NewScanner(r)
		line   int
	)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line++
		var rec struct {
			Type      string          `json:"type"`
			ShapeHash string          `json:"shapeHash"`
			Shape     shape           `json:"shape"`
			Hash      string          `json:"hash"`
			Message   json.RawMessage `json:"message"`
			Tail      []string        `json:"tail"`
			Params    struct {
				Model string `json:"model"`
			} `json:"params"`
		}
		b := sc.Bytes()
		if !bytes.Contains(b, []byte(`"api-request`)) {
			continue
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return log, fmt.Errorf("replay: line %d: %w", line, err)
		}
		switch rec.Type {
		case "api-request-shape":
			shapes[rec.ShapeHash] = rec.Shape
		case "api-request-blob":
			var m turn.Message
			if err := json.Unmarshal(rec.Message, &m); err != nil {
				return log, fmt.Errorf("replay: line %d: blob %s: %w", line, rec.Hash, err)
			}
			blobs[rec.Hash] = m
		case "api-request":
			sh, ok := shapes[rec.ShapeHash]
			if !ok {
				return log, fmt.Errorf("replay: line %d: request names shape %s, which no earlier record holds", line, rec.ShapeHash)
			}
			req := LoggedRequest{Model: rec.Params.Model, System: sh.System, Tools: sh.Tools}
			for _, h := range rec.Tail {
				m, ok := blobs[h]
				if !ok || seen[h] || m.Role != "user" {
					continue // an assistant message (the last response) or one sent before
				}
				seen[h] = true
				m.UUID = "req-" + h[:min(len(h), 60)]
				req.New = append(req.New, m)
			}
			log.Requests = append(log.Requests, req)
		}
	}
	if err := sc.Err(); err != nil {
		return log, fmt.Errorf("replay: read request log: %w", err)
	}
	return log, nil
}

// WithRequests makes the main agent's events carry what their requests
// carried: the k-th event of the session takes the k-th request's new user
// messages as its input messages and its system prompt and tools as its
// request_prefix (schema v1.1), whole when they change and by hash after.
// Events of a repeated transcript (Repeat) take the log once per copy, the
// messages' uuids marked with the copy. It fails when the log and the events
// do not pair up.
func WithRequests(events []turn.Event, log RequestLog) ([]turn.Event, error) {
	var main []int
	for i := range events {
		if events[i].Agent() == turn.MainAgent {
			main = append(main, i)
		}
	}
	n := len(log.Requests)
	if n == 0 || len(main)%n != 0 {
		return nil, fmt.Errorf("replay: the transcript records %d requests for %d main-agent rounds", n, len(main))
	}
	out := slices.Clone(events)
	sent := ""
	for k, i := range main {
		req := log.Requests[k%n]
		if k >= n {
			msgs := slices.Clone(req.New)
			for j := range msgs {
				msgs[j].UUID += fmt.Sprintf("-%d", k/n)
			}
			req.New = msgs
		}
		ev := &out[i]
		if req.Model != "" && ev.Model != "" && req.Model != ev.Model {
			return nil, fmt.Errorf("replay: request %d is for model %s, its round for %s", k+1, req.Model, ev.Model)
		}
		if len(req.New) > 0 {
			ev.InputMessages = req.New
		}
		hash := PrefixHash(req.System, req.Tools)
		ev.RequestPrefix = &turn.RequestPrefix{Hash: hash}
		if hash != sent {
			ev.RequestPrefix.System, ev.RequestPrefix.Tools = req.System, req.Tools
			sent = hash
		}
		ev.Schema = turn.SchemaV1_1
	}
	return out, nil
}

// PrefixHash is the hash replay gives a request's system prompt and tools.
func PrefixHash(system, tools json.RawMessage) string {
	h := sha256.New()
	h.Write(system)
	h.Write([]byte{0})
	h.Write(tools)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// Measured is one round of a measurement: the input side the response
// reported, Mnemos's preflight count before the round, and Claude Code's
// heuristic on the same call (see Heuristic).
type Measured struct {
	Session   string
	Seq       int64
	Actual    int64
	Predicted int64
	Heuristic int64
}

// ErrorPercent is |predicted − actual| as a percentage of actual.
func ErrorPercent(predicted, actual int64) float64 {
	if actual <= 0 {
		return 0
	}
	return 100 * math.Abs(float64(predicted-actual)) / float64(actual)
}

// Summary is the error distribution of a measurement, in percent of the actual.
type Summary struct {
	N             int
	P50, P95, Max float64
}

// Summarize is the nearest-rank p50, p95 and max of errs.
func Summarize(errs []float64) Summary {
	if len(errs) == 0 {
		return Summary{}
	}
	s := slices.Clone(errs)
	slices.Sort(s)
	rank := func(p float64) float64 {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	return Summary{N: len(s), P50: rank(50), P95: rank(95), Max: s[len(s)-1]}
}

// Summaries are the distributions of Mnemos's errors and the heuristic's.
func Summaries(rounds []Measured) (mnemos, heuristic Summary) {
	var a, b []float64
	for _, r := range rounds {
		a = append(a, ErrorPercent(r.Predicted, r.Actual))
		b = append(b, ErrorPercent(r.Heuristic, r.Actual))
	}
	return Summarize(a), Summarize(b)
}

// Heuristic is Claude Code's own estimate of a request, as replay
// implements it: the last response's usage (input, cache creation, cache
// read and output) plus the new messages at 4 bytes per token; before any
// usage, and after the client's compaction, the messages so far at 4 bytes
// per token. It counts no system prompt or tools. A message's bytes are its
// text and thinking, a tool call's name and input, a tool result's text;
// an image or document counts tokens.MediaTokens.
type Heuristic struct {
	last     int64
	hasUsage bool
	pending  int64
}

// Predict is the heuristic's count for a request adding msgs.
func (h *Heuristic) Predict(ev turn.Event) int64 {
	if ev.ClientCompaction != nil {
		*h = Heuristic{}
	}
	for _, m := range ev.InputMessages {
		h.pending += HeuristicTokens(m.Content)
	}
	if h.hasUsage {
		return h.last + h.pending
	}
	return h.pending
}

// Observe takes a response's usage as the new base.
func (h *Heuristic) Observe(u turn.Usage) {
	h.last, h.hasUsage, h.pending = u.Total(), true, 0
}

// HeuristicTokens is content at 4 bytes per token, rounded up.
func HeuristicTokens(c turn.Content) int64 {
	var bytes, media int64
	for _, b := range c {
		switch b.Type {
		case turn.BlockImage, turn.BlockDocument:
			media += tokens.MediaTokens
		case turn.BlockToolResult:
			if b.Content != nil {
				for _, inner := range *b.Content {
					if inner.Type == turn.BlockImage || inner.Type == turn.BlockDocument {
						media += tokens.MediaTokens
						continue
					}
					bytes += int64(len(inner.Text))
				}
			}
		default:
			bytes += int64(len(b.Text) + len(b.Thinking) + len(b.Name) + len(b.Input))
		}
	}
	return (bytes+3)/4 + media
}

// MeasureOptions say where to measure and how long to wait for the accountant.
type MeasureOptions struct {
	SendOptions
	// ApplyWait bounds the wait for the accountant to apply one event; 0 means 30 s.
	ApplyWait time.Duration
}

// Measure replays events round by round on a running Mnemos: before each
// event with usage it asks POST /v1/sessions/{id}/preflight with the event's
// input messages, model, request prefix and client compaction; it then sends
// the event and waits until the accountant applied it, so the next preflight
// counts on it. It returns one Measured per event with usage.
func Measure(ctx context.Context, events []turn.Event, opts MeasureOptions) ([]Measured, error) {
	if opts.URL == "" || opts.APIKey == "" {
		return nil, errors.New("replay: measure: a server URL and an API key are required")
	}
	hc := opts.Client
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	wait := opts.ApplyWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	mn := client.New(opts.URL, opts.APIKey, client.WithHTTPClient(hc))
	s := newSender(opts.SendOptions, mn)
	heuristics := map[string]*Heuristic{}
	var out []Measured
	for i := range events {
		ev := &events[i]
		h := heuristics[ev.SessionID]
		if h == nil {
			h = &Heuristic{}
			heuristics[ev.SessionID] = h
		}
		heuristic := h.Predict(*ev)
		p, err := mn.Preflight(ctx, ev.SessionID, api.PreflightRequest{
			InputMessages: ev.InputMessages, Model: ev.Model,
			ContextWindow: ev.ContextWindow, MaxOutputTokens: ev.MaxOutputTokens,
			RequestPrefix: ev.RequestPrefix, ClientCompaction: ev.ClientCompaction,
		})
		if err != nil {
			return out, fmt.Errorf("replay: preflight of session %s seq %d: %w", ev.SessionID, ev.Seq, err)
		}
		if _, _, err := s.send(ctx, ev); err != nil {
			return out, err
		}
		if err := awaitApplied(ctx, mn, ev.SessionID, ev.Seq, wait); err != nil {
			return out, err
		}
		if ev.Usage == nil {
			continue
		}
		h.Observe(*ev.Usage)
		out = append(out, Measured{Session: ev.SessionID, Seq: ev.Seq, Actual: ev.Usage.InputSide(), Predicted: p.Count, Heuristic: heuristic})
	}
	return out, nil
}

// awaitApplied polls the session until the accountant applied seq.
func awaitApplied(ctx context.Context, mn *client.Client, session string, seq int64, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		s, err := mn.GetSession(ctx, session)
		if err == nil && s.AppliedSeq >= seq {
			return nil
		}
		if err != nil && !client.IsNotFound(err) {
			return fmt.Errorf("replay: read session %s: %w", session, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replay: session %s: seq %d not applied within %s", session, seq, wait)
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// PrintMeasured writes each round and the summary beside the heuristic's.
func PrintMeasured(w io.Writer, name string, rounds []Measured) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%-28s %5s %10s %10s %8s %10s %8s\n", "session", "seq", "actual", "mnemos", "err%", "heuristic", "err%")
	for _, r := range rounds {
		fmt.Fprintf(bw, "%-28s %5d %10d %10d %8.2f %10d %8.2f\n", short(r.Session), r.Seq, r.Actual,
			r.Predicted, ErrorPercent(r.Predicted, r.Actual), r.Heuristic, ErrorPercent(r.Heuristic, r.Actual))
	}
	m, h := Summaries(rounds)
	fmt.Fprintf(bw, "%s: n=%d  mnemos p50 %.2f%% p95 %.2f%% max %.2f%%  |  heuristic p50 %.2f%% p95 %.2f%% max %.2f%%\n",
		name, m.N, m.P50, m.P95, m.Max, h.P50, h.P95, h.Max)
	return bw.Flush()
}

func short(s string) string {
	if len(s) > 28 {
		return s[:27] + "…"
	}
	return s
}
