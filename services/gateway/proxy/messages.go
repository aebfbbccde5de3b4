package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/httpbody"
	"github.com/mnemos-ai/mnemos/pkg/jsonvalid"
	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/sse"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// DefaultMaxMessagesBytes bounds a Messages API request body: Anthropic's own limit.
const DefaultMaxMessagesBytes = 32 << 20

// Upstream is where the proxy sends requests: an Anthropic-compatible base
// URL and the key Mnemos holds for it (never logged, never returned). A
// tenant may have its own (store.SetTenantUpstream, `mnemos tenant
// upstream`); Config.Upstream serves the others.
type Upstream = store.Upstream

// The outcomes of a proxied request, as counted by
// mnemos.proxy.requests{outcome}.
const (
	proxyManaged     = "managed"     // managed and its round published
	proxyPassthrough = "passthrough" // no session: forwarded as sent
	proxyUnmanaged   = "unmanaged"   // managing failed: forwarded as sent (fail-open)
	proxyRefused     = "refused"     // managing failed and the tenant does not fail open: 503
	proxyUpstream    = "upstream_error"
	proxyClientGone  = "client_gone" // the client left before the answer was whole: not recorded
	proxyUnrecorded  = "unrecorded"  // answered, but its round could not be published
	proxyInvalid     = "invalid"     // refused for what it holds (400, 413): never sent up
	proxyOverBudget  = "over_budget" // the tenant's daily money budget is spent: never sent up
)

// messagesRequest is a request as the proxy reads it, whatever its door:
// every field kept as sent, the messages one by one, and the session it
// names.
type messagesRequest struct {
	door     *door
	fields   map[string]json.RawMessage
	messages []json.RawMessage
	// openai is what an OpenAI request holds besides its messages; nil
	// for the Messages API.
	openai   *openaiInput
	model    string
	session  string // "" when it names none (sessionOf)
	upstream Upstream
	// turns are the messages decoded, each once it is needed (turnAt);
	// decoded marks those that are. digests are the messages'
	// messageDigest and canons their canonDigest, taken when a session's
	// request is checked (checkMessages); chain their chained digests and
	// place the thread the request goes to, once it is placed
	// (placeRequest).
	turns   []turn.Message
	decoded []bool
	digests []digest
	canons  []digest
	chain   []digest
	place   *placement
	// changed are the positions of the client's messages whose rendering
	// is not the client's message (keepUnchanged).
	changed []int64
	// replaced marks a request placed again (manage, or its record):
	// from the store, and once at most while it is managed.
	replaced bool
	// snapshot is the context snapshot the managed request's render
	// leaves to write (the cache-break check's), with the round when it is
	// recorded (flushSnapshot otherwise); nil when there is none.
	snapshot *store.ContextSnapshot
	// client is the request as the client sent it: its headers go up with
	// every call made for it (forward); clientBody is its body, which the
	// round's straight cost is reckoned from (priceRound).
	client     *http.Request
	clientBody []byte
}

// turnAt is message i decoded (door.decode), once.
func (req *messagesRequest) turnAt(i int) (turn.Message, error) {
	if req.turns == nil {
		req.turns, req.decoded = make([]turn.Message, len(req.messages)), make([]bool, len(req.messages))
	}
	if !req.decoded[i] {
		m, err := req.door.decode(i, req.messages[i])
		if err != nil {
			return turn.Message{}, err
		}
		req.turns[i], req.decoded[i] = m, true
	}
	return req.turns[i], nil
}

