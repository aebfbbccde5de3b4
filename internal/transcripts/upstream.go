package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// upstream is the scripted Anthropic Messages API the CLI talks to. It
// answers each call with the reply its player picks, streamed as the real
// API streams, with usage that follows a simple model of the prompt cache.
type upstream struct {
	logDir string

	mu     sync.Mutex
	player player
	cache  map[string]bool // prefix hashes written to the cache
	ids    *idSource
	calls  int
	errs   []string
}

// player picks the reply to one call of the current run.
type player interface {
	reply(req *request) (reply, error)
}

// reply is one scripted answer: its blocks in order and the stop reason
// ("" is tool_use when a block is a tool call, else end_turn).
type reply struct {
	blocks []block
	stop   string
}

// block is a text, thinking or tool_use content block of a reply.
type block struct {
	kind  string // "text", "thinking", "tool_use"
	text  string // text or thinking
	name  string // tool_use
	input any    // tool_use
}

func text(s string) block               { return block{kind: "text", text: s} }
func thinking(s string) block           { return block{kind: "thinking", text: s} }
func tool(name string, input any) block { return block{kind: "tool_use", name: name, input: input} }
func say(blocks ...block) reply         { return reply{blocks: blocks} }
func final(s string) reply              { return reply{blocks: []block{text(s)}} }
func sayThen(s string, calls ...block) reply {
	return reply{blocks: append([]block{text(s)}, calls...)}
}

