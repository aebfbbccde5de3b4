package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/faults"
	"github.com/mnemos-ai/mnemos/pkg/health"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/llm/providers"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/memlimit"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/consolidate"
	"github.com/mnemos-ai/mnemos/pkg/memory/extraction"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/natsembed"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/telemetry"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/console"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
	"github.com/mnemos-ai/mnemos/services/natsauth"
	"github.com/mnemos-ai/mnemos/services/operatorapi"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"
)

// runner is a service's run loop: it returns when ctx ends and its work is drained.
type runner struct {
	name string
	run  func(context.Context) error
}

// serve runs cfg.Target until ctx ends.
func serve(ctx context.Context, cfg Config, stdout io.Writer) error {
	log := newLogger(cfg)
	log.Info("starting mnemos", "config", cfg)
	banner := func(format string, args ...any) { fmt.Fprintf(stdout, format+"\n", args...) }

	// The listen addresses first: a second instance (a second `make run`)
	// fails here, before it migrates or opens the embedded NATS's store.
	lns, err := listenAll(ctx, []listener{
		{"admin", cfg.AdminAddr, "MNEMOS_ADMIN_ADDR"},
		{"http", cfg.HTTPAddr, "MNEMOS_HTTP_ADDR"},
	})
	if err != nil {
		return err
	}
	defer func() {
		for _, ln := range lns {
			_ = ln.Close() // served ones are closed already; the others were never used
		}
	}()
	applyMemoryLimit(log)

	// =========================================================================
	// Telemetry

	metrics, err := telemetry.NewMetrics(cfg.Target)
	if err != nil {
		return err
	}
	defer metrics.Shutdown(context.WithoutCancel(ctx)) //nolint:errcheck // nothing to flush to: Prometheus pulls
	tracing, err := telemetry.NewTracing(ctx, cfg.Trace)
	if err != nil {
		return err
	}
	defer func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(flushCtx); err != nil {
			log.Warn("flushing spans", "err", err)
		}
	}()
	tp := tracing.Provider()
	banner("tracing       %s", cfg.Trace)

	// =========================================================================
	// Postgres

	st, err := openStore(ctx, cfg, store.NewTracer(tp), log, banner)
	if err != nil {
		return err
	}
	defer st.Close()

	// =========================================================================
	// NATS JetStream

	bcfg := bus.Config{
		URL: cfg.NATSURL, Name: "mnemos-" + cfg.Target, Namespace: cfg.Namespace, Replicas: cfg.StreamReplicas,
		TracerProvider: tp, Meter: metrics.Meter("bus"), ConsumerInfoInterval: cfg.GaugeInterval, Logger: log,
		DuplicateWindow: cfg.NATSDuplicateWindow,
	}
	if crash := faults.NewCrash(cfg.CrashAfterCommit, crashExit(log, "after commit")); crash != nil {
		bcfg.AfterHandled = crash.Hit
	}
	b, embedded, closeBus, err := connectBus(ctx, cfg, bcfg, st, log, banner)
	if err != nil {
		return err
	}
	defer closeBus()
	if err := ensureDevTenant(ctx, cfg, st, banner); err != nil {
		return err
	}

	// =========================================================================
	// Services

	selected := selectTargets(cfg)
	d, err := newDeps(cfg, log, metrics, st, b, tp, selected, banner)
	if err != nil {
		return err
	}
	ocfg := outbox.DefaultConfig()
	ocfg.Meter, ocfg.BacklogInterval = metrics.Meter("outbox"), cfg.GaugeInterval
	if crash := faults.NewCrash(cfg.CrashAfterPublish, crashExit(log, "after publish")); crash != nil {
		ocfg.AfterPublish = func() { crash.Hit("outbox-relay") }
	}
	runs := []runner{{"outbox-relay", outbox.New(ocfg, st, b, log.With("service", "outbox-relay")).Run}}
	status := map[string]string{}
	for _, t := range selected {
		run, err := t.start(d)
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if run != nil {
			runs = append(runs, runner{t.name, run})
		}
		status[t.name] = "running"
	}
	if cfg.Target == TargetAll && !cfg.Embed.Enabled() {
		banner("embeddings    off: search ranks lexically (set MNEMOS_EMBED_BASE_URL to run the embedder)")
	}
	if d.api != nil {
		httpapi.RegisterCatchAll(d.mux) // a /v1 path no target's route takes
	}
	if cfg.NATSAuthCallout != "" {
		run, err := natsAuth(d, embedded)
		if err != nil {
			return fmt.Errorf("nats auth callout: %w", err)
		}
		runs = append(runs, runner{"nats-auth", run})
		banner("nats auth     tenants' publishers connect with an API key holding ingest (auth callout, account %s)", cfg.NATSAuthAccount)
	}

	// =========================================================================
	// HTTP: the API port serves the API and the probes load balancers send;
	// operator routes are on the admin listener only (/metrics names every
	// tenant).

	checks := map[string]health.Check{
		"postgres": st.Ping,
		"nats": func(context.Context) error {
			if !b.Conn().IsConnected() {
				return errors.New("not connected")
			}
			return nil
		},
	}
	health.Register(d.mux, checks, status)
	operator := operatorAPI(d)
	servers := []server{
		{"admin", httpServer(adminMux(metrics.Handler(), checks, status, operator)), lns[0]},
		{"http", httpServer(telemetry.HTTPHandler(d.mux, tp, metrics.MeterProvider())), lns[1]},
	}
	banner("%-13s http://%s %s", "admin", displayAddr(lns[0].Addr()), "(/admin/v1/ with an operator key, /metrics, /debug/pprof/, /healthz, /readyz)")
	if _, ok := status[TargetGateway]; ok { // before the API's line, which tests wait for
		banner("%-13s http://%s%s %s", "console", displayAddr(lns[1].Addr()), console.Prefix, "(sign in with an API key)")
	}
	banner("%-13s http://%s %s", "http", displayAddr(lns[1].Addr()), "(API, /healthz, /readyz)")
	for _, name := range sortedKeys(status) {
		banner("target        %-16s %s", name, status[name])
	}
	return runUntilDone(ctx, log, runs, servers)
}

