// Package upstream is a scripted Anthropic Messages API for tests and tools
// that run real clients (the Claude Code CLI, the Anthropic SDK) offline. It
// serves POST /v1/messages, as JSON or as the API's server-sent events, and
// POST /v1/messages/count_tokens; it answers each call as its script says,
// with usage that follows a model of the prompt cache (see Cache), and
// records every call it receives.
//
// A test starts one with Start and points the client at its URL:
//
//	up := upstream.Start(t, upstream.Config{Script: func(r *upstream.Request) (upstream.Reply, error) {
//		return upstream.Final("done"), nil
//	}})
package upstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/httpbody"
)

// Script answers one call. An error is answered as a 500 api_error and
// kept in the call's record (Call.Err). The upstream calls it one call at a
// time.
type Script func(*Request) (Reply, error)

// Config is how an Upstream answers.
type Config struct {
	Script Script
	// ContextWindow, when positive, refuses a call whose prompt is larger
	// (400 invalid_request_error "prompt is too long"), as the API does,
	// without calling the script.
	ContextWindow int64
	// MinCacheTokens is the shortest prefix the cache keeps (see
	// SonnetMinCacheTokens); 0 keeps any.
	MinCacheTokens int64
	// Seed makes the ids of messages, tool calls and requests; the same
	// seed and calls give the same ids.
	Seed uint64
	// EventDelay is a pause after each streamed event, as a model takes
	// its time.
	EventDelay time.Duration
	// Latency is a pause before each answer of the Messages API, streamed
	// or not, as a model thinks before it writes.
	Latency time.Duration
}

// Upstream is the scripted API, an http.Handler.
type Upstream struct {
	// URL is the base URL to point clients at, set by Start.
	URL string

	cfg Config

	mu    sync.Mutex
	cache Cache
	ids   *rand.Rand
	calls []Call
}

// Call is the record of one call the upstream received.
type Call struct {
	Method string
	// Path and RawQuery are the URL's (the CLI adds ?beta=true).
	Path, RawQuery string
	Header         http.Header
	Body           []byte
	// Request is the parsed body (nil when it could not be parsed).
	Request *Request
	// Status is the HTTP status answered.
	Status int
	// Usage is the usage answered (count_tokens: InputTokens only).
	Usage Usage
	// Reply is what the script answered; Err its error.
	Reply Reply
	Err   error
}

// New is an upstream answering as cfg says.
func New(cfg Config) *Upstream {
	u := &Upstream{cfg: cfg, cache: Cache{MinTokens: cfg.MinCacheTokens}}
	u.ids = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)) //nolint:gosec // ids, not secrets
	return u
}

// TB is what Start needs of a test. testing.TB has it; naming it here
// keeps the testing package out of the binaries that serve an upstream
// with New (`mnemos bench`).
type TB interface {
	Helper()
	Cleanup(func())
}

// Start serves a new upstream on a local port until the test ends.
func Start(t TB, cfg Config) *Upstream {
	t.Helper()
	u := New(cfg)
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	u.URL = srv.URL
	return u
}

// SetScript makes script answer the calls from now on.
func (u *Upstream) SetScript(script Script) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cfg.Script = script
}

// Calls returns the calls received so far, oldest first.
func (u *Upstream) Calls() []Call {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.calls)
}

// Messages returns the answered and refused calls of POST /v1/messages,
// oldest first.
func (u *Upstream) Messages() []Call {
	var out []Call
	for _, c := range u.Calls() {
		if c.Path == pathMessages {
			out = append(out, c)
		}
	}
	return out
}

// Usage is the sum of the usage answered to every call of
// POST /v1/messages.
func (u *Upstream) Usage() Usage { return Sum(u.Messages()) }

const (
	pathMessages    = "/v1/messages"
	pathCountTokens = "/v1/messages/count_tokens" //nolint:gosec // a URL path, not a credential
)

func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := httpbody.Read(r.Body, r.ContentLength, math.MaxInt64)
	call := Call{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	if err != nil {
		call.Status = http.StatusBadRequest
		u.record(call)
		apiError(w, APIError{Status: call.Status, Type: "invalid_request_error", Message: err.Error()})
		return
	}
	if r.Method != http.MethodPost || (r.URL.Path != pathMessages && r.URL.Path != pathCountTokens) {
		call.Status = http.StatusNotFound
		u.record(call)
		apiError(w, APIError{Status: call.Status, Type: "not_found_error", Message: "Not found: " + r.URL.Path})
		return
	}
	req, err := decodeRequest(body)
	if err != nil {
		call.Status = http.StatusBadRequest
		u.record(call)
		apiError(w, APIError{Status: call.Status, Type: "invalid_request_error", Message: err.Error()})
		return
	}
	call.Request = &req
	if r.URL.Path == pathCountTokens {
		call.Status = http.StatusOK
		call.Usage.InputTokens = Measure(&req).Total()
		u.record(call)
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": call.Usage.InputTokens})
		return
	}
	u.messages(w, call)
}

