// Package responses is a scripted OpenAI Responses API for tests that run
// real clients (the Codex CLI, the openai-go SDK) offline. It serves
// POST /v1/responses, as JSON or as the API's server-sent events, and
// GET /v1/models; it answers each call as its script says, with usage that
// follows a model of OpenAI's automatic prompt caching (see Cache), and
// records every call it receives.
//
// A test starts one with Start and points the client at its URL (which
// ends in /v1, as OpenAI clients expect a base URL to):
//
//	up := responses.Start(t, responses.Config{Script: func(r *responses.Request) (responses.Reply, error) {
//		return responses.Say(responses.Text("done")), nil
//	}})
package responses

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// Script answers one call; an error is answered 500 server_error. The
// upstream calls it one call at a time.
type Script func(*Request) (Reply, error)

// Config is how an Upstream answers.
type Config struct {
	Script Script
	// ContextWindow, when positive, refuses a call whose prompt is larger
	// (400 context_length_exceeded), as the API does, without calling the
	// script.
	ContextWindow int64
	// IDPrefix, when set, begins the number in the ids of the items
	// answered (call_<IDPrefix>3_0 for the first item of the third call):
	// upstreams that take turns answering one conversation then hand out
	// ids of their own, as the API's are unique.
	IDPrefix string
}

// Upstream is the scripted API, an http.Handler.
type Upstream struct {
	// URL is the base URL to point clients at, ending in /v1; set by Start.
	URL string

	cfg   Config
	mu    sync.Mutex
	cache Cache
	calls []Call
	// items are the items read so far, by their bytes' digest.
	items map[[sha256.Size]byte]Item
}

// Call is the record of one call the upstream received.
type Call struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	// Request is the parsed body (nil when it could not be parsed).
	Request *Request
	// Status is the HTTP status answered; Usage the usage answered.
	Status int
	Usage  Usage
}

// TB is what Start needs of a test or benchmark.
type TB interface {
	Helper()
	Cleanup(func())
}

// New is an Upstream that answers as cfg says, for a server of the
// caller's own.
func New(cfg Config) *Upstream { return &Upstream{cfg: cfg} }

// Start serves an Upstream until the test ends.
func Start(t TB, cfg Config) *Upstream {
	t.Helper()
	u := New(cfg)
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	u.URL = srv.URL + "/v1"
	return u
}

// Calls is every call received so far, in order.
func (u *Upstream) Calls() []Call {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.calls)
}

// Usage is the sum of the usage answered.
func (u *Upstream) Usage() Usage {
	var sum Usage
	for _, c := range u.Calls() {
		sum.Input += c.Usage.Input
		sum.Cached += c.Usage.Cached
		sum.Output += c.Usage.Output
	}
	return sum
}

// ServeHTTP answers one call.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	call := Call{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	u.mu.Lock()
	defer u.mu.Unlock()
	defer func() { u.calls = append(u.calls, call) }()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		call.Status = http.StatusOK
		writeJSON(w, call.Status, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "gpt-5", "object": "model", "owned_by": "openai"},
		}})
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/responses":
		call.Status = http.StatusNotFound
		apiError(w, call.Status, "invalid_request_error", "", "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if u.items == nil {
		u.items = map[[sha256.Size]byte]Item{}
	}
	req, err := decodeRequest(body, r.Header, u.items)
	if err != nil {
		call.Status = http.StatusBadRequest
		apiError(w, call.Status, "invalid_request_error", "", err.Error())
		return
	}
	call.Request = req
	prompt := Measure(req)
	if u.cfg.ContextWindow > 0 && prompt.Total() > u.cfg.ContextWindow {
		call.Status = http.StatusBadRequest
		apiError(w, call.Status, "invalid_request_error", "context_length_exceeded",
			fmt.Sprintf("Your input exceeds the context window of this model: %d tokens, more than %d.", prompt.Total(), u.cfg.ContextWindow))
		return
	}
	reply, err := u.cfg.Script(req)
	if err != nil {
		call.Status = http.StatusInternalServerError
		apiError(w, call.Status, "server_error", "", err.Error())
		return
	}
	call.Usage = u.cache.Use(prompt)
	call.Usage.Output = reply.outputTokens()
	call.Status = http.StatusOK
	out := reply.items(fmt.Sprintf("%s%d", u.cfg.IDPrefix, len(u.calls)+1))
	resp := map[string]any{
		"id": fmt.Sprintf("resp_%d", len(u.calls)+1), "object": "response", "created_at": time.Now().Unix(),
		"status": "completed", "model": req.Model, "output": out, "usage": call.Usage.wire(),
	}
	if !req.Stream {
		writeJSON(w, call.Status, resp)
		return
	}
	stream(w, resp, out)
}

// stream writes resp as the API's server-sent events: created, each
// output item added and done (a message's text as one delta between),
// completed with the usage.
func stream(w http.ResponseWriter, resp map[string]any, out []map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	seq := 0
	event := func(typ string, v map[string]any) {
		v["type"], v["sequence_number"] = typ, seq
		seq++
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, marshal(v))
	}
	started := map[string]any{}
	for k, v := range resp {
		started[k] = v
	}
	started["status"], started["output"] = "in_progress", []any{}
	delete(started, "usage")
	event("response.created", map[string]any{"response": started})
	for i, item := range out {
		event("response.output_item.added", map[string]any{"output_index": i, "item": item})
		if item["type"] == "message" {
			text := item["content"].([]map[string]any)[0]["text"]
			event("response.output_text.delta", map[string]any{"output_index": i, "content_index": 0, "item_id": item["id"], "delta": text})
		}
		event("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	event("response.completed", map[string]any{"response": resp})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(marshal(v))
}

func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // the upstream's own maps: always encodable
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// apiError answers in OpenAI's error shape.
func apiError(w http.ResponseWriter, status int, typ, code, msg string) {
	e := map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}
	if code != "" {
		e["code"] = code
	}
	writeJSON(w, status, map[string]any{"error": e})
}

// textOf joins the text parts of a content list (or a content string).
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "")
}
