// Package gateway is Mnemos's HTTP API: turn ingest, session token state,
// pre-flight checks, offloaded tool results, the context, compactions,
// long-term memories and their recall. The tenant of every request comes from its API key.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/ttlcache"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Config of the gateway target.
type Config struct {
	MaxEventBytes int
	// KeyCacheTTL is how long a verified API key is trusted without asking Postgres.
	KeyCacheTTL time.Duration
	// ContextWait bounds how long a context request waits for the compaction
	// in flight when the session is at its blocking limit (?wait= overrides).
	ContextWait time.Duration
	// PollInterval is how often a waiting request looks again.
	PollInterval time.Duration
	// LLMProvider names the provider compactions use, shown in answers.
	LLMProvider string
	// Now is the clock micro-compaction's idle rule reads (time.Now when nil).
	Now func() time.Time
	// Limits admits each turn event against its tenant's limits; nil
	// admits everything.
	Limits *limits.Limiter
	// KeyFailures failed API-key checks from one client address within
	// KeyFailureWindow make the address answer 429 until the window ends
	// (0: no limit). A key that failed is refused without asking Postgres
	// for KeyCacheTTL.
	KeyFailures      int
	KeyFailureWindow time.Duration
	// MaxInflightBytes is the process's budget of bytes its requests in
	// flight expect to hold (see admission.go); 0 means no budget.
	MaxInflightBytes int64
	// HeavyRequests bounds the requests expected to hold at least
	// HeavyBytes (large context renders and bodies) served at once (0: no
	// bound); one more waits up to HeavyWait for a slot, then answers 503.
	HeavyRequests int
	HeavyBytes    int64
	HeavyWait     time.Duration
	// A heavy context render is paced (cpu.Pacer): it rests HeavyRest
	// after each HeavyWork of reading and rendering, so it leaves the
	// machine's cores to other tenants' requests; HeavyRest 0 paces nothing.
	HeavyWork, HeavyRest time.Duration
	// Heavy, when set, are the process's slots for heavy work, shared with
	// the accountant; HeavyRequests is then unused.
	Heavy cpu.Heavy
	// ContextCacheBytes bounds the decoded messages kept between context
	// reads, so a session read again fetches only what was stored since
	// (see sessionctx.Cache); negative keeps none.
	ContextCacheBytes int64

	// Upstream is where POST /v1/messages sends requests (messages.go);
	// UpstreamClient sends them (it must not time out a long stream);
	// MaxMessagesBytes bounds a request's body.
	Upstream         Upstream
	UpstreamClient   *http.Client
	MaxMessagesBytes int64
}

// DefaultMaxInflightBytes is the default budget of bytes in flight.
const DefaultMaxInflightBytes = 256 << 20

// DefaultConfig holds the documented defaults.
func DefaultConfig() Config {
	return Config{
		MaxEventBytes: turn.DefaultMaxEventBytes,
		KeyCacheTTL:   30 * time.Second,
		ContextWait:   30 * time.Second,
		PollInterval:  100 * time.Millisecond,
		LLMProvider:   "builtin",

		KeyFailures:      20,
		KeyFailureWindow: time.Minute,
		MaxInflightBytes: DefaultMaxInflightBytes,
		HeavyRequests:    1,
		HeavyBytes:       16 << 20,
		HeavyWait:        3 * time.Second,
		HeavyWork:        2 * time.Millisecond,
		HeavyRest:        10 * time.Millisecond,

		ContextCacheBytes: 64 << 20,

		UpstreamClient:   &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, ResponseHeaderTimeout: 10 * time.Minute, MaxIdleConnsPerHost: 64}},
		MaxMessagesBytes: DefaultMaxMessagesBytes,
	}
}