// checkMessages takes the digests of a session's request's messages and
// their canonical digests (canonDigest), and reports the first one Mnemos
// cannot decode: each is decoded unless the same bytes decoded before
// (h.canons), and then only when needed.
func (h *Handler) checkMessages(tenant string, req *messagesRequest) error {
	if req.digests != nil {
		return nil
	}
	digests, canons := make([]digest, len(req.messages)), make([]digest, len(req.messages))
	for i, raw := range req.messages {
		digests[i] = messageDigest(tenant, raw)
		if c, ok := h.canons.get(digests[i]); ok {
			canons[i] = c
			continue
		}
		m, err := req.turnAt(i)
		if err != nil {
			return err
		}
		if canons[i], err = req.door.canonDigest(m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		h.canons.put(digests[i], canons[i])
	}
	req.digests, req.canons = digests, canons
	return nil
}

// readMessagesRequest reads and parses a request body that came in by d
// and the session it names, answering the client (and reporting false)
// when it cannot or no upstream is configured. A request refused for what
// it holds is counted (outcome invalid) when count is set: the proxied
// requests are, count_tokens is not.
func (h *Handler) readMessagesRequest(w http.ResponseWriter, r *http.Request, tenant string, d *door, count bool) (*messagesRequest, []byte, bool) {
	dialect := d.dialect
	invalid := func(e *httpapi.Error) (*messagesRequest, []byte, bool) {
		if count {
			h.countProxy(r.Context(), proxyInvalid)
		}
		dialect.WriteError(w, e)
		return nil, nil, false
	}
	limit := h.cfg.MaxMessagesBytes
	body, err := httpbody.Read(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return invalid(&httpapi.Error{Status: http.StatusRequestEntityTooLarge, Code: "request_too_large", Message: fmt.Sprintf("the request is larger than %d bytes", limit)})
	}
	if err != nil {
		dialect.WriteError(w, &httpapi.Error{Status: http.StatusBadRequest, Code: "invalid_request_error", Message: "reading the body: " + err.Error()})
		return nil, nil, false
	}
	req := &messagesRequest{door: d, client: r, clientBody: body}
	// Checked once; then split without encoding/json's scanner (messages_json.go).
	if !jsonvalid.Valid(body) {
		return invalid(&httpapi.Error{Status: http.StatusBadRequest, Code: "invalid_request_error", Message: "the body is not a JSON object"})
	}
	if req.fields, err = jsonwalk.SplitObject(body); err != nil {
		return invalid(&httpapi.Error{Status: http.StatusBadRequest, Code: "invalid_request_error", Message: "the body is not a JSON object"})
	}
	if err := d.readConversation(req); err != nil {
		return invalid(&httpapi.Error{Status: http.StatusBadRequest, Code: "invalid_request_error", Message: err.Error()})
	}
	if req.openai != nil {
		req.openai.keys, req.openai.tenant = h.itemKeys, tenant
	}
	_ = json.Unmarshal(req.fields["model"], &req.model) // the upstream judges the model
	req.session = d.sessionOf(r, req.fields)
	if req.session != "" && !turn.ValidToken(req.session) {
		return invalid(&httpapi.Error{Status: http.StatusBadRequest, Code: "invalid_request_error", Message: fmt.Sprintf(
			"session ids are 1 to %d ASCII letters, digits, '_' and '-', starting with a letter or a digit; got %s", turn.MaxIDLen, httpapi.Describe(req.session))})
	}
	up, err := h.upstreamOf(r.Context(), tenant, d.provider)
	if err != nil {
		h.Log.Error("messages proxy: reading the tenant's upstream", "tenant", tenant, "err", err)
		w.Header().Set("Retry-After", "5")
		dialect.WriteError(w, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: "overloaded_error", Message: "Mnemos cannot read this tenant's upstream now; retry shortly"})
		return nil, nil, false
	}
	if up.URL == "" {
		dialect.WriteError(w, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: d.noUpstream(), Message: fmt.Sprintf(
			"no %s upstream is configured for this tenant (`mnemos tenant upstream -provider %s`, or MNEMOS_UPSTREAM_%s_URL for every tenant)",
			d.providerName(), d.provider, strings.ToUpper(string(d.provider)))})
		return nil, nil, false
	}
	req.upstream = up
	return req, body, true
}

// sessionOf names the session a request belongs to: Claude Code's session
// header, else the session_id inside the JSON string of metadata.user_id,
// else X-Mnemos-Session; "" when none does.
func sessionOf(r *http.Request, fields map[string]json.RawMessage) string {
	if id := r.Header.Get(httpapi.HeaderClaudeCodeSession); id != "" {
		return id
	}
	var meta struct {
		UserID string `json:"user_id"`
	}
	if json.Unmarshal(fields["metadata"], &meta) == nil && meta.UserID != "" {
		var user struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal([]byte(meta.UserID), &user) == nil && user.SessionID != "" {
			return user.SessionID
		}
	}
	return r.Header.Get(httpapi.HeaderAgentSession)
}

