// Package gateway is Mnemos's HTTP API, one listener whose route groups
// are packages of their own: ingest (turn events), sessions (lists, state,
// pins, usage, tool results, notes), contextapi (the context, its edits,
// compactions, pre-flight counts, recall), memoryapi (memories and
// dreams), searchapi (a scope's ranked search), mcpapi (the MCP server) and proxy (the model proxy), on what
// httpapi gives them all (keys, admission, errors). The tenant of every
// request comes from its API key.
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/retain"
	"github.com/mnemos-ai/mnemos/pkg/search"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/contextapi"
	"github.com/mnemos-ai/mnemos/services/gateway/erasureapi"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
	"github.com/mnemos-ai/mnemos/services/gateway/ingest"
	"github.com/mnemos-ai/mnemos/services/gateway/keysapi"
	"github.com/mnemos-ai/mnemos/services/gateway/mcpapi"
	"github.com/mnemos-ai/mnemos/services/gateway/memoryapi"
	"github.com/mnemos-ai/mnemos/services/gateway/proxy"
	"github.com/mnemos-ai/mnemos/services/gateway/searchapi"
	"github.com/mnemos-ai/mnemos/services/gateway/sessions"
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
	// flight expect to hold (httpapi.Admission); 0 means no budget.
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

	// Upstream is where POST /v1/messages sends requests (package proxy);
	// UpstreamClient sends them (it must not time out a long stream);
	// MaxMessagesBytes bounds a request's body.
	Upstream         proxy.Upstream
	UpstreamClient   *http.Client
	MaxMessagesBytes int64
	// UpstreamOpenAI is where the OpenAI routes go for tenants without an
	// OpenAI upstream of their own.
	UpstreamOpenAI proxy.Upstream
	// Prices is the process's price table, beneath each tenant's own, by
	// which the proxy prices the agent's rounds (llm.DefaultPrices when
	// nil).
	Prices llm.Prices

	// Memories, Dreams and Keys are the domain services the gateway serves,
	// shared with the console so that both count and check alike; New
	// builds its own when they are nil.
	Memories *memory.Store
	Dreams   *dream.Dreams
	Keys     *httpapi.Keys
	// Search ranks a scope's memories and messages for the search route,
	// MCP's search_past_context and the console.
	Search *search.Searcher
	// Recall answers recall (POST /v1/sessions/{id}/recall and MCP's tool);
	// nil answers that this process serves none.
	Recall *recall.Recaller
	// Erasure configures the erasures of sessions and scopes and their
	// sweep (RunErasures).
	Erasure erasure.Config
	// Retention configures the sweep that enforces the tenants' retention
	// settings (RunRetention).
	Retention retain.Config
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
		MaxMessagesBytes: proxy.DefaultMaxMessagesBytes,
	}
}

// Gateway serves the HTTP API: its route groups, built on one set of keys
// and one admission.
type Gateway struct {
	admission *httpapi.Admission
	ingest    *ingest.Handler
	sessions  *sessions.Handler
	contexts  *contextapi.Handler
	memories  *memoryapi.Handler
	mcp       *mcpapi.Handler
	search    *searchapi.Handler
	proxy     *proxy.Handler
	keys      *keysapi.Handler
	erasures  *erasureapi.Handler
	eraser    *erasure.Eraser
	retention *retain.Sweeper
}