// defaultGCPercent is the garbage collector's target unless GOGC is set.
// A large request allocates fast; at the runtime's default of 100 its
// collections take a core's share from every other tenant's requests.
// GOMEMLIMIT (from the container's limit) bounds the heap all the same.
const defaultGCPercent = 400

// applyMemoryLimit sets GOMEMLIMIT from the container's memory limit unless
// it is set, and the collector's target unless GOGC is. The runtime reads
// both from the process's real environment, so this does too.
func applyMemoryLimit(log *slog.Logger) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	switch mem, err := memlimit.Apply("/", os.Getenv); {
	case err != nil:
		log.Warn("no memory limit set: reading the container's", "err", err)
	case mem.Set > 0:
		log.Info("GOMEMLIMIT set from the container's memory limit", "gomemlimit", mem.Set, "container_limit", mem.Container.Bytes, "file", "/"+mem.Container.File)
	}
}

// openStore migrates when the target is to, and connects as the services' role.
func openStore(ctx context.Context, cfg Config, tracer pgx.QueryTracer, log *slog.Logger, banner func(string, ...any)) (*store.Store, error) {
	dbs, err := resolveDatabases(ctx, cfg, localDatabaseURL)
	if err != nil {
		return nil, err
	}
	migrated := "not run by this target"
	if cfg.Migrate {
		if err := migrateSchema(ctx, dbs, log); err != nil {
			return nil, err
		}
		migrated = "applied as " + userOf(dbs.owner)
	}
	st, err := openServicesStore(ctx, dbs, cfg.DatabaseMaxConns, tracer)
	if err != nil {
		return nil, err
	}
	banner("postgres      %s (row-level security on; migrations %s)", store.Redact(dbs.app), migrated)
	return st, nil
}