// proxied serves a door's requests.
func (h *Handler) proxied(d *door) httpapi.Handler {
	return func(w http.ResponseWriter, r *http.Request, tenant string) { h.post(w, r, tenant, d) }
}

// post proxies a request that came in by d: managed when it names a
// session, its answer relayed as it comes, its round recorded after.
func (h *Handler) post(w http.ResponseWriter, r *http.Request, tenant string, d *door) {
	ctx := r.Context()
	req, body, releaseWork, release, ok := h.openMessages(w, r, tenant, d, true)
	if !ok {
		return
	}
	defer release()
	if h.overBudget(w, r, tenant, d) {
		return
	}
	// A round not recorded leaves its render's context snapshot to write;
	// a round handed to its record leaves it to the record.
	recording := false
	defer func() {
		if !recording {
			h.flushSnapshot(context.WithoutCancel(ctx), tenant, req)
		}
	}()
	outcome := proxyPassthrough
	if req.session != "" {
		managed, err := h.manage(ctx, tenant, req, body, true)
		var f *httpapi.Error
		switch {
		case errors.As(err, &f):
			releaseWork()
			httpapi.TurnAway(w, r, d.dialect, f)
			return
		case errors.Is(err, errMovedOn):
			outcome = proxyRetry
		case err != nil && !h.failsOpen(ctx, tenant):
			releaseWork()
			h.Log.Warn(d.name+" proxy: refused, the tenant does not fail open", "tenant", tenant, "session", req.session, "err", err)
			h.countProxy(ctx, proxyRefused)
			w.Header().Set("Retry-After", "5")
			d.dialect.WriteError(w, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: "overloaded_error", Message: fmt.Sprintf(
				"Mnemos cannot manage this request of session %s now, and this tenant's requests do not go up unmanaged (proxy.fail_open is off); retry shortly", req.session)})
			return
		case err != nil:
			outcome = proxyUnmanaged
			h.Log.Warn(d.name+" proxy: forwarding unmanaged", "tenant", tenant, "session", req.session, "err", err)
		default:
			outcome, body = req.place.outcome, managed
		}
		if req.openai != nil && req.openai.compaction && outcome != proxyUnmanaged {
			outcome = proxyClientCompaction
		}
	}
	recorded := outcome != proxyPassthrough && outcome != proxyUnmanaged && outcome != proxyRetry && outcome != proxyClientCompaction
	if !recorded {
		h.flushSnapshot(ctx, tenant, req) // no round to write it with
	}
	releaseWork() // the upstream's time is not the tenant's expensive work
	resp := h.sendUp(w, r, d, req.upstream, d.path, body)
	if resp == nil {
		// A client that left before the upstream answered ended the call
		// itself: it is gone, and the upstream did not fail.
		if ctx.Err() != nil {
			h.countProxy(ctx, proxyClientGone)
		} else {
			h.countProxy(ctx, proxyUpstream)
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(w, resp.Body) // the upstream's error, as it sent it
		h.countProxy(ctx, proxyUpstream)
		return
	}
	reply, err := d.relay(w, resp)
	if err != nil {
		// A round the client did not get whole is not the session's: the
		// client sends it again, and that one is recorded.
		h.Log.Warn(d.name+" proxy: the answer was cut short", "tenant", tenant, "session", req.session, "err", err)
		if ctx.Err() != nil {
			h.countProxy(ctx, proxyClientGone)
		} else {
			h.countProxy(ctx, proxyUpstream)
		}
		return
	}
	answered := time.Now()
	if !recorded {
		h.countProxy(ctx, outcome)
		h.priceUnrecorded(context.WithoutCancel(ctx), tenant, req, body, reply, answered)
		return
	}
	// The client has its answer; the round is recorded after the handler
	// returns (roundRecords), which must not depend on the client staying
	// connected. The rounds of one thread are recorded in order; threads
	// (the main agent and a subagent) do not wait on each other.
	recording = true
	bg := context.WithoutCancel(ctx)
	h.records.run(tenant+"\x00"+req.place.thread.ThreadID, func() { h.record(bg, tenant, r, req, body, reply, outcome, answered) })
}