// Gateway serves the HTTP API.
type Gateway struct {
	cfg      Config
	settings *tenantcfg.Cache
	store    *store.Store
	bus      *bus.Bus
	log      *slog.Logger
	metrics  gatewayMetrics
	memories *memory.Store
	recall   *recall.Recaller // nil: POST recall answers 503
	dreams   *dream.Dreams

	contexts  *sessionctx.Cache
	keys      *httpapi.Keys
	upstreams *ttlcache.Cache[Upstream] // tenant → its upstream for the proxy
	admission *httpapi.Admission
	// canons and unchanged are the proxy's verdicts on client messages
	// (messages_digest.go): the canonical digest of each that decodes
	// (threads.go), and whether a rendering is the client's message.
	canons    *memo[digest]
	unchanged *verdicts
	// tips are where each conversation's last recorded round left its
	// thread, by the chained digest of its first message (threads.go).
	tips *memo[threadTip]
	// prefixCounts are the exact sizes of system prompts and tools an
	// upstream counted for exact preflights (preflight_exact.go), which a
	// prefix's hash names for good.
	prefixCounts *immutable[int64]
	// records runs the proxy's round records after their answers (rounds.go).
	records roundRecords
	// sections and decisions are what context reads decided for good
	// (immutable.go): frozen memory sections by session and compaction,
	// recall's decisions by session and message.
	sections  *immutable[[]string]
	decisions *immutable[store.RecallPrefetch]
}

// New builds the gateway; settings gives each tenant's thresholds. meter may be nil.
func New(cfg Config, st *store.Store, b *bus.Bus, settings *tenantcfg.Cache, log *slog.Logger, meter metric.Meter) (*Gateway, error) {
	meter = defaults.Meter(meter)
	m, err := newMetrics(meter)
	if err != nil {
		return nil, fmt.Errorf("gateway.New: %w", err)
	}
	memories, err := memory.NewStore(st, meter, memory.Options{Now: cfg.Now, Limits: settings.MemoryLimits})
	if err != nil {
		return nil, fmt.Errorf("gateway.New: %w", err)
	}
	keys, err := httpapi.NewKeys(httpapi.KeysConfig{CacheTTL: cfg.KeyCacheTTL, Failures: cfg.KeyFailures, FailureWindow: cfg.KeyFailureWindow, Now: cfg.Now}, st, cfg.Limits, log, meter)
	if err != nil {
		return nil, fmt.Errorf("gateway.New: %w", err)
	}
	g := &Gateway{
		cfg: cfg, settings: settings, memories: memories, dreams: dream.New(st, memories, cfg.Now),
		store: st, bus: b, log: log, metrics: m, keys: keys,
		upstreams: ttlcache.New[Upstream](cfg.KeyCacheTTL, 10_000).StaleOnError(tenantcfg.StaleFor),
		admission: httpapi.NewAdmission(httpapi.AdmissionConfig{
			MaxInflightBytes: cfg.MaxInflightBytes, HeavyRequests: cfg.HeavyRequests, HeavyBytes: cfg.HeavyBytes, HeavyWait: cfg.HeavyWait, Heavy: cfg.Heavy,
		}, concurrentRequests(settings), cfg.Limits, log),
		contexts: sessionctx.NewCache(cfg.ContextCacheBytes),
		canons:   newMemo[digest](verdictLimit), unchanged: newVerdicts(verdictLimit), tips: newMemo[threadTip](tipsLimit),
		sections: newImmutable[[]string](immutablesMax), decisions: newImmutable[store.RecallPrefetch](immutablesMax),
		prefixCounts: newImmutable[int64](immutablesMax),
	}
	if err := g.observeInflight(meter); err != nil {
		return nil, fmt.Errorf("gateway.New: %w", err)
	}
	return g, nil
}