// connectBus connects to MNEMOS_NATS_URL, or to a NATS server embedded in
// the process (embedded), and makes sure the streams exist. close closes
// the bus and the embedded server.
func connectBus(ctx context.Context, cfg Config, bcfg bus.Config, st *store.Store, log *slog.Logger, banner func(string, ...any)) (b *bus.Bus, embedded *natsembed.Server, closeAll func(), err error) {
	shutdown := func() {}
	if cfg.NATSURL == "" {
		storeDir, err := embeddedStoreDir(ctx, cfg.NATSStoreDir, st)
		if err != nil {
			return nil, nil, nil, err
		}
		// The embedded server opens no port unless asked: a local process
		// that could reach it would read and publish every tenant's turns.
		nopts := natsembed.Options{StoreDir: storeDir}
		if nopts.SyncInterval, nopts.SyncAlways, err = natsSync(cfg.NATSSync); err != nil {
			return nil, nil, nil, err
		}
		if cfg.NATSListen != "" {
			host, port, err := net.SplitHostPort(cfg.NATSListen)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("MNEMOS_NATS_LISTEN: %w", err)
			}
			nopts.Listen, nopts.Host = true, host
			if nopts.Port, err = strconv.Atoi(port); err != nil {
				return nil, nil, nil, fmt.Errorf("MNEMOS_NATS_LISTEN: port %q: %w", port, err)
			}
		}
		if cfg.NATSAuthCallout != "" {
			issuer, err := natsAuthIssuer(cfg.NATSAuthCallout)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("MNEMOS_NATS_AUTH_CALLOUT: %w", err)
			}
			if nopts.AuthCalloutIssuer, err = issuer.PublicKey(); err != nil {
				return nil, nil, nil, fmt.Errorf("MNEMOS_NATS_AUTH_CALLOUT: %w", err)
			}
		}
		ns, err := natsembed.Start(nopts)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("natsembed.Start: %w", err)
		}
		shutdown, embedded = ns.Shutdown, ns
		bcfg.URL, bcfg.InProcess = ns.ClientURL(), ns
		where := "in-process"
		if ns.Addr() != "" {
			where = "in-process and on nats://" + ns.Addr() + " (credentials generated at start, not shown)"
		}
		banner("nats          %s (embedded, JetStream store %s)", where, ns.StoreDir())
	} else {
		banner("nats          %s", redactURL(cfg.NATSURL))
	}
	b, err = bus.Connect(ctx, bcfg)
	if err != nil {
		shutdown()
		return nil, nil, nil, err
	}
	closeAll = func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := b.Close(closeCtx); err != nil {
			log.Warn("closing the bus", "err", err)
		}
		shutdown()
	}
	if err := b.EnsureStreams(ctx); err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	return b, embedded, closeAll, nil
}

// embeddedStoreDir is where the embedded NATS keeps the JetStream store of
// the database st serves: a directory under dir named for the database's
// identity (store.DatabaseID). JetStream drops a publish whose message id
// it saw within its duplicate window; a store shared with a database since
// dropped would drop the new database's events as duplicates of the old's,
// unapplied. An empty dir stays empty: a temporary store, new every start.
func embeddedStoreDir(ctx context.Context, dir string, st *store.Store) (string, error) {
	if dir == "" {
		return "", nil
	}
	id, err := st.DatabaseID(ctx)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, id), nil
}

// ensureDevTenant creates the development tenant and its key in -target=all.
func ensureDevTenant(ctx context.Context, cfg Config, st *store.Store, banner func(string, ...any)) error {
	if cfg.Target != TargetAll || cfg.DevAPIKey == "" {
		return nil
	}
	if err := st.EnsureTenant(ctx, cfg.DevTenant, "development"); err != nil {
		return err
	}
	if err := st.AddAPIKey(ctx, cfg.DevTenant, "development", cfg.DevAPIKey); err != nil {
		return err
	}
	note := ""
	if cfg.DevAPIKey == defaultDevAPIKey {
		note = " (the default; set MNEMOS_DEV_API_KEY to change it)"
	}
	banner("dev tenant    %q, API key %s%s", cfg.DevTenant, cfg.DevAPIKey, note)
	return nil
}

