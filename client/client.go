// Package client is a typed Go client of the Mnemos HTTP API, written on
// its OpenAPI document (api/openapi.yaml): one method per operation, named
// after its operationId, taking and returning the bodies' types of package
// api, which the server answers with too.
//
// A method returns the decoded answer of a success status, or an *Error
// for an error answer (the API's {"error": {"code", "message"}}), or the
// transport's error when no answer came. It does not retry: Error carries
// the status and Retry-After for the caller to decide.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Client calls one Mnemos server with one API key (which names the tenant).
type Client struct {
	base string
	key  string
	http *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends the requests through h (default: a client with a
// 60 s timeout).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// New returns a client of the server at baseURL ("http://localhost:8080")
// sending apiKey as its bearer token.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), key: apiKey, http: &http.Client{Timeout: 60 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Error is an error answer of the API.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the API's stable error code ("not_found", "too_large", …);
	// empty when the body was not an error body.
	Code string
	// Message says why (or holds the start of a body that was no error body).
	Message string
	// RetryAfter is the answer's Retry-After, or -1 when it had none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("mnemos: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
	}
	return fmt.Sprintf("mnemos: %d %s: %s", e.Status, e.Code, e.Message)
}

// AsError returns the *Error in err's chain.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// ErrBadAnswer is in the chain of the error of a success answer whose
// body does not decode as the document says.
var ErrBadAnswer = errors.New("the answer does not decode")

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool {
	e, ok := AsError(err)
	return ok && e.Status == http.StatusNotFound
}

// request is one call: what to send and what to accept.
type request struct {
	method string
	path   string // escaped
	query  url.Values
	header http.Header
	// body is sent as is, with contentType.
	body        []byte
	contentType string
	// ok are the success statuses; another status is an *Error.
	ok []int
}

// segment escapes one path segment.
func segment(s string) string { return url.PathEscape(s) }

func jsonBody(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("mnemos: encode the request: %w", err)
	}
	return buf.Bytes(), nil
}

// maxError bounds what is read of an error body.
const maxError = 64 << 10

// do sends r and returns the success answer's status, headers and body.
func (c *Client) do(ctx context.Context, r request) (int, http.Header, []byte, error) {
	resp, err := c.open(ctx, r)
	if err != nil {
		return 0, nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }() // read whole
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("mnemos: %s %s: read the answer: %w", r.method, r.path, err)
	}
	return resp.StatusCode, resp.Header, data, nil
}

// open sends r and returns a success answer with its body unread, for the
// caller to read and close; another status is an *Error.
func (c *Client) open(ctx context.Context, r request) (*http.Response, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("mnemos: %s %s: %w", r.method, r.path, err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.body != nil {
		req.Header.Set("Content-Type", r.contentType)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("mnemos: %s %s: %w", r.method, r.path, err)
	}
	if slices.Contains(r.ok, resp.StatusCode) {
		return resp, nil
	}
	defer func() { _ = resp.Body.Close() }() // given up on
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxError))
	if err != nil {
		return nil, fmt.Errorf("mnemos: %s %s: read the %d answer: %w", r.method, r.path, resp.StatusCode, err)
	}
	return nil, errorOf(resp, data)
}