// Register adds the API's routes to mux. Each route is described in
// api/openapi.yaml, which GET /openapi.json serves.
func (g *Gateway) Register(mux httpapi.Mux) {
	// The expensive routes are admitted (httpapi.Admission) before any body is read.
	expensive := func(next httpapi.Handler) http.Handler {
		return g.auth(g.admission.Expensive(httpapi.Mnemos, next))
	}
	withBody := func(limit func() int64, next httpapi.Handler) http.Handler {
		return expensive(g.admission.WithBody(httpapi.Mnemos, limit, next))
	}
	eventBody := func() int64 { return g.eventLimit() }
	preflightBody := func() int64 { return int64(g.cfg.MaxEventBytes) }
	mux.Handle("POST /v1/turns", withBody(eventBody, g.postTurn))
	mux.Handle("GET /v1/sessions", g.auth(g.listSessions))
	mux.Handle("GET /v1/scopes", g.auth(g.listScopes))
	mux.Handle("GET /v1/usage", g.auth(g.getUsage))
	mux.Handle("GET /v1/sessions/{id}", g.auth(g.getSession))
	mux.Handle("PATCH /v1/sessions/{id}", g.auth(g.patchSession))
	mux.Handle("GET /v1/sessions/{id}/pins", g.auth(g.getPins))
	mux.Handle("PUT /v1/sessions/{id}/pins", g.auth(g.putPins))
	mux.Handle("POST /v1/sessions/{id}/preflight", withBody(preflightBody, g.preflight))
	mux.Handle("GET /v1/tool-results/{id}", g.auth(g.getToolResult))
	mux.Handle("GET /v1/sessions/{id}/context", expensive(g.getContext))
	mux.Handle("POST /v1/sessions/{id}/context", expensive(g.postContext))
	mux.Handle("POST /v1/sessions/{id}/compact", expensive(g.postCompact))
	mux.Handle("GET /v1/sessions/{id}/compactions", g.auth(g.listCompactions))
	mux.Handle("GET /v1/compactions/{id}", g.auth(g.getCompaction))
	mux.Handle("GET /v1/sessions/{id}/notes", g.auth(g.getNotes))
	mux.Handle("POST /v1/sessions/{id}/recall", expensive(g.postRecall))
	g.registerMemories(mux)
	g.registerDreams(mux)
	g.registerMessages(mux)
	g.registerMCP(mux)
	mux.Handle("GET /openapi.json", api.Handler())
	httpapi.RegisterCatchAll(mux)
}

// concurrentRequests reads a tenant's limit of expensive requests in
// flight from its settings.
func concurrentRequests(settings *tenantcfg.Cache) func(context.Context, string) (int, error) {
	return func(ctx context.Context, tenant string) (int, error) {
		set, err := settings.For(ctx, tenant)
		return set.Limits.ConcurrentRequests, err
	}
}

// auth resolves the API key of a Mnemos route (Authorization: Bearer) to
// its tenant, answering failures in Mnemos's dialect.
func (g *Gateway) auth(next httpapi.Handler) http.Handler {
	return g.keys.Auth(httpapi.Mnemos, httpapi.BearerKey, next)
}

func (g *Gateway) postTurn(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	set, err := g.settings.For(ctx, tenant)
	if err != nil {
		g.internal(w, "reading tenant settings", err)
		return
	}
	limit, limitName := g.cfg.MaxEventBytes, "the server's limit"
	if mp := int(g.bus.MaxPayload()); mp > 0 && mp < limit {
		limit = mp // the bus cannot carry more than its server's max_payload
	}
	if tb := set.Limits.TurnBytes; tb > 0 && tb < limit {
		limit, limitName = tb, "the tenant's turn_bytes limit"
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(limit)))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		g.refuse(ctx, w, turn.Refuse(turn.ReasonTooLarge, "event is larger than %s of %d bytes", limitName, limit))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return
	}
	ev, err := turn.Decode(body, turn.DecodeOptions{MaxBytes: limit, Tenant: tenant})
	if err != nil {
		g.refuse(ctx, w, err)
		return
	}
	if ie := accounting.CheckWindow(set.Tokens, ev); ie != nil {
		g.refuse(ctx, w, ie)
		return
	}
	if err := g.checkBounds(ctx, tenant, set.Limits, ev); err != nil {
		if _, ok := turn.AsInputError(err); ok {
			g.refuse(ctx, w, err)
			return
		}
		g.log.Error("reading the session for its limits failed", "tenant", tenant, "session", ev.SessionID, "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "could not check the session's limits; retry with the same event_id")
		return
	}
	var hdr nats.Header
	if g.cfg.Limits != nil {
		err := g.cfg.Limits.Admit(ctx, tenant, ev.SessionID)
		if ex, ok := limits.AsExceeded(err); ok {
			g.metrics.rejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", ex.Reason), attribute.String("transport", "http")))
			w.Header().Set("Retry-After", ex.RetryAfterSeconds())
			writeError(w, http.StatusTooManyRequests, ex.Reason, ex.Detail)
			return
		}
		if err != nil {
			g.log.Error("checking limits failed", "tenant", tenant, "session", ev.SessionID, "err", err)
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "unavailable", "could not check the tenant's limits; retry with the same event_id")
			return
		}
		hdr = nats.Header{limits.HeaderAdmitted: []string{"gateway"}} // counted once: the accountant skips it
	}
	// The event travels as sent; its subject names the tenant, which is
	// where consumers take it from.
	subject := g.bus.Subject(bus.KindTurnCompleted, tenant, ev.SessionID)
	ack, err := g.bus.Publish(ctx, subject, bus.MsgID(tenant, ev.EventID), body, hdr)
	if err != nil {
		g.log.Error("publishing turn failed", "tenant", tenant, "session", ev.SessionID, "event_id", ev.EventID, "err", err)
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the event bus did not accept the event; retry with the same event_id")
		return
	}
	g.metrics.ingested.Add(ctx, 1, metric.WithAttributes(attribute.String("transport", "http")))
	writeJSON(w, http.StatusAccepted, api.TurnAccepted{EventID: ev.EventID, Subject: subject, Duplicate: ack.Duplicate})
}