// record records a round whose answer the client has, off the handler,
// counts the request's outcome and prices the round (priceRound).
func (h *Handler) record(bg context.Context, tenant string, r *http.Request, req *messagesRequest, body []byte, reply reply, outcome string, answered time.Time) {
	name := req.door.name
	defer func() {
		// Off the handler, net/http no longer recovers a panic: it
		// would end the process with every round in flight.
		if p := recover(); p != nil {
			h.Log.Error(name+" proxy: recording the round panicked", "tenant", tenant, "session", req.session,
				"panic", p, "stack", string(debug.Stack()))
			h.countProxy(bg, proxyUnrecorded)
		}
	}()
	err := h.recordRound(bg, tenant, r, req, body, reply)
	if errors.Is(err, errMovedOn) {
		// The thread took a round of the same conversation since this
		// one was placed (its record ran first), and this request goes
		// another way: placed again on what the session holds now, it
		// is a branch, or a retry. Placed from the store, not from the
		// tip of the conversation this round raced.
		req.place, req.replaced = nil, true
		if _, err = h.placeRequest(bg, tenant, req); err == nil && req.place.record {
			err = h.recordRound(bg, tenant, r, req, body, reply)
		}
	}
	if req.place != nil {
		outcome = req.place.outcome
	}
	switch {
	case errors.Is(err, errMovedOn):
		h.Log.Info(name+" proxy: the round raced another of its thread; not recorded", "tenant", tenant, "session", req.session, "err", err)
		h.flushSnapshot(bg, tenant, req)
		outcome = proxyRetry
	case err != nil:
		h.Log.Error(name+" proxy: the round was not recorded", "tenant", tenant, "session", req.session, "err", err)
		h.flushSnapshot(bg, tenant, req)
		outcome = proxyUnrecorded
	}
	h.countProxy(bg, outcome)
	h.priceRound(bg, tenant, req, body, reply, answered, err == nil && outcome == proxyManaged)
}

// openMessages admits a Messages API request (admitMessages) and reads it
// (readMessagesRequest), answering the client when either fails. The
// handler calls releaseWork once Mnemos's work on the request is done
// (before the upstream's wait) and defers release, which gives back all
// the request took. count counts a request refused for what it holds.
func (h *Handler) openMessages(w http.ResponseWriter, r *http.Request, tenant string, d *door, count bool) (_ *messagesRequest, body []byte, releaseWork, release func(), ok bool) {
	releaseWork, releaseBody, ok := h.admitMessages(w, r, tenant, d.dialect)
	if !ok {
		return nil, nil, nil, nil, false
	}
	release = func() { releaseWork(); releaseBody() }
	req, body, ok := h.readMessagesRequest(w, r, tenant, d, count)
	if !ok {
		release()
		return nil, nil, nil, nil, false
	}
	return req, body, releaseWork, release, true
}

// admitMessages admits a Messages API request before its body is read. It
// counts against the tenant's concurrent_requests while it is read and
// managed (releaseWork: the wait for the upstream is not counted, or an
// agent platform's long calls would use up the limit), and reserves its
// body's cost of the process's budget until it is answered (releaseBody).
// The body takes no heavy slot: those are for a core's work, and this one
// waits on the upstream. A tenant whose settings cannot be read gets the
// default limit: the proxy fails open.
func (h *Handler) admitMessages(w http.ResponseWriter, r *http.Request, tenant string, dialect httpapi.Dialect) (releaseWork, releaseBody func(), ok bool) {
	ctx := r.Context()
	limit := tenantcfg.Defaults().Limits.ConcurrentRequests
	if set, err := h.settings.For(ctx, tenant); err == nil {
		limit = set.Limits.ConcurrentRequests
	}
	work, f := h.admission.TenantSlot(ctx, tenant, limit)
	if f != nil {
		httpapi.TurnAway(w, r, dialect, f)
		return nil, nil, false
	}
	size := h.cfg.MaxMessagesBytes
	if r.ContentLength >= 0 && r.ContentLength < size {
		size = r.ContentLength
	}
	cost := size * httpapi.BodyFactor
	if f := h.admission.Budget(ctx, cost, fmt.Sprintf("a Messages API request of %d bytes", size)); f != nil {
		work()
		httpapi.TurnAway(w, r, dialect, f)
		return nil, nil, false
	}
	var once sync.Once
	return func() { once.Do(work) }, func() { h.admission.Release(cost) }, true
}