// errorOf makes the *Error of an error answer.
func errorOf(resp *http.Response, data []byte) *Error {
	e := &Error{Status: resp.StatusCode, RetryAfter: -1}
	if v := strings.TrimSpace(resp.Header.Get("Retry-After")); v != "" {
		if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	var body api.ErrorBody
	if json.Unmarshal(data, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		return e
	}
	e.Message = strings.TrimSpace(string(data))
	if len(e.Message) > 2000 {
		e.Message = e.Message[:2000] + "…"
	}
	if e.Message == "" {
		e.Message = "(empty body)"
	}
	return e
}

// call sends r and decodes the JSON answer into out.
func (c *Client) call(ctx context.Context, r request, out any) (int, http.Header, error) {
	status, h, data, err := c.do(ctx, r)
	if err != nil {
		return 0, nil, err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return 0, nil, fmt.Errorf("mnemos: %s %s: %w (%d): %w", r.method, r.path, ErrBadAnswer, status, err)
	}
	return status, h, nil
}

func get(path string, ok ...int) request {
	if len(ok) == 0 {
		ok = []int{http.StatusOK}
	}
	return request{method: http.MethodGet, path: path, ok: ok}
}

func send(method, path string, body any, ok ...int) (request, error) {
	r := request{method: method, path: path, ok: ok}
	if body != nil {
		b, err := jsonBody(body)
		if err != nil {
			return r, err
		}
		r.body, r.contentType = b, "application/json"
	}
	return r, nil
}

// PostTurn ingests one turn event (POST /v1/turns).
func (c *Client) PostTurn(ctx context.Context, ev turn.Event) (api.TurnAccepted, error) {
	body, err := turn.Marshal(ev) // raw tool inputs reach the server byte for byte
	if err != nil {
		return api.TurnAccepted{}, fmt.Errorf("mnemos: encode event %s: %w", ev.EventID, err)
	}
	return c.PostTurnJSON(ctx, body)
}

// PostTurnJSON ingests one turn event already encoded.
func (c *Client) PostTurnJSON(ctx context.Context, event []byte) (api.TurnAccepted, error) {
	var out api.TurnAccepted
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/turns", body: event, contentType: "application/json", ok: []int{http.StatusAccepted}}, &out)
	return out, err
}

// GetSession reads a session's token state.
func (c *Client) GetSession(ctx context.Context, id string) (api.Session, error) {
	var out api.Session
	_, _, err := c.call(ctx, get("/v1/sessions/"+segment(id)), &out)
	return out, err
}

// DeleteSession erases the session, every row of it, and returns what the
// erasure removed; a session of which nothing exists is an *Error of status 404.
func (c *Client) DeleteSession(ctx context.Context, id string) (api.Erasure, error) {
	var out api.Erasure
	r := request{method: http.MethodDelete, path: "/v1/sessions/" + segment(id), ok: []int{http.StatusOK}}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// DeleteScope erases the memory scope ("project:repo-x"), every row of it,
// and returns what the erasure removed.
func (c *Client) DeleteScope(ctx context.Context, scope string) (api.Erasure, error) {
	var out api.Erasure
	r := request{method: http.MethodDelete, path: "/v1/scopes/" + segment(scope), ok: []int{http.StatusOK}}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// ListSessions reads a page of the tenant's sessions, newest first.
func (c *Client) ListSessions(ctx context.Context, opts ListOptions) (api.SessionList, error) {
	var out api.SessionList
	r := get("/v1/sessions")
	r.query = opts.query()
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// ListScopes reads a page of the scopes that hold the tenant's memories.
func (c *Client) ListScopes(ctx context.Context, opts ListOptions) (api.ScopeList, error) {
	var out api.ScopeList
	r := get("/v1/scopes")
	r.query = opts.query()
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// GetUsage reads the tenant's model usage and its cost by UTC day and
// service, from and to being YYYY-MM-DD days ("" for the server's defaults:
// the last 30 days), with today's spending against the daily budgets.
func (c *Client) GetUsage(ctx context.Context, from, to string) (api.TenantUsage, error) {
	var out api.TenantUsage
	r := get("/v1/usage")
	r.query = url.Values{}
	if from != "" {
		r.query.Set("from", from)
	}
	if to != "" {
		r.query.Set("to", to)
	}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// PatchSession sets a session's switches and returns the session.
func (c *Client) PatchSession(ctx context.Context, id string, patch api.SessionPatch) (api.Session, error) {
	var out api.Session
	r, err := send(http.MethodPatch, "/v1/sessions/"+segment(id), patch, http.StatusOK)
	if err != nil {
		return out, err
	}
	_, _, err = c.call(ctx, r, &out)
	return out, err
}

// GetPins reads the texts pinned to a session.
func (c *Client) GetPins(ctx context.Context, id string) (api.Pins, error) {
	var out api.Pins
	_, _, err := c.call(ctx, get("/v1/sessions/"+segment(id)+"/pins"), &out)
	return out, err
}

// PutPins replaces the texts pinned to a session.
func (c *Client) PutPins(ctx context.Context, id string, pins []string) (api.Pins, error) {
	var out api.Pins
	r, err := send(http.MethodPut, "/v1/sessions/"+segment(id)+"/pins", api.PinsRequest{Pins: pins}, http.StatusOK)
	if err != nil {
		return out, err
	}
	_, _, err = c.call(ctx, r, &out)
	return out, err
}

// Preflight counts the session as it would be with req's messages added.
func (c *Client) Preflight(ctx context.Context, id string, req api.PreflightRequest) (api.Preflight, error) {
	var out api.Preflight
	r, err := send(http.MethodPost, "/v1/sessions/"+segment(id)+"/preflight", req, http.StatusOK)
	if err != nil {
		return out, err
	}
	_, _, err = c.call(ctx, r, &out)
	return out, err
}

// GetToolResult reads an offloaded tool result, whole.
func (c *Client) GetToolResult(ctx context.Context, id string) (api.ToolResult, error) {
	var out api.ToolResult
	_, _, err := c.call(ctx, get("/v1/tool-results/"+segment(id)), &out)
	return out, err
}

// ContextOptions tune GetContext.
type ContextOptions struct {
	// Wait bounds the wait at the blocking limit ("30s", "0"); "" is the
	// server's default.
	Wait string
}

// GetContext reads what to send the model next.
func (c *Client) GetContext(ctx context.Context, id string, opts ContextOptions) (api.Context, error) {
	var out api.Context
	r := get("/v1/sessions/" + segment(id) + "/context")
	if opts.Wait != "" {
		r.query = url.Values{"wait": {opts.Wait}}
	}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// PostContext reads what to send the model next after the
// context-management edits of management ({"edits": [...]}, Anthropic's
// shape), which Mnemos records so the next request makes the same cut.
func (c *Client) PostContext(ctx context.Context, id string, management any, opts ContextOptions) (api.Context, error) {
	var out api.Context
	edits, err := json.Marshal(management)
	if err != nil {
		return out, fmt.Errorf("mnemos: encode the context management: %w", err)
	}
	r, err := send(http.MethodPost, "/v1/sessions/"+segment(id)+"/context", api.ContextRequest{ContextManagement: edits}, http.StatusOK)
	if err != nil {
		return out, err
	}
	if opts.Wait != "" {
		r.query = url.Values{"wait": {opts.Wait}}
	}
	_, _, err = c.call(ctx, r, &out)
	return out, err
}

// Compact requests a manual compaction: the compaction when it ended in
// time, else as it stands (see Compaction.Ended).
func (c *Client) Compact(ctx context.Context, id string, req api.CompactRequest) (api.Compaction, error) {
	var out api.Compaction
	r, err := send(http.MethodPost, "/v1/sessions/"+segment(id)+"/compact", req, http.StatusOK, http.StatusAccepted)
	if err != nil {
		return out, err
	}
	_, _, err = c.call(ctx, r, &out)
	return out, err
}

// ListCompactions lists a session's compactions, oldest first, without summaries.
func (c *Client) ListCompactions(ctx context.Context, id string) (api.CompactionList, error) {
	var out api.CompactionList
	_, _, err := c.call(ctx, get("/v1/sessions/"+segment(id)+"/compactions"), &out)
	return out, err
}

// GetCompaction reads one compaction.
func (c *Client) GetCompaction(ctx context.Context, id string) (api.Compaction, error) {
	var out api.Compaction
	_, _, err := c.call(ctx, get("/v1/compactions/"+segment(id)), &out)
	return out, err
}

// GetNotes reads a session's notes.
func (c *Client) GetNotes(ctx context.Context, id string) (api.Notes, error) {
	var out api.Notes
	_, _, err := c.call(ctx, get("/v1/sessions/"+segment(id)+"/notes"), &out)
	return out, err
}

// GetSessionUsage reads what a session's proxied rounds cost, through
// Mnemos and straight, over its threads and by thread.
func (c *Client) GetSessionUsage(ctx context.Context, id string) (api.SessionUsage, error) {
	var out api.SessionUsage
	_, _, err := c.call(ctx, get("/v1/sessions/"+segment(id)+"/usage"), &out)
	return out, err
}

// GetNotesMarkdown reads a session's notes document alone.
func (c *Client) GetNotesMarkdown(ctx context.Context, id string) (string, error) {
	r := get("/v1/sessions/" + segment(id) + "/notes")
	r.header = http.Header{"Accept": {"text/markdown"}}
	_, _, data, err := c.do(ctx, r)
	return string(data), err
}

// Recall selects the memories that bear on req's query and records them
// as shown to the session.
func (c *Client) Recall(ctx context.Context, id string, req api.RecallRequest) (api.Recall, error) {
	var out api.Recall
	r, err := send(http.MethodPost, "/v1/sessions/"+segment(id)+"/recall", req, http.StatusOK)
	if err != nil {
		return out, err
	}
	_, _, err = c.call(ctx, r, &out)
	return out, err
}

// WriteOptions are the headers of a memory change.
type WriteOptions struct {
	// SessionID makes the change the agent's of that session.
	SessionID string
	// Reason says why (at most 1,000 bytes).
	Reason string
	// SourceTurns are the event ids the change comes from (at most 20).
	SourceTurns []string
	// IfMatch writes only over this revision (0: any).
	IfMatch int64
	// IfNoneMatch only creates.
	IfNoneMatch bool
}

func (o WriteOptions) header() http.Header {
	h := http.Header{}
	if o.SessionID != "" {
		h.Set("Mnemos-Session-Id", o.SessionID)
	}
	if o.Reason != "" {
		h.Set("Mnemos-Reason", o.Reason)
	}
	if len(o.SourceTurns) > 0 {
		h.Set("Mnemos-Source-Turns", strings.Join(o.SourceTurns, ","))
	}
	if o.IfMatch > 0 {
		h.Set("If-Match", `"`+strconv.FormatInt(o.IfMatch, 10)+`"`)
	}
	if o.IfNoneMatch {
		h.Set("If-None-Match", "*")
	}
	return h
}

func memoryPath(scope, name string) string {
	return "/v1/scopes/" + segment(scope) + "/memories/" + segment(name)
}

// ListMemories lists a scope's memories, most recently updated first,
// without bodies; deleted ones too when deleted is set.
func (c *Client) ListMemories(ctx context.Context, scope string, deleted bool) (api.MemoryList, error) {
	var out api.MemoryList
	r := get("/v1/scopes/" + segment(scope) + "/memories")
	if deleted {
		r.query = url.Values{"deleted": {"true"}}
	}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// GetMemory reads one memory with its markdown.
func (c *Client) GetMemory(ctx context.Context, scope, name string) (api.Memory, error) {
	var out api.Memory
	_, _, err := c.call(ctx, get(memoryPath(scope, name)), &out)
	return out, err
}

// GetMemoryMarkdown reads one memory's document.
func (c *Client) GetMemoryMarkdown(ctx context.Context, scope, name string) (string, error) {
	r := get(memoryPath(scope, name))
	r.header = http.Header{"Accept": {"text/markdown"}}
	_, _, data, err := c.do(ctx, r)
	return string(data), err
}

// PutMemory creates or replaces a memory from its markdown with
// frontmatter; the answer's Op says what it did.
func (c *Client) PutMemory(ctx context.Context, scope, name, markdown string, opts WriteOptions) (api.Memory, error) {
	var out api.Memory
	r := request{method: http.MethodPut, path: memoryPath(scope, name), header: opts.header(),
		body: []byte(markdown), contentType: "text/markdown", ok: []int{http.StatusOK, http.StatusCreated}}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// DeleteMemory deletes a memory softly (restorable).
func (c *Client) DeleteMemory(ctx context.Context, scope, name string, opts WriteOptions) (api.Memory, error) {
	var out api.Memory
	r := request{method: http.MethodDelete, path: memoryPath(scope, name), header: opts.header(), ok: []int{http.StatusOK}}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// ListRevisions lists every revision of a memory.
func (c *Client) ListRevisions(ctx context.Context, scope, name string) (api.RevisionList, error) {
	var out api.RevisionList
	_, _, err := c.call(ctx, get(memoryPath(scope, name)+"/revisions"), &out)
	return out, err
}

func revisionPath(scope, name string, rev int64) string {
	return memoryPath(scope, name) + "/revisions/" + strconv.FormatInt(rev, 10)
}

// GetRevision reads one revision with its markdown.
func (c *Client) GetRevision(ctx context.Context, scope, name string, rev int64) (api.Revision, error) {
	var out api.Revision
	_, _, err := c.call(ctx, get(revisionPath(scope, name, rev)), &out)
	return out, err
}

// RestoreRevision rolls a memory back to revision rev (a new revision).
func (c *Client) RestoreRevision(ctx context.Context, scope, name string, rev int64, opts WriteOptions) (api.Memory, error) {
	var out api.Memory
	r := request{method: http.MethodPost, path: revisionPath(scope, name, rev) + "/restore", header: opts.header(), ok: []int{http.StatusOK}}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// DiffRevisions diffs revision from to revision to; 0 takes the default
// (to: the latest, from: the one before to).
func (c *Client) DiffRevisions(ctx context.Context, scope, name string, from, to int64) (api.Diff, error) {
	var out api.Diff
	r := get(memoryPath(scope, name) + "/diff")
	q := url.Values{}
	if from > 0 {
		q.Set("from", strconv.FormatInt(from, 10))
	}
	if to > 0 {
		q.Set("to", strconv.FormatInt(to, 10))
	}
	r.query = q
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// GetIndex reads a scope's MEMORY.md and what a context loads of it.
func (c *Client) GetIndex(ctx context.Context, scope string) (api.Index, error) {
	var out api.Index
	_, _, err := c.call(ctx, get("/v1/scopes/"+segment(scope)+"/index"), &out)
	return out, err
}

// PutIndex replaces a scope's index (opts.IfMatch takes its revision).
func (c *Client) PutIndex(ctx context.Context, scope, content string, opts WriteOptions) (api.Index, error) {
	var out api.Index
	r := request{method: http.MethodPut, path: "/v1/scopes/" + segment(scope) + "/index", header: opts.header(),
		body: []byte(content), contentType: "text/markdown", ok: []int{http.StatusOK}}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// ExportScope reads a scope as a gzipped tar of memory/MEMORY.md and
// memory/<name>.md (read with pkg/memory/archive, or tar xzf).
func (c *Client) ExportScope(ctx context.Context, scope string) ([]byte, error) {
	_, _, data, err := c.do(ctx, get("/v1/scopes/"+segment(scope)+"/export"))
	return data, err
}

// ImportScope writes an archive as ExportScope reads it into a scope, all
// or nothing, and says what it created, updated and left unchanged.
func (c *Client) ImportScope(ctx context.Context, scope string, archive []byte) (api.ScopeImport, error) {
	var out api.ScopeImport
	r := request{method: http.MethodPost, path: "/v1/scopes/" + segment(scope) + "/import",
		body: archive, contentType: "application/gzip", ok: []int{http.StatusOK}}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// ExportSession writes a session's history to w as turn events, one JSON
// line each in seq order, as the server streams it, and returns the bytes
// written. An answer cut short is an error (io.ErrUnexpectedEOF), never a
// shorter history.
func (c *Client) ExportSession(ctx context.Context, id string, w io.Writer) (int64, error) {
	r := get("/v1/sessions/" + segment(id) + "/export")
	resp, err := c.open(ctx, r)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }() // read whole or given up on
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("mnemos: %s %s: read the answer: %w", r.method, r.path, err)
	}
	return n, nil
}

// ImportSession publishes a history as ExportSession writes it (turn
// events, one JSON line each) into a session: every line is checked before
// any is published. The events apply when the session's applied_seq
// reaches the answer's LastSeq.
func (c *Client) ImportSession(ctx context.Context, id string, events []byte) (api.SessionImport, error) {
	var out api.SessionImport
	r := request{method: http.MethodPost, path: "/v1/sessions/" + segment(id) + "/import",
		body: events, contentType: "application/x-ndjson", ok: []int{http.StatusAccepted}}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// StartDream starts a consolidation of the scope now.
func (c *Client) StartDream(ctx context.Context, scope string) (api.Dream, error) {
	var out api.Dream
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/scopes/" + segment(scope) + "/dream", ok: []int{http.StatusAccepted}}, &out)
	return out, err
}

// ListDreams lists a scope's dreams, newest first (limit 0: the server's 50).
func (c *Client) ListDreams(ctx context.Context, scope string, limit int) (api.DreamList, error) {
	var out api.DreamList
	r := get("/v1/scopes/" + segment(scope) + "/dreams")
	if limit > 0 {
		r.query = url.Values{"limit": {strconv.Itoa(limit)}}
	}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// SearchOptions narrow a search: Source "memory" or "message" for one
// source only, Session for one session's messages, Limit the hits (0: the
// server's 10).
type SearchOptions struct {
	Source  string
	Session string
	Limit   int
}

// SearchScope searches a scope's memories and the messages of its sessions
// for query, best first.
func (c *Client) SearchScope(ctx context.Context, scope, query string, opts SearchOptions) (api.SearchResult, error) {
	var out api.SearchResult
	r := get("/v1/scopes/" + segment(scope) + "/search")
	r.query = url.Values{"q": {query}}
	if opts.Source != "" {
		r.query.Set("source", opts.Source)
	}
	if opts.Session != "" {
		r.query.Set("session", opts.Session)
	}
	if opts.Limit > 0 {
		r.query.Set("limit", strconv.Itoa(opts.Limit))
	}
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// GetDream reads one dream, with its proposal.
func (c *Client) GetDream(ctx context.Context, id string) (api.Dream, error) {
	var out api.Dream
	_, _, err := c.call(ctx, get("/v1/dreams/"+segment(id)), &out)
	return out, err
}

// KillDream kills a dream: at once when it had not started, else at its
// next heartbeat (KillRequested).
func (c *Client) KillDream(ctx context.Context, id string) (api.Dream, error) {
	var out api.Dream
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/dreams/" + segment(id) + "/kill", ok: []int{http.StatusOK, http.StatusAccepted}}, &out)
	return out, err
}

// ApproveDream applies a proposal.
func (c *Client) ApproveDream(ctx context.Context, id string) (api.Dream, error) {
	var out api.Dream
	_, _, err := c.call(ctx, request{method: http.MethodPost, path: "/v1/dreams/" + segment(id) + "/approve", ok: []int{http.StatusOK}}, &out)
	return out, err
}

// ListKeys lists the tenant's API keys (a key with the admin scope).
func (c *Client) ListKeys(ctx context.Context) (api.KeyList, error) {
	var out api.KeyList
	_, _, err := c.call(ctx, get("/v1/keys"), &out)
	return out, err
}

// CreateKey makes an API key and answers its secret, shown this once.
func (c *Client) CreateKey(ctx context.Context, req api.KeyRequest) (api.KeySecret, error) {
	var out api.KeySecret
	r, err := send(http.MethodPost, "/v1/keys", req, http.StatusCreated)
	if err != nil {
		return out, err
	}
	_, _, err = c.call(ctx, r, &out)
	return out, err
}

// GetKey reads one API key.
func (c *Client) GetKey(ctx context.Context, id string) (api.Key, error) {
	var out api.Key
	_, _, err := c.call(ctx, get("/v1/keys/"+segment(id)), &out)
	return out, err
}

// RevokeKey revokes an API key: every gateway refuses it within a second.
func (c *Client) RevokeKey(ctx context.Context, id string) (api.Key, error) {
	var out api.Key
	_, _, err := c.call(ctx, request{method: http.MethodDelete, path: "/v1/keys/" + segment(id), ok: []int{http.StatusOK}}, &out)
	return out, err
}

// RotateKey makes a new key in place of id, which stays good for overlap.
func (c *Client) RotateKey(ctx context.Context, id string, overlap time.Duration) (api.KeySecret, error) {
	var out api.KeySecret
	r, err := send(http.MethodPost, "/v1/keys/"+segment(id)+"/rotate", api.RotateRequest{OverlapSeconds: int64(overlap / time.Second)}, http.StatusCreated)
	if err != nil {
		return out, err
	}
	_, _, err = c.call(ctx, r, &out)
	return out, err
}

// GetAuditLog reads a page of the tenant's audit log, newest first: before
// 0 starts at the newest, limit 0 asks for the server's 100.
func (c *Client) GetAuditLog(ctx context.Context, before int64, limit int) (api.AuditLog, error) {
	var out api.AuditLog
	r := get("/v1/audit")
	r.query = auditQuery(before, limit)
	_, _, err := c.call(ctx, r, &out)
	return out, err
}

// auditQuery is the query of a page of an audit log.
func auditQuery(before int64, limit int) url.Values {
	q := url.Values{}
	if before > 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

// Healthz reports whether the process is alive and what its targets do.
func (c *Client) Healthz(ctx context.Context) (api.Health, error) {
	var out api.Health
	_, _, err := c.call(ctx, get("/healthz"), &out)
	return out, err
}

// Readyz reports whether the process is ready; an unavailable one answers
// the failed checks and an *Error of status 503.
func (c *Client) Readyz(ctx context.Context) (api.Health, error) {
	var out api.Health
	_, _, err := c.call(ctx, get("/readyz", http.StatusOK, http.StatusServiceUnavailable), &out)
	if err == nil && out.Status != "ready" {
		failed := make([]string, 0, len(out.Failed))
		for name, msg := range out.Failed {
			failed = append(failed, name+": "+msg)
		}
		slices.Sort(failed)
		err = &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: strings.Join(failed, "; "), RetryAfter: -1}
	}
	return out, err
}

// OpenAPI reads the server's OpenAPI document, as JSON.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	_, _, data, err := c.do(ctx, get("/openapi.json"))
	return data, err
}

// CreateMessage sends a Messages API request (Anthropic's body, as JSON)
// through Mnemos's proxy for session (none when empty) and returns the
// answer's body. Anthropic's own SDKs speak to the same route; this is for
// callers that hold the body already.
func (c *Client) CreateMessage(ctx context.Context, session string, body []byte) ([]byte, error) {
	return c.messages(ctx, "/v1/messages", session, body)
}

// CountMessageTokens is count_tokens for a Messages API request as the
// proxy would send it for session.
func (c *Client) CountMessageTokens(ctx context.Context, session string, body []byte) ([]byte, error) {
	return c.messages(ctx, "/v1/messages/count_tokens", session, body)
}

// CreateResponse sends a Responses API request (OpenAI's body, as JSON)
// through the proxy's OpenAI door for session (none when empty) and
// returns the answer's body. OpenAI's own SDKs speak to the same route.
func (c *Client) CreateResponse(ctx context.Context, session string, body []byte) ([]byte, error) {
	return c.messages(ctx, "/v1/responses", session, body)
}

// CreateChatCompletion sends a Chat Completions request through the
// proxy's OpenAI door for session (none when empty) and returns the
// answer's body.
func (c *Client) CreateChatCompletion(ctx context.Context, session string, body []byte) ([]byte, error) {
	return c.messages(ctx, "/v1/chat/completions", session, body)
}

// ListModels is the model list of the tenant's OpenAI upstream, relayed
// by the proxy's OpenAI door, as the upstream's JSON.
func (c *Client) ListModels(ctx context.Context) ([]byte, error) {
	_, _, data, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/models", ok: []int{http.StatusOK}})
	return data, err
}

func (c *Client) messages(ctx context.Context, path, session string, body []byte) ([]byte, error) {
	r := request{method: http.MethodPost, path: path, body: body, contentType: "application/json", ok: []int{http.StatusOK}}
	if session != "" {
		r.header = http.Header{"X-Mnemos-Session": []string{session}}
	}
	_, _, data, err := c.do(ctx, r)
	return data, err
}