// checkBounds refuses a turn over the tenant's caps on a turn's messages, a
// session's messages and how far ahead its seq may be. The session's side
// is one read by key; the accountant checks again under the session's lock
// and is the authority (events still waiting are not counted here). A seq
// the session applied already is a retry or a late event: the accountant
// decides, so the session's size does not refuse it.
func (g *Gateway) checkBounds(ctx context.Context, tenant string, lim limits.Config, ev turn.Event) error {
	n := len(ev.InputMessages)
	if ev.Response != nil {
		n++
	}
	if lim.TurnMessages > 0 && n > lim.TurnMessages {
		return turn.Refuse(turn.ReasonTooManyMessages, "the turn has %d messages; the tenant's turn_messages limit is %d", n, lim.TurnMessages)
	}
	if lim.SeqWindow <= 0 && lim.SessionMessages <= 0 {
		return nil
	}
	p, err := g.store.SessionProgress(ctx, tenant, ev.SessionID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if lim.SeqWindow > 0 && ev.Seq > p.AppliedSeq+lim.SeqWindow {
		return turn.Refuse(turn.ReasonSeqTooFar, "seq %d is more than the tenant's seq_window of %d ahead of the session's applied seq %d", ev.Seq, lim.SeqWindow, p.AppliedSeq)
	}
	if limit := int64(lim.SessionMessages); limit > 0 && ev.Seq > p.AppliedSeq && p.MessageCount+int64(n) > limit {
		return turn.Refuse(turn.ReasonSessionFull, "the session holds %d messages; the turn's %d would pass the tenant's session_messages limit of %d", p.MessageCount, n, limit)
	}
	return nil
}

func (g *Gateway) refuse(ctx context.Context, w http.ResponseWriter, err error) {
	ie, ok := turn.AsInputError(err)
	if !ok {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	g.metrics.rejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", string(ie.Reason)), attribute.String("transport", "http")))
	status := http.StatusBadRequest
	switch ie.Reason {
	case turn.ReasonTooLarge:
		status = http.StatusRequestEntityTooLarge
		g.cfg.Limits.Record(ctx, limits.LimitEventBytes)
	case turn.ReasonTooManyMessages:
		status = http.StatusRequestEntityTooLarge
		g.cfg.Limits.Record(ctx, limits.LimitTurnMessages)
	case turn.ReasonSessionFull:
		status = http.StatusRequestEntityTooLarge
		g.cfg.Limits.Record(ctx, limits.LimitSessionMessages)
	case turn.ReasonSeqTooFar:
		g.cfg.Limits.Record(ctx, limits.LimitSeqWindow)
	case turn.ReasonTenantMismatch:
		status = http.StatusForbidden
	}
	writeError(w, status, string(ie.Reason), ie.Detail)
}

func (g *Gateway) getSession(w http.ResponseWriter, r *http.Request, tenant string) {
	s, set, ok := g.readSession(w, r, tenant)
	if !ok {
		return
	}
	state := sessionState(set, s)
	threads, sessions, err := g.store.SessionThreads(r.Context(), tenant, s.SessionID)
	if err != nil {
		g.internal(w, "reading the session's threads", err)
		return
	}
	state.Agents = agentThreads(threads, sessions)
	writeJSON(w, http.StatusOK, state)
}

// agentThreads describes a session's threads, each with its Mnemos
// session: the live one of each agent is the one written to last.
func agentThreads(threads []store.Thread, sessions []store.Session) []api.AgentThread {
	live := map[string]int{}
	for i, th := range threads {
		if j, ok := live[th.AgentID]; !ok || th.UpdatedAt.After(threads[j].UpdatedAt) {
			live[th.AgentID] = i
		}
	}
	out := make([]api.AgentThread, 0, len(threads))
	for i, th := range threads {
		a := api.AgentThread{
			AgentID: th.AgentID, Kind: th.Kind, Thread: th.ThreadID, Parent: th.Parent, Messages: th.Length,
			Tokens: sessions[i].TokenCount, State: sessions[i].State, Live: live[th.AgentID] == i, UpdatedAt: th.UpdatedAt,
		}
		if a.State == "" {
			a.State = "ok"
		}
		if th.Parent != "" {
			a.ForkPosition = &th.ForkPosition
		}
		out = append(out, a)
	}
	return out
}

// readSession reads the session of the request's path and its tenant's
// settings; ok false means an answer was written (400, 404 or 500).
func (g *Gateway) readSession(w http.ResponseWriter, r *http.Request, tenant string) (store.Session, tenantcfg.Settings, bool) {
	id, ok := g.pathID(w, r, sessionIDs)
	if !ok {
		return store.Session{}, tenantcfg.Settings{}, false
	}
	s, err := g.store.GetSession(r.Context(), tenant, id)
	if g.sessionFailed(w, r, id, "reading session", err) {
		return store.Session{}, tenantcfg.Settings{}, false
	}
	set, err := g.settings.For(r.Context(), tenant)
	if err != nil {
		g.internal(w, "reading tenant settings", err)
		return store.Session{}, tenantcfg.Settings{}, false
	}
	return s, set, true
}

// sessionFailed answers a request whose work on session id failed with
// err: 404 when the session does not exist, 500 otherwise, nothing when
// the client went away. It reports whether err was a failure.
func (g *Gateway) sessionFailed(w http.ResponseWriter, r *http.Request, id, doing string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "no session "+id)
	case r.Context().Err() == nil:
		g.internal(w, doing, err)
	}
	return true
}