// request is the part of a Messages API call the players and the cache
// model read.
type request struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	System   json.RawMessage   `json:"system"`
	Tools    []json.RawMessage `json:"tools"`
	Messages []message         `json:"messages"`
	Thinking *struct {
		Type string `json:"type"`
	} `json:"thinking"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// contentBlock is one block of a message's content.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// blocks reads a message's content: a string is one text block.
func (m message) blocks() []contentBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []contentBlock{{Type: "text", Text: s}}
	}
	var out []contentBlock
	_ = json.Unmarshal(m.Content, &out) // a content we cannot read has no blocks
	return out
}

// text is the message's text blocks, joined.
func (m message) text() string {
	var parts []string
	for _, b := range m.blocks() {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// isToolResult is whether a user message answers tool calls.
func (m message) isToolResult() bool {
	for _, b := range m.blocks() {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

// toolNames are the names of the tools the call offers.
func (r *request) toolNames() []string {
	var names []string
	for _, t := range r.Tools {
		var head struct{ Name string }
		if json.Unmarshal(t, &head) == nil {
			names = append(names, head.Name)
		}
	}
	return names
}

// round is how many answers the model has given since the last message the
// user typed: 0 for the first call of a user turn.
func (r *request) round() int {
	n := 0
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role == "user" && !m.isToolResult() {
			return n
		}
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

func newUpstream(logDir string) *upstream {
	return &upstream{logDir: logDir, cache: map[string]bool{}, ids: newIDSource(17)}
}

// play makes p answer the calls from now on.
func (u *upstream) play(p player) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.player = p
}

// failures returns and clears the errors seen since the last call.
func (u *upstream) failures() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	errs := u.errs
	u.errs = nil
	return errs
}

func (u *upstream) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	log.Print("upstream: " + msg)
	u.errs = append(u.errs, msg)
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls++
	u.logCall(r, body)
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		u.messages(w, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		u.countTokens(w, body)
	default:
		log.Printf("upstream: unknown call %q %q", r.Method, r.URL.String()) //nolint:gosec // quoted, and only the CLI under test calls
		apiError(w, http.StatusNotFound, "not_found_error", "Not found: "+r.URL.Path)
	}
}

// logCall keeps every call's headers and body beside the run, for whoever
// has to change a script.
func (u *upstream) logCall(r *http.Request, body []byte) {
	if u.logDir == "" {
		return
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%s %s\n", r.Method, r.URL)
	for k, v := range r.Header {
		if strings.EqualFold(k, "x-api-key") || strings.EqualFold(k, "authorization") {
			v = []string{"(dummy)"}
		}
		fmt.Fprintf(&buf, "%s: %s\n", k, strings.Join(v, ", "))
	}
	buf.WriteString("\n")
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "", "  ") == nil {
		buf.Write(pretty.Bytes())
	} else {
		buf.Write(body)
	}
	name := filepath.Join(u.logDir, fmt.Sprintf("call-%03d.txt", u.calls))
	if err := os.WriteFile(name, buf.Bytes(), 0o600); err != nil {
		log.Printf("upstream: %v", err)
	}
}

func (u *upstream) countTokens(w http.ResponseWriter, body []byte) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"input_tokens": u.prompt(&req).total()})
}

func (u *upstream) messages(w http.ResponseWriter, body []byte) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	if u.player == nil {
		u.fail("a call with no run playing")
		apiError(w, http.StatusInternalServerError, "api_error", "no script is playing")
		return
	}
	rep, err := u.player.reply(&req)
	if err != nil {
		u.fail("call %d: %v", u.calls, err)
		apiError(w, http.StatusInternalServerError, "api_error", err.Error())
		return
	}
	p := u.prompt(&req)
	usage := u.cacheUsage(&req, p)
	msgID := "msg_01" + u.ids.next(22)
	content := make([]map[string]any, 0, len(rep.blocks))
	stop := "end_turn"
	for _, b := range rep.blocks {
		switch b.kind {
		case "text":
			content = append(content, map[string]any{"type": "text", "text": b.text})
		case "thinking":
			if req.Thinking == nil || req.Thinking.Type == "disabled" {
				continue // thinking only when the call asks for it
			}
			content = append(content, map[string]any{"type": "thinking", "thinking": b.text, "signature": u.signature(b.text)})
		case "tool_use":
			content = append(content, map[string]any{"type": "tool_use", "id": "toolu_01" + u.ids.next(22), "name": b.name, "input": b.input})
			stop = "tool_use"
		}
	}
	if rep.stop != "" {
		stop = rep.stop
	}
	out := int64(0)
	for _, c := range content {
		data, _ := json.Marshal(c) // maps of strings and decoded JSON always encode
		out += int64(len(data)) / 4
	}
	usage.Output = max(out, 1)
	w.Header().Set("Request-Id", "req_011C"+u.ids.next(20))
	if !req.Stream {
		writeJSON(w, http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage.json(usage.Output),
		})
		return
	}
	stream(w, msgID, req.Model, content, stop, usage)
}

// signature stands for the signature the API puts on a thinking block.
func (u *upstream) signature(s string) string {
	sum := sha256.Sum256([]byte("scripted thinking:" + s))
	return "Eu" + hex.EncodeToString(sum[:])
}

// stream writes the answer as the API's server-sent events: message_start
// with the input side of the usage and output_tokens 1, each block's start,
// deltas and stop, then message_delta with the stop reason and the final
// usage, and message_stop.
func stream(w http.ResponseWriter, msgID, model string, content []map[string]any, stop string, usage usage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(event string, data any) {
		payload, _ := json.Marshal(data) // maps of strings and decoded JSON always encode
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, payload)
		if flusher != nil {
			flusher.Flush()
		}
		time.Sleep(15 * time.Millisecond) // a model takes its time; records get distinct timestamps
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage.json(1),
	}})
	send("ping", map[string]any{"type": "ping"})
	for i, c := range content {
		switch c["type"] {
		case "text":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			for _, part := range chunks(c["text"].(string), 60) {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "text_delta", "text": part}})
			}
		case "thinking":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			for _, part := range chunks(c["thinking"].(string), 60) {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "thinking_delta", "thinking": part}})
			}
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "signature_delta", "signature": c["signature"]}})
		case "tool_use":
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			input, _ := json.Marshal(c["input"]) // decoded JSON always encodes
			for _, part := range chunks(string(input), 40) {
				send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": usage.json(usage.Output)})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// chunks splits s into pieces of about n bytes, on rune boundaries.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut < len(s) && (s[cut]&0xC0) == 0x80 {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" || out == nil {
		out = append(out, s)
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}
