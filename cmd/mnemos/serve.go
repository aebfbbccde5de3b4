package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/consolidate"
	"github.com/mnemos-ai/mnemos/pkg/extraction"
	"github.com/mnemos-ai/mnemos/pkg/faults"
	"github.com/mnemos-ai/mnemos/pkg/health"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/llm/providers"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/natsembed"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/recall"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/telemetry"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/dreamer"
	"github.com/mnemos-ai/mnemos/services/extractor"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/recallprefetch"
	"github.com/mnemos-ai/mnemos/services/sessionmemory"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
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

	dbs, err := resolveDatabases(ctx, cfg, localDatabaseURL)
	if err != nil {
		return err
	}
	migrated := "not run by this target"
	if cfg.Migrate {
		if err := migrateSchema(ctx, dbs, log); err != nil {
			return err
		}
		migrated = "applied as " + userOf(dbs.owner)
	}
	st, err := openServicesStore(ctx, dbs, cfg.DatabaseMaxConns, store.NewTracer(tp))
	if err != nil {
		return err
	}
	defer st.Close()
	banner("postgres      %s (row-level security on; migrations %s)", store.Redact(dbs.app), migrated)

	// =========================================================================
	// NATS JetStream

	natsURL := cfg.NATSURL
	if natsURL == "" {
		ns, err := natsembed.Start(natsembed.Options{StoreDir: cfg.NATSStoreDir})
		if err != nil {
			return fmt.Errorf("natsembed.Start: %w", err)
		}
		defer ns.Shutdown()
		natsURL = ns.ClientURL()
		banner("nats          %s (embedded, JetStream store %s)", natsURL, ns.StoreDir())
	} else {
		banner("nats          %s", natsURL)
	}
	bcfg := bus.Config{
		URL: natsURL, Name: "mnemos-" + cfg.Target, Namespace: cfg.Namespace, Replicas: cfg.StreamReplicas,
		TracerProvider: tp, Meter: metrics.Meter("bus"), ConsumerInfoInterval: cfg.GaugeInterval, Logger: log,
		DuplicateWindow: cfg.NATSDuplicateWindow,
	}
	if crash := faults.NewCrash(cfg.CrashAfterCommit, crashExit(log, "after commit")); crash != nil {
		bcfg.AfterHandled = crash.Hit
	}
	b, err := bus.Connect(ctx, bcfg)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := b.Close(closeCtx); err != nil {
			log.Warn("closing the bus", "err", err)
		}
	}()
	if err := b.EnsureStreams(ctx); err != nil {
		return err
	}

	// =========================================================================
	// Development tenant

	if cfg.Target == TargetAll && cfg.DevAPIKey != "" {
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
	}

	// =========================================================================
	// Services

	defaults := tenantcfg.Defaults()
	defaults.Limits = cfg.Limits
	settings, err := tenantcfg.NewCache(defaults, st.TenantSettings, 30*time.Second)
	if err != nil {
		return err
	}
	// One limiter for every entry point of the process; its state is in
	// Postgres, shared with the other replicas.
	limiter, err := limits.New(st, func(ctx context.Context, tenant string) (limits.Config, error) {
		s, err := settings.For(ctx, tenant)
		return s.Limits, err
	}, metrics.Meter("limits"), limits.Options{})
	if err != nil {
		return err
	}
	runs := []runner{}
	runsTarget := func(t string) bool { return cfg.Target == TargetAll || cfg.Target == t }
	status := map[string]string{}

	if runsTarget(TargetTokenAccounting) {
		acfg := tokenaccounting.DefaultConfig()
		acfg.MaxEventBytes, acfg.Workers, acfg.GapTimeout = cfg.MaxEventBytes, cfg.Workers, cfg.GapTimeout
		acfg.SessionsCountInterval = cfg.GaugeInterval
		acfg.Limits = limiter
		svc, err := tokenaccounting.New(acfg, st, b, settings, log.With("service", TargetTokenAccounting), metrics.Meter(TargetTokenAccounting))
		if err != nil {
			return err
		}
		runs = append(runs, runner{TargetTokenAccounting, svc.Run})
		status[TargetTokenAccounting] = "running"
	}
	if runsTarget(TargetTokenAccounting) || runsTarget(TargetCompactor) || runsTarget(TargetGateway) || runsTarget(TargetSessionMemory) || runsTarget(TargetExtractor) || runsTarget(TargetDreamer) {
		// These targets write events through the outbox; each process that
		// runs one relays it (relays share the rows safely).
		ocfg := outbox.DefaultConfig()
		ocfg.Meter, ocfg.BacklogInterval = metrics.Meter("outbox"), cfg.GaugeInterval
		if crash := faults.NewCrash(cfg.CrashAfterPublish, crashExit(log, "after publish")); crash != nil {
			ocfg.AfterPublish = func() { crash.Hit("outbox-relay") }
		}
		relay := outbox.New(ocfg, st, b, log.With("service", "outbox-relay"))
		runs = append(runs, runner{"outbox-relay", relay.Run})
	}

	// The model provider, guarded: budgets, timeouts, retries, usage records.
	ledger := llmledger.New(st, settings)
	rawLLM, err := providers.New(cfg.LLM, map[llm.Task]builtin.Handler{
		llm.TaskCompaction: compaction.BuiltinSummarizer,
		llm.TaskNotes:      sessionnotes.Builtin,
		llm.TaskExtraction: extraction.Builtin,
		llm.TaskRecall:     recall.Builtin,
		llm.TaskDreaming:   consolidate.Builtin,
	})
	if err != nil {
		return err
	}
	provider := llm.Guard(rawLLM, llm.GuardOptions{Budget: ledger, Recorder: ledger, Meter: metrics.Meter("llm"), TracerProvider: tp})
	if rawLLM.Name() == builtin.Name {
		log.Info("no model configured: the builtin provider writes summaries and session notes from the data itself, saves only explicit requests and corrections as memories and picks memories to recall by BM25 (set ANTHROPIC_API_KEY, OPENAI_API_KEY or MNEMOS_OPENAI_BASE_URL to use a model)")
	}
	banner("llm           %s", rawLLM.Name())

	if runsTarget(TargetCompactor) {
		ccfg := compactor.DefaultConfig()
		ccfg.Lease = cfg.CompactionLease
		svc, err := compactor.New(ccfg, st, b, settings, provider, log.With("service", TargetCompactor), metrics.Meter(TargetCompactor))
		if err != nil {
			return err
		}
		runs = append(runs, runner{TargetCompactor, svc.Run})
		status[TargetCompactor] = "running"
	}
	if runsTarget(TargetSessionMemory) {
		scfg := sessionmemory.DefaultConfig()
		scfg.Lease = cfg.SessionMemoryLease
		svc, err := sessionmemory.New(scfg, st, b, settings, provider, log.With("service", TargetSessionMemory), metrics.Meter(TargetSessionMemory))
		if err != nil {
			return err
		}
		runs = append(runs, runner{TargetSessionMemory, svc.Run})
		status[TargetSessionMemory] = svc.Status()
	}
	if runsTarget(TargetExtractor) {
		ecfg := extractor.DefaultConfig()
		ecfg.Lease = cfg.ExtractorLease
		svc, err := extractor.New(ecfg, st, b, settings, provider, log.With("service", TargetExtractor), metrics.Meter(TargetExtractor))
		if err != nil {
			return err
		}
		runs = append(runs, runner{TargetExtractor, svc.Run})
		status[TargetExtractor] = svc.Status()
	}
	// Recall: the gateway's POST recall and the prefetch on ingest, which
	// runs in the extractor target with the other long-term memory work.
	var recaller *recall.Recaller
	if runsTarget(TargetGateway) || runsTarget(TargetExtractor) {
		memories, err := memory.NewStore(st, metrics.Meter("recall"), memory.Options{Limits: settings.MemoryLimits})
		if err != nil {
			return err
		}
		recaller, err = recall.New(st, memories, provider, func(ctx context.Context, tenant string) (recall.Settings, error) {
			set, err := settings.For(ctx, tenant)
			return set.Recall, err
		}, metrics.Meter("recall"), recall.Options{})
		if err != nil {
			return err
		}
	}
	if runsTarget(TargetExtractor) {
		svc, err := recallprefetch.New(recallprefetch.DefaultConfig(), b, recaller, log.With("service", "recall"))
		if err != nil {
			return err
		}
		runs = append(runs, runner{"recall", svc.Run})
		status["recall"] = svc.Status()
	}
	if runsTarget(TargetDreamer) {
		svc, err := dreamer.New(dreamer.DefaultConfig(), st, b, settings, provider, log.With("service", TargetDreamer), metrics.Meter(TargetDreamer), dreamer.Options{})
		if err != nil {
			return err
		}
		runs = append(runs, runner{TargetDreamer, svc.Run})
		status[TargetDreamer] = svc.Status()
	}

	// =========================================================================
	// HTTP

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler())
	health.Register(mux, map[string]health.Check{
		"postgres": st.Ping,
		"nats": func(context.Context) error {
			if !b.Conn().IsConnected() {
				return errors.New("not connected")
			}
			return nil
		},
	}, status)
	if runsTarget(TargetGateway) {
		gcfg := gateway.DefaultConfig()
		gcfg.MaxEventBytes = cfg.MaxEventBytes
		gcfg.MaxInflightBytes = cfg.MaxInflightBytes
		gcfg.ContextWait = cfg.ContextWait
		gcfg.LLMProvider = rawLLM.Name()
		gcfg.Limits = limiter
		gw, err := gateway.New(gcfg, st, b, settings, log.With("service", TargetGateway), metrics.Meter(TargetGateway))
		if err != nil {
			return err
		}
		gw.UseRecall(recaller)
		gw.Register(mux)
		status[TargetGateway] = "running"
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("listen on %s (set MNEMOS_HTTP_ADDR to use another address): %w", cfg.HTTPAddr, err)
	}
	srv := &http.Server{Handler: telemetry.HTTPHandler(mux, tp, metrics.MeterProvider()), ReadHeaderTimeout: 10 * time.Second}
	banner("http          http://%s (API, /healthz, /readyz, /metrics)", displayAddr(ln.Addr()))
	for _, name := range sortedKeys(status) {
		banner("target        %-16s %s", name, status[name])
	}

	// =========================================================================
	// Run until a signal, then shut down in reverse order.

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(runs)+1)
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			if err := r.run(runCtx); err != nil {
				errc <- fmt.Errorf("%s: %w", r.name, err)
			}
		})
	}
	wg.Go(func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http: %w", err)
		}
	})
	var first error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case first = <-errc:
		log.Error("a service failed; shutting down", "err", first)
	}
	shutCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer done()
	if err := srv.Shutdown(shutCtx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	cancel()
	wg.Wait()
	return first
}

// crashExit ends the process at a fault-injection crash point, as a kill
// would: no shutdown, nothing drained or flushed.
func crashExit(log *slog.Logger, what string) func(point string, hit int) {
	return func(point string, hit int) {
		log.Error("fault injection: crashing "+what, "point", point, "hit", hit, "exit_code", faults.ExitCode)
		os.Exit(faults.ExitCode)
	}
}