// patchSession sets a session's switches and answers its state.
func (g *Gateway) patchSession(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := g.pathID(w, r, sessionIDs)
	if !ok {
		return
	}
	var p api.SessionPatch
	if err := decodeBody(http.MaxBytesReader(w, r.Body, 4<<10), &p); err != nil {
		writeError(w, http.StatusBadRequest, bodyErrorCode(err), "session patch: "+err.Error())
		return
	}
	if p.AutoCompactEnabled == nil {
		writeError(w, http.StatusBadRequest, "schema_violation", `session patch: name what to change ("auto_compact_enabled": true or false)`)
		return
	}
	err := g.store.InTx(r.Context(), tenant, func(tx *store.Tx) error {
		return tx.SetAutoCompact(r.Context(), id, *p.AutoCompactEnabled)
	})
	if !g.sessionFailed(w, r, id, "setting the session's switches", err) {
		g.getSession(w, r, tenant)
	}
}

func (g *Gateway) getPins(w http.ResponseWriter, r *http.Request, tenant string) {
	s, set, ok := g.readSession(w, r, tenant)
	if !ok {
		return
	}
	pins := s.Pins
	if pins == nil {
		pins = []string{}
	}
	writeJSON(w, http.StatusOK, api.Pins{Pins: pins, TenantPinned: set.Compaction.Pinned})
}