// New builds the gateway; settings gives each tenant's thresholds. meter may be nil.
func New(cfg Config, st *store.Store, b *bus.Bus, settings *tenantcfg.Cache, log *slog.Logger, meter metric.Meter) (*Gateway, error) {
	meter = defaults.Meter(meter)
	fail := func(err error) (*Gateway, error) { return nil, fmt.Errorf("gateway.New: %w", err) }
	cfg, err := WithServices(cfg, st, settings, log, meter)
	if err != nil {
		return fail(err)
	}
	base := httpapi.Base{Keys: cfg.Keys, Log: log}
	g := &Gateway{
		admission: httpapi.NewAdmission(httpapi.AdmissionConfig{
			MaxInflightBytes: cfg.MaxInflightBytes, HeavyRequests: cfg.HeavyRequests, HeavyBytes: cfg.HeavyBytes, HeavyWait: cfg.HeavyWait, Heavy: cfg.Heavy,
		}, concurrentRequests(settings), cfg.Limits, log),
		mcp:    mcpapi.New(base, st, settings, cfg.Memories, cfg.Recall, cfg.Search),
		search: searchapi.New(base, cfg.Search),
		keys:   keysapi.New(base, st, cfg.Now),
	}
	g.memories = memoryapi.New(base, g.admission, cfg.Memories, cfg.Dreams, settings)
	g.sessions = sessions.New(sessions.Config{Now: cfg.Now, HeavyWork: cfg.HeavyWork, HeavyRest: cfg.HeavyRest}, base, g.admission, st, settings)
	// The eraser tells the retention sweep of every erasure it finishes,
	// so that a session retention erased is counted once, by the process
	// that finished it.
	erasureCfg, finished := cfg.Erasure, cfg.Erasure.Finished
	erasureCfg.Finished = func(ctx context.Context, er store.Erasure) {
		if finished != nil {
			finished(ctx, er)
		}
		g.retention.Finished(ctx, er)
	}
	// A tenant's erasure purges its events from the bus's streams.
	var streams erasure.Streams
	if b != nil {
		streams = b
	}
	g.eraser = erasure.New(erasureCfg, st, streams, log.With("part", "erasure"))
	g.erasures = erasureapi.New(base, g.eraser)
	if g.retention, err = retain.New(cfg.Retention, st, settings, g.eraser, log.With("part", "retention"), meter); err != nil {
		return fail(err)
	}
	if g.ingest, err = ingest.New(ingest.Config{MaxEventBytes: cfg.MaxEventBytes, Limits: cfg.Limits}, base, g.admission, st, b, settings, meter); err != nil {
		return fail(err)
	}
	g.contexts, err = contextapi.New(contextapi.Config{
		ContextWait: cfg.ContextWait, PollInterval: cfg.PollInterval, LLMProvider: cfg.LLMProvider, Now: cfg.Now,
		MaxPreflightBytes: int64(cfg.MaxEventBytes), HeavyWork: cfg.HeavyWork, HeavyRest: cfg.HeavyRest, ContextCacheBytes: cfg.ContextCacheBytes,
	}, base, g.admission, st, settings, meter)
	if err != nil {
		return fail(err)
	}
	g.contexts.UseRecall(cfg.Recall)
	g.proxy, err = proxy.New(proxy.Config{
		Upstream: cfg.Upstream, UpstreamClient: cfg.UpstreamClient, MaxMessagesBytes: cfg.MaxMessagesBytes, UpstreamOpenAI: cfg.UpstreamOpenAI,
		ContextWait: cfg.ContextWait, UpstreamCacheTTL: cfg.KeyCacheTTL, Ledger: ledgerOf(cfg, st, settings),
	}, base, g.admission, st, settings, g.contexts, meter)
	if err != nil {
		return fail(err)
	}
	g.contexts.UseExactCounts(g.proxy)
	if err := g.observeInflight(meter); err != nil {
		return fail(err)
	}
	return g, nil
}