func (u *Upstream) record(c Call) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, c)
}

// answer is a reply ready to send.
type answer struct {
	msgID, requestID string
	content          []map[string]any
	stop             string
}

func (u *Upstream) messages(w http.ResponseWriter, call Call) {
	a, failure := u.play(&call)
	if u.cfg.Latency > 0 {
		time.Sleep(u.cfg.Latency)
	}
	if failure != nil {
		apiError(w, *failure)
		return
	}
	w.Header().Set("Request-Id", a.requestID)
	if !call.Request.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": a.msgID, "type": "message", "role": "assistant", "model": call.Request.Model,
			"content": a.content, "stop_reason": a.stop, "stop_sequence": nil, "usage": wire(call.Usage, call.Usage.OutputTokens),
		})
		return
	}
	stream(w, a, call.Request.Model, call.Usage, u.cfg.EventDelay)
}

// play measures the call, asks the script and records the call, all under
// the lock, so the cache and the ids follow the order of the calls.
func (u *Upstream) play(call *Call) (answer, *APIError) {
	u.mu.Lock()
	defer u.mu.Unlock()
	defer func() { u.calls = append(u.calls, *call) }()
	req := call.Request
	p := Measure(req)
	if w := u.cfg.ContextWindow; w > 0 && p.Total() > w {
		call.Status = http.StatusBadRequest
		return answer{}, &APIError{Status: call.Status, Type: "invalid_request_error",
			Message: fmt.Sprintf("prompt is too long: %d tokens > %d maximum", p.Total(), w)}
	}
	if u.cfg.Script == nil {
		call.Err = fmt.Errorf("no script")
	} else {
		call.Reply, call.Err = u.cfg.Script(req)
	}
	if call.Err != nil {
		call.Status = http.StatusInternalServerError
		return answer{}, &APIError{Status: call.Status, Type: "api_error", Message: call.Err.Error()}
	}
	if e := call.Reply.Error; e != nil {
		call.Status = e.Status
		return answer{}, e
	}
	call.Status = http.StatusOK
	call.Usage = u.cache.Use(p)
	a := answer{msgID: "msg_01" + u.id(22), stop: "end_turn", content: []map[string]any{}}
	for _, b := range call.Reply.Blocks {
		switch b.Type {
		case "text":
			a.content = append(a.content, map[string]any{"type": "text", "text": b.Text})
		case "thinking":
			if req.Thinking == nil || req.Thinking.Type == "disabled" {
				continue // thinking only when the call asks for it
			}
			a.content = append(a.content, map[string]any{"type": "thinking", "thinking": b.Text, "signature": signature(b.Text)})
		case "tool_use":
			a.content = append(a.content, map[string]any{"type": "tool_use", "id": "toolu_01" + u.id(22), "name": b.Name, "input": b.Input})
			a.stop = "tool_use"
		}
	}
	if call.Reply.StopReason != "" {
		a.stop = call.Reply.StopReason
	}
	out := int64(0)
	for _, c := range a.content {
		data, _ := json.Marshal(c) // maps of strings and decoded JSON always encode
		out += int64(len(data)) / 4
	}
	call.Usage.OutputTokens = max(out, 1)
	a.requestID = "req_011C" + u.id(20)
	return a, nil
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// id is n random-looking characters from the seeded source.
func (u *Upstream) id(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = idAlphabet[u.ids.IntN(len(idAlphabet))]
	}
	return string(b)
}

// signature stands for the signature the API puts on a thinking block.
func signature(s string) string {
	sum := sha256.Sum256([]byte("scripted thinking:" + s))
	return "Eu" + hex.EncodeToString(sum[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(marshal(v)) // the client went away; nothing to do
}

// marshal encodes v as the API does, without escaping <, > and &. Maps of
// strings and decoded JSON always encode.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func apiError(w http.ResponseWriter, e APIError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.RetryAfter.Seconds()))))
	}
	w.Header().Set("Request-Id", "req_011Cerror")
	writeJSON(w, e.Status, map[string]any{"type": "error", "error": map[string]any{"type": e.Type, "message": e.Message}})
}