func (g *Gateway) putPins(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := g.pathID(w, r, sessionIDs)
	if !ok {
		return
	}
	var body api.PinsRequest
	if err := decodeBody(http.MaxBytesReader(w, r.Body, 2*tenantcfg.MaxPins*tenantcfg.MaxPinBytes), &body); err != nil {
		writeError(w, http.StatusBadRequest, bodyErrorCode(err), "pins: "+err.Error())
		return
	}
	if err := tenantcfg.CheckPins(body.Pins); err != nil {
		writeError(w, http.StatusBadRequest, "bad_pins", "pins: "+err.Error())
		return
	}
	err := g.store.InTx(r.Context(), tenant, func(tx *store.Tx) error { return tx.SetPins(r.Context(), id, body.Pins) })
	if !g.sessionFailed(w, r, id, "storing pins", err) {
		g.getPins(w, r, tenant)
	}
}

// preflightRequest is a preflight's body, with what the gateway reads of it.
type preflightRequest struct{ api.PreflightRequest }

// request is what the preflight says of the coming request.
func (req preflightRequest) request() accounting.Request {
	return accounting.Request{Model: req.Model, Prefix: req.RequestPrefix, ClientCompaction: req.ClientCompaction != nil}
}

// on is session s with the window and output the request names in place of
// the session's own; the model is accounting.Request's.
func (req preflightRequest) on(s store.Session) store.Session {
	if req.ContextWindow != 0 {
		s.ContextWindow = req.ContextWindow
	}
	if req.MaxOutputTokens != 0 {
		s.MaxOutputTokens = req.MaxOutputTokens
	}
	return s
}

// preflightBody is the answer to a preflight of count p, without a
// compaction.
func preflightBody(p accounting.Preflight) api.Preflight {
	return api.Preflight{Tokens: p.Tokens, CompactFirst: p.CompactFirst, Blocked: p.Blocked, CompactionInFlight: p.CompactionInFlight}
}

func (g *Gateway) preflight(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := g.pathID(w, r, sessionIDs)
	if !ok {
		return
	}
	var req preflightRequest
	if err := decodeBody(http.MaxBytesReader(w, r.Body, int64(g.cfg.MaxEventBytes)), &req); err != nil {
		writeError(w, http.StatusBadRequest, bodyErrorCode(err), "preflight body: "+err.Error())
		return
	}
	wait := g.cfg.ContextWait
	if req.CompactionWaitMs != nil {
		var err error
		if wait, err = waitMillis(*req.CompactionWaitMs); err != nil {
			writeError(w, http.StatusBadRequest, "bad_wait", "compaction_wait_ms: "+err.Error())
			return
		}
	}
	set, err := g.settings.For(r.Context(), tenant)
	if err != nil {
		g.internal(w, "reading tenant settings", err)
		return
	}
	stored, err := g.store.GetSession(r.Context(), tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		stored = store.Session{TenantID: tenant, SessionID: id, AutoCompactEnabled: true, State: string(tokens.StateOK)}
		// As the accountant will count its first turn: from the tenant's prior.
		if stored.EstimateFactor, stored.DenseFactor, err = g.store.EstimatePrior(r.Context(), tenant); err != nil {
			g.internal(w, "reading the tenant's calibration", err)
			return
		}
	} else if err != nil {
		g.internal(w, "reading session", err)
		return
	}
	s := req.on(stored)
	if req.ContextWindow != 0 || req.MaxOutputTokens != 0 {
		// Checked only when the request names one: a session's own
		// numbers came with its turns.
		model := s.Model
		if req.Model != "" {
			model = req.Model
		}
		if werr := set.Tokens.CheckWindow(model, s.ContextWindow, s.MaxOutputTokens); werr != nil {
			g.refuseRequest(w, r, http.StatusBadRequest, "bad_"+werr.Field, werr.Error())
			return
		}
	}
	if p := req.RequestPrefix; p != nil {
		if _, _, err := tokens.EstimatePrefix(*p); err != nil {
			g.refuseRequest(w, r, http.StatusBadRequest, "bad_request_prefix", "request_prefix: "+err.Error())
			return
		}
		if _, _, ok, _ := accounting.PrefixOf(stored, p); !ok {
			g.refuseRequest(w, r, http.StatusBadRequest, "unknown_prefix_hash",
				fmt.Sprintf("request_prefix names only hash %q, which is not the session's: send system and tools (or tokens or bytes) with it once", p.Hash))
			return
		}
	}
	count := func(s store.Session) (accounting.Preflight, error) { return g.countPreflight(r, tenant, set, req, s) }
	p, err := count(s)
	if err != nil {
		g.internal(w, "counting the preflight", err)
		return
	}
	out := preflightBody(p)
	if req.Compact && out.CompactFirst && !stored.CreatedAt.IsZero() {
		c, err := g.compactBeforeCall(r.Context(), tenant, id, wait, "")
		if err != nil {
			g.internal(w, "compacting before the call", err)
			return
		}
		if stored, err = g.store.GetSession(r.Context(), tenant, id); err != nil {
			g.internal(w, "reading session", err)
			return
		}
		if p, err = count(req.on(stored)); err != nil {
			g.internal(w, "counting the preflight", err)
			return
		}
		body := g.compactionBody(c)
		out = preflightBody(p)
		out.Compaction = &body
	}
	writeJSON(w, http.StatusOK, out)
}