// WithServices is cfg with the domain services it lacks built over st:
// the memory store, the dreams, the search, the API keys. A process builds them once
// and shares them with the console, so that both count and check alike.
func WithServices(cfg Config, st *store.Store, settings *tenantcfg.Cache, log *slog.Logger, meter metric.Meter) (Config, error) {
	meter = defaults.Meter(meter)
	var err error
	if cfg.Memories == nil {
		if cfg.Memories, err = memory.NewStore(st, meter, memory.Options{Now: cfg.Now, Limits: settings.MemoryLimits}); err != nil {
			return cfg, err
		}
	}
	if cfg.Dreams == nil {
		cfg.Dreams = dream.New(st, cfg.Memories, cfg.Now)
	}
	if cfg.Search == nil {
		if cfg.Search, err = search.New(st, meter); err != nil {
			return cfg, err
		}
	}
	if cfg.Keys == nil {
		keys := httpapi.KeysConfig{CacheTTL: cfg.KeyCacheTTL, Failures: cfg.KeyFailures, FailureWindow: cfg.KeyFailureWindow, Now: cfg.Now}
		if cfg.Keys, err = httpapi.NewKeys(keys, st, cfg.Limits, log, meter); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// Register adds every route to mux: Mnemos's API, the model proxy's and
// the answer to a /v1 path no route takes.
func (g *Gateway) Register(mux httpapi.Mux) {
	g.RegisterAPI(mux)
	g.RegisterProxy(mux)
	httpapi.RegisterCatchAll(mux)
}

// RegisterAPI adds Mnemos's own API to mux (the gateway target). Each route
// is described in api/openapi.yaml, which GET /openapi.json serves.
func (g *Gateway) RegisterAPI(mux httpapi.Mux) {
	g.ingest.Register(mux)
	g.sessions.Register(mux)
	g.contexts.Register(mux)
	g.memories.Register(mux)
	g.mcp.Register(mux)
	g.search.Register(mux)
	g.keys.Register(mux)
	g.erasures.Register(mux)
	mux.Handle("GET /openapi.json", api.Handler())
}

// RunErasures finishes, until ctx ends, the erasures whose worker stopped
// before they were done (a crash, a client gone): at start and then
// periodically (erasure.Eraser.Run).
func (g *Gateway) RunErasures(ctx context.Context) error { return g.eraser.Run(ctx) }

// Eraser is the gateway's eraser, for the console's erasures.
func (g *Gateway) Eraser() *erasure.Eraser { return g.eraser }

// RunRetention enforces, until ctx ends, the tenants' retention settings:
// a sweep every Config.Retention.Interval (retain.Sweeper.Run).
func (g *Gateway) RunRetention(ctx context.Context) error { return g.retention.Run(ctx) }

// SweepRetention runs one retention sweep now.
func (g *Gateway) SweepRetention(ctx context.Context) (retain.Result, error) {
	return g.retention.Sweep(ctx)
}

// RegisterProxy adds the model proxy's routes to mux (the proxy target):
// it renders the sessions it manages with the same context service.
func (g *Gateway) RegisterProxy(mux httpapi.Mux) { g.proxy.Register(mux) }

// UseRecall serves recall with r: the API's route and MCP's tool.
func (g *Gateway) UseRecall(r *recall.Recaller) {
	g.contexts.UseRecall(r)
	g.mcp.UseRecall(r)
}

// Drain waits for the proxy's round records of the answers given: called
// after the HTTP server stops, so they are recorded before the process ends.
func (g *Gateway) Drain() { g.proxy.Drain() }

// concurrentRequests reads a tenant's limit of expensive requests in
// flight from its settings.
func concurrentRequests(settings *tenantcfg.Cache) func(context.Context, string) (int, error) {
	return func(ctx context.Context, tenant string) (int, error) {
		set, err := settings.For(ctx, tenant)
		return set.Limits.ConcurrentRequests, err
	}
}

// observeInflight reports the bytes in flight on a gauge.
func (g *Gateway) observeInflight(m metric.Meter) error {
	_, err := m.Int64ObservableGauge("mnemos.gateway.inflight_bytes",
		metric.WithDescription("Bytes the gateway's requests in flight expect to hold, against MNEMOS_MAX_INFLIGHT_BYTES."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(g.admission.Inflight())
			return nil
		}))
	return err
}

// ledgerOf is the ledger the proxy prices the agent's rounds in, at the
// process's prices beneath each tenant's.
func ledgerOf(cfg Config, st *store.Store, settings *tenantcfg.Cache) *llmledger.Ledger {
	if cfg.Prices == nil {
		return llmledger.New(st, settings)
	}
	return llmledger.New(st, settings, llmledger.WithPrices(cfg.Prices))
}