// countTokens answers count_tokens for the request as the proxy would send it.
func (h *Handler) countTokens(w http.ResponseWriter, r *http.Request, tenant string) {
	req, body, releaseWork, release, ok := h.openMessages(w, r, tenant, messagesDoor, false)
	if !ok {
		return
	}
	defer release()
	if req.session != "" {
		managed, err := h.manage(r.Context(), tenant, req, body, false)
		h.flushSnapshot(r.Context(), tenant, req) // no round is recorded here
		var f *httpapi.Error
		switch {
		case errors.As(err, &f):
			releaseWork()
			httpapi.TurnAway(w, r, httpapi.Anthropic, f)
			return
		case err == nil:
			body = managed
		}
	}
	releaseWork()
	if resp := h.sendUp(w, r, messagesDoor, req.upstream, "/v1/messages/count_tokens", body); resp != nil {
		defer resp.Body.Close()
		_, _ = io.Copy(w, resp.Body)
	}
}

// failsOpen reports whether the tenant's requests go up unmanaged when
// Mnemos cannot manage them: its proxy.fail_open, or the default when its
// settings cannot be read either.
func (h *Handler) failsOpen(ctx context.Context, tenant string) bool {
	set, err := h.settings.For(ctx, tenant)
	if err != nil {
		return tenantcfg.DefaultProxy().FailOpen
	}
	return set.Proxy.FailOpen
}

func (h *Handler) countProxy(ctx context.Context, outcome string) {
	h.metrics.proxyRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
}

// sendUp sends body to the upstream's path and writes the answer's status
// and headers to the client, whose body the caller then relays; nil when
// the upstream did not answer (the client got a 502 then, unless it left).
func (h *Handler) sendUp(w http.ResponseWriter, r *http.Request, d *door, to Upstream, path string, body []byte) *http.Response {
	forward := h.forward
	if d.openai() {
		forward = h.forwardOpenAI
	}
	resp, err := forward(r.Context(), r, to, path, body)
	if err != nil {
		if r.Context().Err() == nil {
			d.dialect.WriteError(w, &httpapi.Error{Status: http.StatusBadGateway, Code: d.unreachable(), Message: "the upstream did not answer: " + err.Error()})
		}
		return nil
	}
	copyUpstreamHeaders(w, resp, d)
	if resp.StatusCode != http.StatusOK || eventStream(resp) {
		w.WriteHeader(resp.StatusCode)
	} // else relayReply writes the header, with the answer's length
	return resp
}

// eventStream reports whether an answer is a stream of server-sent events.
func eventStream(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
}

// upstreamOf is the tenant's upstream of provider: its own, else the process's.
func (h *Handler) upstreamOf(ctx context.Context, tenant string, provider store.Provider) (Upstream, error) {
	return h.upstreams.Get(ctx, string(provider)+"\x00"+tenant, func(ctx context.Context, _ string) (Upstream, error) {
		up, err := h.store.TenantUpstream(ctx, tenant, provider)
		if errors.Is(err, store.ErrNotFound) {
			if provider == store.ProviderOpenAI {
				return h.cfg.UpstreamOpenAI, nil
			}
			return h.cfg.Upstream, nil
		}
		return up, err
	})
}

// forward sends body to the upstream's path, with the client's ?beta=true
// and Anthropic headers, and the upstream's key.
func (h *Handler) forward(ctx context.Context, r *http.Request, to Upstream, path string, body []byte) (*http.Response, error) {
	url := strings.TrimSuffix(to.URL, "/") + path
	if r.URL.Query().Get("beta") == "true" {
		url += "?beta=true" // the one query the API takes; nothing else of the client's URL goes up
	}
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body)) //nolint:gosec // the operator's upstream and a fixed path
	if err != nil {
		return nil, err
	}
	for name, values := range r.Header {
		if strings.HasPrefix(strings.ToLower(name), "anthropic-") || strings.EqualFold(name, httpapi.HeaderClaudeCodeSession) {
			up.Header[name] = values
		}
	}
	up.Header.Set("Content-Type", "application/json")
	up.Header.Set("X-Api-Key", to.Key)
	if up.Header.Get("Anthropic-Version") == "" {
		up.Header.Set("Anthropic-Version", "2023-06-01")
	}
	return h.cfg.UpstreamClient.Do(up) //nolint:gosec // the URL is the operator's configured upstream, not the client's
}