// countPreflight counts req on session s as the accountant would, or, when
// the tenant asks for exact preflights and enough of the count is
// estimated, by the tenant's upstream (preflight_exact.go).
func (g *Gateway) countPreflight(r *http.Request, tenant string, set tenantcfg.Settings, req preflightRequest, s store.Session) (accounting.Preflight, error) {
	var estimate int64
	if req.request().ModelChanged(s) {
		var err error
		if estimate, err = g.store.ContextEstimate(r.Context(), tenant, s); err != nil {
			return accounting.Preflight{}, err
		}
	}
	s.AutoCompactEnabled = set.Compaction.Compacts(s) // compact_first only when the session compacts by itself
	f, err := accounting.ForecastWith(set.Tokens, set.Offload, s, req.request(), estimate, req.InputMessages)
	if err != nil {
		return accounting.Preflight{}, err
	}
	if share := set.Proxy.PreflightExactPercent; share > 0 && float64(f.Estimated())*100 >= share*float64(f.Count) {
		model := s.Model
		if req.Model != "" {
			model = req.Model
		}
		if exact, ok := g.exactPreflight(r.Context(), r, tenant, model, f, req.RequestPrefix); ok {
			return f.Preflight(exact), nil
		}
	}
	return f.Preflight(f.Count), nil
}

func (g *Gateway) getToolResult(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := g.pathID(w, r, toolResultIDs)
	if !ok {
		return
	}
	var tr store.ToolResult
	err := g.store.InTx(r.Context(), tenant, func(tx *store.Tx) error {
		var err error
		tr, err = tx.ToolResult(r.Context(), id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "not_found", "no tool result "+id)
		return
	}
	if err != nil {
		g.internal(w, "reading tool result", err)
		return
	}
	writeJSON(w, http.StatusOK, api.ToolResult{ID: tr.ID, SessionID: tr.SessionID, ToolUseID: tr.ToolUseID, SizeChars: tr.SizeChars, Content: tr.Content, CreatedAt: tr.CreatedAt})
}

// internal answers 500 for what failed with err, in Mnemos's dialect.
func (g *Gateway) internal(w http.ResponseWriter, what string, err error) {
	httpapi.Internal(w, httpapi.Mnemos, g.log, what, err)
}

// writeError answers an error in Mnemos's dialect.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	httpapi.Mnemos.WriteError(w, &httpapi.Error{Status: status, Code: code, Message: msg})
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) { httpapi.WriteJSON(w, status, v) }

