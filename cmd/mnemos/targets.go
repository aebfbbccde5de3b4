package main

import (
	"context"
	"log/slog"
	"net/http"
	"sync"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/search"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/telemetry"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/console"
	"github.com/mnemos-ai/mnemos/services/dreamer"
	"github.com/mnemos-ai/mnemos/services/embedder"
	"github.com/mnemos-ai/mnemos/services/extractor"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
	"github.com/mnemos-ai/mnemos/services/recallprefetch"
	"github.com/mnemos-ai/mnemos/services/sessionmemory"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// deps is what targets are built from, made once per process before any
// target starts. provider and recaller are built only when a target of the
// process needs them.
type deps struct {
	cfg      Config
	log      *slog.Logger
	metrics  *telemetry.Metrics
	store    *store.Store
	bus      *bus.Bus
	settings *tenantcfg.Cache
	// defaults are the settings a tenant's stored ones overlay.
	defaults tenantcfg.Settings
	limiter  *limits.Limiter
	// provider is the guarded model provider, llmName the raw one's name.
	provider llm.Provider
	llmName  string
	recaller *recall.Recaller
	// mux is the API port's routes.
	mux *http.ServeMux
	// heavy are the process's slots for CPU-heavy work, shared by the
	// gateway and the accountant.
	heavy cpu.Heavy
	// api is the HTTP API the gateway and proxy targets serve parts of,
	// built once by the first of them (httpAPI) with apiCfg.
	api    *gateway.Gateway
	apiCfg gateway.Config
	// embedClient talks to the embeddings endpoint, built by the first
	// target that embeds (embedder); nil while embeddings are off.
	embedClient *embed.OpenAI
}

// target is one entry of the target table: its name, what it needs beyond
// the store and the bus, and how it starts. start builds the target's
// service and returns its run loop (nil for a target that only serves HTTP).
type target struct {
	name        string
	needsModel  bool
	needsRecall bool
	// configured, when set, says whether the deployment configured what
	// the target needs; -target=all leaves it out when not.
	configured func(c Config) bool
	start      func(d *deps) (run func(context.Context) error, err error)
}

// targetTable lists every target in the order they start. -target=all runs
// them all in one process; -target=NAME runs that one. Every process also
// runs the outbox relay: each target writes events through the outbox.
var targetTable = []target{
	{name: TargetTokenAccounting, start: startTokenAccounting},
	{name: TargetCompactor, needsModel: true, start: startCompactor},
	{name: TargetSessionMemory, needsModel: true, start: startSessionMemory},
	{name: TargetExtractor, needsModel: true, start: startExtractor},
	{name: TargetRecall, needsModel: true, needsRecall: true, start: startRecall},
	{name: TargetDreamer, needsModel: true, start: startDreamer},
	{name: TargetGateway, needsModel: true, needsRecall: true, start: startGateway},
	{name: TargetProxy, start: startProxy},
	{name: TargetEmbedder, configured: func(c Config) bool { return c.Embed.Enabled() }, start: startEmbedder},
}

// selectTargets returns the table entries cfg.Target runs: -target=all
// runs every target whose needs are configured.
func selectTargets(cfg Config) []target {
	var out []target
	for _, t := range targetTable {
		switch {
		case cfg.Target == t.name:
			out = append(out, t)
		case cfg.Target == TargetAll && (t.configured == nil || t.configured(cfg)):
			out = append(out, t)
		}
	}
	return out
}

// targetNames lists every value -target takes.
func targetNames() []string {
	names := []string{TargetAll}
	for _, t := range targetTable {
		names = append(names, t.name)
	}
	return names
}

func (d *deps) logFor(name string) *slog.Logger { return d.log.With("service", name) }

// The services' configurations: their defaults, and what the process's
// configuration sets.

func tokenAccountingConfig(c Config) tokenaccounting.Config {
	cfg := tokenaccounting.DefaultConfig()
	cfg.MaxEventBytes, cfg.GapTimeout = c.MaxEventBytes, c.GapTimeout
	cfg.Workers, cfg.MaxDeliver = c.TokenAccounting.Workers, c.TokenAccounting.MaxDeliver
	cfg.Batch, cfg.Lanes, cfg.HeldBytes = c.AccountingBatch, c.AccountingLanes, c.AccountingHeldBytes
	cfg.SessionsCountInterval = c.GaugeInterval
	return cfg
}

func compactorConfig(c Config) compactor.Config {
	cfg := compactor.DefaultConfig()
	cfg.Workers, cfg.MaxDeliver, cfg.Lease = c.Compactor.Workers, c.Compactor.MaxDeliver, c.CompactionLease
	return cfg
}

func sessionMemoryConfig(c Config) sessionmemory.Config {
	cfg := sessionmemory.DefaultConfig()
	cfg.Workers, cfg.MaxDeliver, cfg.Lease = c.SessionMemory.Workers, c.SessionMemory.MaxDeliver, c.SessionMemoryLease
	return cfg
}

func extractorConfig(c Config) extractor.Config {
	cfg := extractor.DefaultConfig()
	cfg.Workers, cfg.MaxDeliver, cfg.Lease = c.Extractor.Workers, c.Extractor.MaxDeliver, c.ExtractorLease
	return cfg
}

func recallConfig(c Config) recallprefetch.Config {
	cfg := recallprefetch.DefaultConfig()
	cfg.Workers, cfg.MaxDeliver = c.Recall.Workers, c.Recall.MaxDeliver
	return cfg
}

func dreamerConfig(c Config) dreamer.Config {
	cfg := dreamer.DefaultConfig()
	cfg.Workers, cfg.MaxDeliver = c.Dreamer.Workers, c.Dreamer.MaxDeliver
	return cfg
}

func embedderConfig(c Config) embedder.Config {
	cfg := embedder.DefaultConfig()
	cfg.Workers, cfg.MaxDeliver = c.Embedder.Workers, c.Embedder.MaxDeliver
	return cfg
}

// embedderFor is the embeddings endpoint, its calls counted as purpose's
// (embed.PurposeIndex, embed.PurposeQuery) under target's meter; nil while
// embeddings are off.
func (d *deps) embedderFor(target, purpose string) (embed.Embedder, error) {
	if !d.cfg.Embed.Enabled() {
		return nil, nil
	}
	if d.embedClient == nil {
		c, err := embed.NewOpenAI(d.cfg.Embed)
		if err != nil {
			return nil, err
		}
		d.embedClient = c
	}
	return embed.Metered(d.embedClient, d.metrics.Meter(target), purpose)
}

// startEmbedder runs the embedder, or, without an endpoint, idles: a
// deployment may run the target before it configures one.
func startEmbedder(d *deps) (func(context.Context) error, error) {
	e, err := d.embedderFor(TargetEmbedder, embed.PurposeIndex)
	if err != nil {
		return nil, err
	}
	if e == nil {
		d.logFor(TargetEmbedder).Warn("embeddings are off (MNEMOS_EMBED_BASE_URL is not set): the embedder has nothing to do")
		return func(ctx context.Context) error { <-ctx.Done(); return nil }, nil
	}
	svc, err := embedder.New(embedderConfig(d.cfg), d.store, d.bus, e, d.logFor(TargetEmbedder), d.metrics.Meter(TargetEmbedder))
	if err != nil {
		return nil, err
	}
	return svc.Run, nil
}

func startTokenAccounting(d *deps) (func(context.Context) error, error) {
	cfg := tokenAccountingConfig(d.cfg)
	cfg.Limits = d.limiter
	cfg.Heavy = d.heavy
	svc, err := tokenaccounting.New(cfg, d.store, d.bus, d.settings, d.logFor(TargetTokenAccounting), d.metrics.Meter(TargetTokenAccounting))
	if err != nil {
		return nil, err
	}
	return svc.Run, nil
}

func startCompactor(d *deps) (func(context.Context) error, error) {
	svc, err := compactor.New(compactorConfig(d.cfg), d.store, d.bus, d.settings, d.provider, d.logFor(TargetCompactor), d.metrics.Meter(TargetCompactor))
	if err != nil {
		return nil, err
	}
	return svc.Run, nil
}

func startSessionMemory(d *deps) (func(context.Context) error, error) {
	svc, err := sessionmemory.New(sessionMemoryConfig(d.cfg), d.store, d.bus, d.settings, d.provider, d.logFor(TargetSessionMemory), d.metrics.Meter(TargetSessionMemory))
	if err != nil {
		return nil, err
	}
	return svc.Run, nil
}

func startExtractor(d *deps) (func(context.Context) error, error) {
	svc, err := extractor.New(extractorConfig(d.cfg), d.store, d.bus, d.settings, d.provider, d.logFor(TargetExtractor), d.metrics.Meter(TargetExtractor))
	if err != nil {
		return nil, err
	}
	return svc.Run, nil
}

func startRecall(d *deps) (func(context.Context) error, error) {
	svc, err := recallprefetch.New(recallConfig(d.cfg), d.bus, d.recaller, d.logFor(TargetRecall))
	if err != nil {
		return nil, err
	}
	return svc.Run, nil
}

func startDreamer(d *deps) (func(context.Context) error, error) {
	svc, err := dreamer.New(dreamerConfig(d.cfg), d.store, d.bus, d.settings, d.provider, d.logFor(TargetDreamer), d.metrics.Meter(TargetDreamer), dreamer.Options{})
	if err != nil {
		return nil, err
	}
	return svc.Run, nil
}

// httpAPI is the process's HTTP API, built by the first target that
// serves part of it (named by target in its logs and metrics): in one
// process the gateway and the proxy share its keys, admission and context
// caches.
func (d *deps) httpAPI(target string) (*gateway.Gateway, gateway.Config, error) {
	if d.api != nil {
		return d.api, d.apiCfg, nil
	}
	cfg := gateway.DefaultConfig()
	cfg.MaxEventBytes = d.cfg.MaxEventBytes
	cfg.ContextWait = d.cfg.ContextWait
	cfg.LLMProvider = d.llmName
	cfg.Limits = d.limiter
	cfg.MaxInflightBytes = d.cfg.MaxInflightBytes
	cfg.ContextCacheBytes = d.cfg.ContextCacheBytes
	cfg.Upstream = d.cfg.Upstream
	cfg.UpstreamOpenAI = d.cfg.UpstreamOpenAI
	cfg.Prices = d.cfg.LLMPrices
	cfg.Heavy = d.heavy
	cfg.Recall = d.recaller
	cfg.Retention.Interval = d.cfg.RetentionInterval
	log := d.logFor(target)
	meter := d.metrics.Meter(target)
	// With embeddings, search fuses its lexical ranking with the vectors'.
	e, err := d.embedderFor(target, embed.PurposeQuery)
	if err != nil {
		return nil, cfg, err
	}
	if e != nil {
		if cfg.Search, err = search.New(d.store, meter); err != nil {
			return nil, cfg, err
		}
		cfg.Search.KeepVectors(int64(d.cfg.EmbedCacheMB) << 20)
		cfg.Search.UseRanker(cfg.Search.Hybrid(e, log))
	}
	// The console shares the gateway's domain services: its restores count
	// and check as the API's writes do, its sign-in counts an address's
	// failed keys with the API's.
	cfg, err = gateway.WithServices(cfg, d.store, d.settings, log, meter)
	if err != nil {
		return nil, cfg, err
	}
	gw, err := gateway.New(cfg, d.store, d.bus, d.settings, log, meter)
	if err != nil {
		return nil, cfg, err
	}
	d.api, d.apiCfg = gw, cfg
	return gw, cfg, nil
}

func startGateway(d *deps) (func(context.Context) error, error) {
	gw, cfg, err := d.httpAPI(TargetGateway)
	if err != nil {
		return nil, err
	}
	gw.RegisterAPI(d.mux)
	con, err := console.New(console.Config{
		Store: d.store, Settings: d.settings, Memories: cfg.Memories, Dreams: cfg.Dreams, Search: cfg.Search,
		Keys: cfg.Keys, Eraser: gw.Eraser(), Secret: []byte(d.cfg.ConsoleSecret), Log: d.logFor(TargetGateway).With("part", "console"),
	})
	if err != nil {
		return nil, err
	}
	con.Register(d.mux)
	listen := listenKeys(cfg.Keys)
	// The gateway finishes the erasures cut short (a crash mid-way), and
	// enforces retention: its idle sessions go through the same erasures,
	// which the erasure sweep beside it finishes when cut short.
	return func(ctx context.Context) error {
		var wg sync.WaitGroup
		defer wg.Wait()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wg.Go(func() { _ = listen(ctx) })
		wg.Go(func() { _ = gw.RunRetention(ctx) })
		return gw.RunErasures(ctx)
	}, nil
}

// listenKeys runs while the process serves: it hears of API keys revoked
// anywhere (once a process, whichever of its targets asks first).
func listenKeys(keys *httpapi.Keys) func(context.Context) error {
	return func(ctx context.Context) error {
		keys.Listen(ctx)
		return nil
	}
}

func startProxy(d *deps) (func(context.Context) error, error) {
	gw, cfg, err := d.httpAPI(TargetProxy)
	if err != nil {
		return nil, err
	}
	gw.RegisterProxy(d.mux)
	listen := listenKeys(cfg.Keys)
	// Stopped after the HTTP server (runUntilDone): the rounds the proxy
	// answered are recorded before the process ends.
	return func(ctx context.Context) error {
		_ = listen(ctx)
		gw.Drain()
		return nil
	}, nil
}