// copyUpstreamHeaders passes on what a client of d reads of an answer's
// headers.
func copyUpstreamHeaders(w http.ResponseWriter, resp *http.Response, d *door) {
	for name, values := range resp.Header {
		if l := strings.ToLower(name); d.relays(l) {
			w.Header()[name] = values
		}
	}
}

// reply is the upstream's answer to a round: the message and its usage.
type reply struct {
	ID         string       `json:"id"`
	Role       string       `json:"role"`
	Content    turn.Content `json:"content"`
	StopReason string       `json:"stop_reason"`
	Usage      turn.Usage   `json:"usage"`
}

// relayReply copies the upstream's answer to the client as it comes — a
// stream event by event, flushed — and reads the message it carries. A
// whole answer goes with its length and is flushed: the client has all of
// it before the round is recorded, so the recording is not on its wait.
func relayReply(w http.ResponseWriter, resp *http.Response) (reply, error) {
	if !eventStream(resp) {
		data, err := relayWhole(w, resp)
		if err != nil {
			return reply{}, err
		}
		var rep reply
		if err := json.Unmarshal(data, &rep); err != nil {
			return reply{}, fmt.Errorf("the upstream's answer: %w", err)
		}
		return rep, nil
	}
	var asm streamAssembler
	if err := relayEvents(w, resp, asm.add); err != nil {
		return reply{}, err
	}
	return asm.reply()
}

// relayWhole copies a whole answer to the client, with its length, and
// flushes it: the client has all of it before the round is recorded.
func relayWhole(w http.ResponseWriter, resp *http.Response) ([]byte, error) {
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return nil, err
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	_ = http.NewResponseController(w).Flush() // a writer that cannot flush sends it all when the handler returns
	return data, nil
}

// relayEvents copies a stream to the client event by event, flushed, and
// hands each to add.
func relayEvents(w http.ResponseWriter, resp *http.Response, add func([]byte) error) error {
	flusher, _ := w.(http.Flusher)
	return sse.Read(resp.Body, func(event []byte) error {
		if _, err := w.Write(event); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return add(event)
	})
}