type gatewayMetrics struct {
	ingested          metric.Int64Counter
	rejected          metric.Int64Counter
	contextBlocked    metric.Int64Counter
	microCleared      metric.Int64Counter
	microSaved        metric.Int64Counter
	cacheBreaks       metric.Int64Counter
	manualCompactions metric.Int64Counter
	edits             metric.Int64Counter
	editsSaved        metric.Int64Counter
	proxyRequests     metric.Int64Counter
	exactCounts       metric.Int64Counter
	preflightExact    metric.Int64Counter
}

func newMetrics(m metric.Meter) (gatewayMetrics, error) {
	var gm gatewayMetrics
	var err error
	if gm.ingested, err = m.Int64Counter("mnemos.turns.ingested", metric.WithDescription("Turn events accepted at the gateway.")); err != nil {
		return gm, err
	}
	if gm.rejected, err = m.Int64Counter("mnemos.turns.refused", metric.WithDescription("Turn events refused at the gateway, by reason.")); err != nil {
		return gm, err
	}
	if gm.contextBlocked, err = m.Int64Counter("mnemos.context.blocked", metric.WithDescription("Context requests refused because the session stayed at its blocking limit.")); err != nil {
		return gm, err
	}
	if gm.microCleared, err = m.Int64Counter("mnemos.microcompact.cleared", metric.WithDescription("Tool results cleared by micro-compaction.")); err != nil {
		return gm, err
	}
	if gm.microSaved, err = m.Int64Counter("mnemos.microcompact.tokens_saved", metric.WithDescription("Tokens micro-compaction took out of contexts.")); err != nil {
		return gm, err
	}
	if gm.cacheBreaks, err = m.Int64Counter("mnemos.context.cache_breaks", metric.WithDescription("Contexts that no longer start with the previous one, by kind: expected when a compaction or micro-compaction explains it, else unexpected.")); err != nil {
		return gm, err
	}
	if gm.manualCompactions, err = m.Int64Counter("mnemos.compactions.manual_requested", metric.WithDescription("Manual compactions requested through the API.")); err != nil {
		return gm, err
	}
	if gm.edits, err = m.Int64Counter("mnemos.context.edits", metric.WithDescription("What context-management edits cut, by kind: tool_result, tool_input, thinking (assistant messages).")); err != nil {
		return gm, err
	}
	if gm.proxyRequests, err = m.Int64Counter("mnemos.proxy.requests", metric.WithDescription("Messages API requests, by outcome: managed, passthrough (no session), unmanaged (fail-open), refused (not fail-open), new_agent, branched, client_compacted, retry, upstream_error, client_gone, unrecorded.")); err != nil {
		return gm, err
	}
	if gm.exactCounts, err = m.Int64Counter("mnemos.proxy.exact_counts", metric.WithDescription("count_tokens calls the proxy made near the auto-compact threshold (proxy.exact_count_within_percent), by outcome: over or under the estimate, failed (the estimate decided).")); err != nil {
		return gm, err
	}
	if gm.preflightExact, err = m.Int64Counter("mnemos.preflight.exact_counts", metric.WithDescription("Preflights whose estimated part the tenant's upstream counted (proxy.preflight_exact_percent), by outcome: over or under the estimate, failed (the estimate was answered).")); err != nil {
		return gm, err
	}
	if gm.editsSaved, err = m.Int64Counter("mnemos.context.edits.tokens_saved", metric.WithDescription("Tokens context-management edits took out of contexts.")); err != nil {
		return gm, err
	}
	return gm, nil
}

// Memories is the memory store the API writes through; the console
// (services/console) shares it so its restores count and check alike.
func (g *Gateway) Memories() *memory.Store { return g.memories }

// Dreams is the dream service the API approves through, shared with the console.
func (g *Gateway) Dreams() *dream.Dreams { return g.dreams }

// Keys resolves API keys to tenants, shared with the console's sign-in so
// that both count an address's failures alike.
func (g *Gateway) Keys() *httpapi.Keys { return g.keys }