// newDeps builds what the selected targets share: tenant settings, the
// limiter and, when a target needs them, the guarded model provider and the
// recaller.
func newDeps(cfg Config, log *slog.Logger, metrics *telemetry.Metrics, st *store.Store, b *bus.Bus, tp trace.TracerProvider, selected []target, banner func(string, ...any)) (*deps, error) {
	defaults := tenantcfg.Defaults()
	defaults.Limits = cfg.Limits
	settings, err := tenantcfg.NewCache(defaults, st.TenantSettings, 30*time.Second)
	if err != nil {
		return nil, err
	}
	// One limiter for every entry point of the process; its state is in
	// Postgres, shared with the other replicas.
	limiter, err := limits.New(st, func(ctx context.Context, tenant string) (limits.Config, error) {
		s, err := settings.For(ctx, tenant)
		return s.Limits, err
	}, metrics.Meter("limits"), limits.Options{})
	if err != nil {
		return nil, err
	}
	d := &deps{cfg: cfg, log: log, metrics: metrics, store: st, bus: b, settings: settings, defaults: defaults, limiter: limiter, mux: http.NewServeMux(), heavy: cpu.NewHeavy(gateway.DefaultConfig().HeavyRequests)}
	needsModel, needsRecall := false, false
	for _, t := range selected {
		needsModel, needsRecall = needsModel || t.needsModel, needsRecall || t.needsRecall
	}
	if !needsModel {
		return d, nil
	}
	// The model provider, guarded: budgets, timeouts, retries, usage records.
	ledger := llmledger.New(st, settings, llmledger.WithPrices(cfg.LLMPrices))
	rawLLM, err := providers.New(cfg.LLM, map[llm.Task]builtin.Handler{
		llm.TaskCompaction: compaction.BuiltinSummarizer,
		llm.TaskNotes:      sessionnotes.Builtin,
		llm.TaskExtraction: extraction.Builtin,
		llm.TaskRecall:     recall.Builtin,
		llm.TaskDreaming:   consolidate.Builtin,
	})
	if err != nil {
		return nil, err
	}
	// Background calls fork the agent's last request where the provider
	// can (Anthropic): its prompt cache then serves them.
	forked := llm.WithForks(rawLLM, llmledger.AgentRequests(st))
	d.provider = llm.Guard(forked, llm.GuardOptions{Budget: ledger, Recorder: ledger, Pricer: ledger, Meter: metrics.Meter("llm"), TracerProvider: tp})
	d.llmName = rawLLM.Name()
	if d.llmName == builtin.Name {
		log.Info("no model configured: the builtin provider writes summaries and session notes from the data itself, saves only explicit requests and corrections as memories and picks memories to recall by BM25 (set ANTHROPIC_API_KEY, OPENAI_API_KEY or MNEMOS_OPENAI_BASE_URL to use a model)")
	}
	banner("llm           %s", d.llmName)
	for _, model := range cfg.LLM.Models() {
		if _, ok := cfg.LLMPrices.Lookup(model); !ok {
			log.Warn("a model has no price: its calls are recorded at no cost and llm.daily_budget_usd does not bound them; give it one in MNEMOS_LLM_PRICES", "model", model)
		}
	}
	if !needsRecall {
		return d, nil
	}
	memories, err := memory.NewStore(st, metrics.Meter("recall"), memory.Options{Limits: settings.MemoryLimits})
	if err != nil {
		return nil, err
	}
	d.recaller, err = recall.New(st, memories, d.provider, func(ctx context.Context, tenant string) (recall.Settings, error) {
		set, err := settings.For(ctx, tenant)
		return set.Recall, err
	}, metrics.Meter("recall"), recall.Options{})
	return d, err
}

// listener is one HTTP listen address of the process, and the variable
// that sets it.
type listener struct {
	name, addr, envVar string
}

// server is a listener opened and its server, not serving yet.
type server struct {
	name string
	srv  *http.Server
	ln   net.Listener
}

func httpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
}

// listenAll opens every listener, or none: an address in use fails the
// start before anything else is done.
func listenAll(ctx context.Context, ls []listener) ([]net.Listener, error) {
	var out []net.Listener
	for _, l := range ls {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", l.addr)
		if err != nil {
			for _, o := range out {
				_ = o.Close() // not served yet: nothing else to release
			}
			if errors.Is(err, syscall.EADDRINUSE) {
				return nil, fmt.Errorf("%s=%s is in use by another process (a mnemos already running?): stop it, or set %s to another address: %w", l.envVar, l.addr, l.envVar, err)
			}
			return nil, fmt.Errorf("listen on %s (set %s to use another address): %w", l.addr, l.envVar, err)
		}
		out = append(out, ln)
	}
	return out, nil
}