// recordRound publishes a round through the outbox, on the thread the
// request was placed on (req.place): the messages of the client's
// conversation the thread does not hold yet and the upstream's answer,
// with its usage, under the thread's next seq, and the chained digests of
// them all, by which the next request finds the thread. A thread that grew
// since the request was placed takes nothing (errMovedOn): another request
// of the same conversation was recorded first.
// The context snapshot the request's render left (req.snapshot) is written
// in the same transaction, its writes sent with the COMMIT in one round
// trip (PipelineCommit),
// and so is the request as it was sent up (sent), for background calls to
// fork, when the answer shows the prompt cache in use (agentRequest): the
// pieces of it that changed since the round before.
func (h *Handler) recordRound(ctx context.Context, tenant string, r *http.Request, req *messagesRequest, sent []byte, rep reply) error {
	pl, n := req.place, int64(len(req.messages))
	response := turn.Message{Role: "assistant", Content: withoutCacheControl(rep.Content), StopReason: rep.StopReason}
	answered, err := req.door.canonDigest(response)
	if err != nil {
		return err
	}
	var tip threadTip
	err = h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		th := pl.thread
		lt, err := h.lockThread(ctx, tx, req, th, sent, rep)
		if err != nil {
			return err
		}
		if th.Kind == store.ThreadMain && lt.last == nil && lt.session.ProxyMessages+lt.session.AppliedSeq > 0 {
			// The session's id holds a conversation no thread names (one
			// proxied before threads were kept, or sent as turn events):
			// the main thread is a session of its own.
			th.ThreadID = threadID(req.session, "main-"+short(req.chain[0]))
			if lt, err = h.lockThread(ctx, tx, req, th, sent, rep); err != nil {
				return err
			}
		}
		if err := lt.follows(req.chain); err != nil {
			return fmt.Errorf("%w: thread %s: %w", errMovedOn, th.ThreadID, err)
		}
		sess, stored, keep, ar := lt.session, lt.pieces, lt.keep, lt.request
		from, session := sess.ProxyMessages, th.ThreadID
		if pl.fresh && from > 0 {
			// Placed before the thread's first round was recorded: the
			// request continues it.
			pl.outcome = proxyManaged
		}
		seq := max(sess.ProxySeq, sess.AppliedSeq) + 1
		ev := turn.Event{
			Schema: turn.SchemaV1, EventID: roundEventID(tenant, session, seq), TenantID: tenant, SessionID: session, Seq: seq,
			AgentID: th.AgentID, Model: req.model, MemoryScope: scopeOf(r), OccurredAt: time.Now().UTC(), Usage: &rep.Usage,
		}
		if prefix := h.openaiPrefix(req); prefix != nil {
			ev.Schema, ev.RequestPrefix = turn.SchemaV1_1, prefix
		}
		path := make([][]byte, 0, n-from+1)
		for i := from; i < n; i++ {
			m, err := req.turnAt(int(i))
			if err != nil {
				return err
			}
			m.UUID = messageUUID(tenant, session, i)
			ev.InputMessages = append(ev.InputMessages, m)
			path = append(path, req.chain[i][:])
		}
		response.UUID = messageUUID(tenant, session, n)
		ev.Response = &response
		prev := chainSeed(tenant, req.session, req.door)
		if n > 0 {
			prev = req.chain[n-1]
		}
		last := chainNext(prev, answered)
		path = append(path, last[:])
		tip = threadTip{thread: th, length: n + 1, last: last}
		row, err := outbox.Event(ctx, bus.KindTurnCompleted, tenant, session, bus.MsgID(tenant, ev.EventID), ev)
		if err != nil {
			return err
		}
		// The writes and the COMMIT in one round trip.
		return tx.PipelineCommit(ctx, func(p *store.Tx) error {
			if err := p.Enqueue(ctx, row); err != nil {
				return err
			}
			if req.snapshot != nil {
				if err := p.PutContextSnapshot(ctx, *req.snapshot); err != nil {
					return err
				}
			}
			if keep {
				if err := p.PutAgentRequest(ctx, ar, stored); err != nil {
					return err
				}
			}
			if err := p.RecordProxyRound(ctx, session, seq, n+1); err != nil {
				return err
			}
			return p.PutThreadRound(ctx, th, from, path)
		})
	})
	if err == nil {
		req.snapshot = nil
		if n > 0 {
			h.tips.put(req.chain[0], tip)
		}
	}
	return err
}

// lockedThread is a thread's session, locked, with its last message and
// the pieces of its kept agent request a round need not write again.
type lockedThread struct {
	session sessionstate.Session
	last    *store.PathLast
	keep    bool
	request store.AgentRequest
	pieces  store.StoredPieces
}

// follows reports, as an error, when the request whose chain is given does
// not hold the thread's conversation as its own prefix: a request of the
// same thread was recorded since this one was placed, and went another way.
func (lt lockedThread) follows(chain []digest) error {
	held := lt.session.ProxyMessages
	switch {
	case lt.last == nil && held == 0:
		return nil
	case lt.last == nil || lt.last.Position != held-1:
		return fmt.Errorf("its path does not end at its %d messages", held)
	case held > int64(len(chain)):
		return fmt.Errorf("it holds %d messages, the request %d", held, len(chain))
	case !bytes.Equal(chain[held-1][:], lt.last.Digest):
		return fmt.Errorf("its message %d is not the request's", held-1)
	}
	return nil
}

// lockThread locks a thread's session (creating it), and reads its last
// message and the pieces of its kept agent request, in one round trip.
func (h *Handler) lockThread(ctx context.Context, tx *store.Tx, req *messagesRequest, th store.Thread, sent []byte, rep reply) (lockedThread, error) {
	var lt lockedThread
	lt.request, lt.keep = agentRequest(req, th.ThreadID, sent, rep)
	reads := store.NewReads(tx.Tenant())
	locked := store.Queue(reads, func(tx *store.Tx) (sessionstate.Session, error) { return tx.LockSession(ctx, th.ThreadID, th.AgentID) })
	last := store.Queue(reads, func(tx *store.Tx) (*store.PathLast, error) { return tx.LastPath(ctx, th.ThreadID) })
	var pieces *store.Future[store.StoredPieces]
	if lt.keep {
		pieces = store.Queue(reads, func(tx *store.Tx) (store.StoredPieces, error) { return tx.AgentRequestDigests(ctx, th.ThreadID) })
	}
	if err := tx.Read(ctx, reads); err != nil {
		return lt, err
	}
	var err error
	if lt.session, err = locked.Get(); err != nil {
		return lt, err
	}
	if lt.last, err = last.Get(); err != nil {
		return lt, err
	}
	if lt.keep {
		if lt.pieces, err = pieces.Get(); err != nil {
			return lt, err
		}
	}
	return lt, nil
}

// agentRequest is the request sent up for a round, kept for background
// calls to fork, when the answer shows it read or wrote the prompt cache:
// without a breakpoint there is nothing a fork could read. The answer goes
// with it when it called no tool (a fork cannot follow a tool call without
// its result).
func agentRequest(req *messagesRequest, thread string, sent []byte, rep reply) (store.AgentRequest, bool) {
	if req.openai != nil || rep.Usage.CacheReadInputTokens+rep.Usage.CacheCreationInputTokens <= 0 || len(sent) == 0 {
		return store.AgentRequest{}, false
	}
	ar := store.AgentRequest{SessionID: thread, Model: req.model, Body: sent}
	if req.client != nil {
		ar.Beta = req.client.Header.Get("anthropic-beta")
	}
	calls := rep.StopReason == "tool_use"
	for _, b := range rep.Content {
		calls = calls || b.Type == turn.BlockToolUse || b.Type == "server_tool_use"
	}
	if !calls && len(rep.Content) > 0 {
		if content, err := json.Marshal(withoutCacheControl(rep.Content)); err == nil {
			ar.Reply = content
		}
	}
	return ar, true
}

// flushSnapshot writes the context snapshot a managed request's render
// left (req.snapshot), when its round is not recorded with it.
func (h *Handler) flushSnapshot(ctx context.Context, tenant string, req *messagesRequest) {
	if req.snapshot == nil {
		return
	}
	snap := *req.snapshot
	req.snapshot = nil
	if err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error { return tx.PutContextSnapshot(ctx, snap) }); err != nil {
		h.Log.Warn("messages proxy: the context snapshot was not written", "tenant", tenant, "session", req.session, "err", err)
	}
}

// proxyNamespace is the UUID v5 namespace of the ids the proxy gives.
var proxyNamespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://mnemos.dev/schemas/mnemos.turn.v1.json#proxy"))

// messageUUID is the id of the message at position i of a session's
// conversation: the same every time the client sends it again.
func messageUUID(tenant, session string, i int64) string {
	return uuid.NewSHA1(proxyNamespace, fmt.Appendf(nil, "%s\x00%s\x00message\x00%d", tenant, session, i)).String()
}

// roundEventID is the event id of a session's round seq.
func roundEventID(tenant, session string, seq int64) string {
	return uuid.NewSHA1(proxyNamespace, fmt.Appendf(nil, "%s\x00%s\x00round\x00%d", tenant, session, seq)).String()
}

// scopeOf is the memory scope a request names in X-Mnemos-User and
// X-Mnemos-Project; nil when it names none (the tenant's default).
func scopeOf(r *http.Request) map[string]string {
	scope := map[string]string{}
	if v := r.Header.Get(httpapi.HeaderUser); v != "" && turn.ValidToken(v) {
		scope["user"] = v
	}
	if v := r.Header.Get(httpapi.HeaderProject); v != "" && turn.ValidToken(v) {
		scope["project"] = v
	}
	if len(scope) == 0 {
		return nil
	}
	return scope
}

// decodeMessage reads message i of a request as a turn message, its
// cache_control markers dropped: the client moves them every request, and
// they say nothing of the conversation.
func decodeMessage(i int, data []byte) (turn.Message, error) {
	var m struct {
		Role    string       `json:"role"`
		Content turn.Content `json:"content"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return turn.Message{}, fmt.Errorf("message %d: %w", i, err)
	}
	return turn.Message{Role: m.Role, Content: withoutCacheControl(m.Content)}, nil
}

// withoutCacheControl is c with every cache_control dropped, in tool
// results' content too.
func withoutCacheControl(c turn.Content) turn.Content {
	out := make(turn.Content, len(c))
	for i, b := range c {
		b.CacheControl = nil
		if b.Content != nil {
			inner := withoutCacheControl(*b.Content)
			b.Content = &inner
		}
		out[i] = b
	}
	return out
}