// runUntilDone runs the services and serves HTTP until ctx ends or one of
// them fails, then shuts down: HTTP first, then the services, which drain.
func runUntilDone(ctx context.Context, log *slog.Logger, runs []runner, servers []server) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(runs)+len(servers))
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			if err := r.run(runCtx); err != nil {
				errc <- fmt.Errorf("%s: %w", r.name, err)
			}
		})
	}
	for _, s := range servers {
		wg.Go(func() {
			if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("%s: %w", s.name, err)
			}
		})
	}
	var first error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case first = <-errc:
		log.Error("a service failed; shutting down", "err", first)
	}
	shutCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer done()
	for _, s := range servers {
		if err := s.srv.Shutdown(shutCtx); err != nil {
			log.Warn(s.name+" shutdown", "err", err)
		}
	}
	cancel()
	wg.Wait()
	return first
}

// operatorAPI is the operator API every target serves on its admin
// listener. In a process that checks tenants' keys (the gateway, the
// proxy), a key it revokes or rotates is refused by it at once; the
// others hear of it from Postgres, as every process does.
func operatorAPI(d *deps) *operatorapi.Handler {
	var keys *httpapi.Keys
	var eraser *erasure.Eraser
	if d.api != nil {
		keys, eraser = d.apiCfg.Keys, d.api.Eraser()
	} else {
		eraser = erasure.New(erasure.DefaultConfig(), d.store, d.bus, d.log.With("part", "operator-api"))
	}
	return operatorapi.New(d.store, keys, eraser, d.defaults, d.log.With("part", "operator-api"))
}

// natsAuth answers NATS's authorization requests with the process's API
// keys (the gateway's, when it runs here): tenants' publishers connect with
// their keys. It closes the connections of a key revoked on the embedded
// server, or through MNEMOS_NATS_SYSTEM_URL on a server of its own.
func natsAuth(d *deps, embedded *natsembed.Server) (func(context.Context) error, error) {
	issuer, err := natsAuthIssuer(d.cfg.NATSAuthCallout)
	if err != nil {
		return nil, err
	}
	log, meter := d.log.With("service", "nats-auth"), d.metrics.Meter("nats-auth")
	keys := d.apiCfg.Keys
	if d.api == nil {
		kcfg := gateway.DefaultConfig()
		if keys, err = httpapi.NewKeys(httpapi.KeysConfig{CacheTTL: kcfg.KeyCacheTTL}, d.store, d.limiter, log, meter); err != nil {
			return nil, err
		}
	}
	var conns natsauth.Conns
	var system *nats.Conn
	switch {
	case embedded != nil:
		conns = embedded
	case d.cfg.NATSSystemURL != "":
		if system, err = nats.Connect(d.cfg.NATSSystemURL, nats.Name("mnemos-nats-auth-system"), nats.MaxReconnects(-1)); err != nil {
			return nil, fmt.Errorf("MNEMOS_NATS_SYSTEM_URL: %w", err)
		}
		conns = natsauth.NewSystemConns(system)
	}
	cfg := natsauth.DefaultConfig()
	cfg.Issuer, cfg.Account = issuer, d.cfg.NATSAuthAccount
	svc, err := natsauth.New(cfg, keys, conns, d.bus, log, meter)
	if err != nil {
		if system != nil {
			system.Close()
		}
		return nil, err
	}
	return func(ctx context.Context) error {
		if system != nil {
			defer system.Close()
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wg.Go(func() { keys.Listen(ctx) }) // once a process: a gateway here listens already
		return svc.Run(ctx)
	}, nil
}

// adminMux is the operator listener's routes: the operator API, the
// Prometheus page, the Go profiler and the health probes.
func adminMux(metrics http.Handler, checks map[string]health.Check, status map[string]string, operator *operatorapi.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	operator.Register(mux)
	mux.Handle("GET /metrics", metrics)
	// Registered on this mux, not http.DefaultServeMux, which nothing serves.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	health.Register(mux, checks, status)
	return mux
}

// crashExit ends the process at a fault-injection crash point, as a kill
// would: no shutdown, nothing drained or flushed.
func crashExit(log *slog.Logger, what string) func(point string, hit int) {
	return func(point string, hit int) {
		log.Error("fault injection: crashing "+what, "point", point, "hit", hit, "exit_code", faults.ExitCode)
		os.Exit(faults.ExitCode)
	}
}
