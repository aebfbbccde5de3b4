//go:build bench

package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/natsembed"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// localBenchURL is the database `mnemos bench` uses when given none.
const localBenchURL = "postgres://postgres@127.0.0.1:5432/mnemos_bench?sslmode=disable"

// runBench runs the accountant, the compactor, the outbox relay and the
// gateway in this process against a Postgres and a JetStream, with a
// scripted Anthropic upstream behind the proxy's Messages door and a
// scripted OpenAI one behind its Responses door,
// measures them with internal/benchmark and prints the tables of
// docs/performance.md (or, with --json, one JSON object). `mnemos bench
// render` prints the tables of a stored JSON run instead (runBenchRender).
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "render" {
		return runBenchRender(args[1:], stdout, stderr)
	}
	return runBenchMeasure(ctx, args, stdout, stderr)
}

// runBenchMeasure runs the bench's parts and reports what they measured.
func runBenchMeasure(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mnemos bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := fs.String("database-url", "", "Postgres to run against, as the schema's owner, who migrates (default: the local server's mnemos_bench database, created and migrated)")
	appURL := fs.String("services-database-url", "", "the services' role on that database (default: "+store.AppRole+" on --database-url's server)")
	natsURL := fs.String("nats-url", "", "NATS with JetStream to run against (default: an embedded server with a temporary store)")
	rounds := fs.Int("rounds", 3, "saturated ingest rounds")
	sessions := fs.Int("sessions", 100, "sessions per ingest round")
	perSession := fs.Int("turns-per-session", 30, "turns per session per ingest round")
	publishers := fs.Int("publishers", 8, "concurrent publishers in the saturated rounds")
	sustain := fs.Duration("sustain", 20*time.Second, "how long turns are offered at the sustained rate")
	rate := fs.Float64("rate", 0, "sustained rate in turns/s (0: half the saturated throughput)")
	samples := fs.Int("samples", 500, "context-assembly requests timed per session size")
	sizes := fs.String("sizes", "10000,50000,150000", "session sizes in tokens for context assembly and pre-flight")
	preflightSamples := fs.Int("preflight-samples", 500, "pre-flight requests timed per session size")
	proxySizes := fs.String("proxy-sizes", "10000,150000", "session sizes in tokens for the proxy's latency")
	proxySamples := fs.Int("proxy-samples", 500, "rounds timed per session size and door, through the proxy and straight each")
	proxyDoors := fs.String("proxy-doors", strings.Join(benchmark.Doors, ","), "the proxy's doors to time, separated by commas: "+strings.Join(benchmark.Doors, ", ")+
		" (POST /v1/messages as Claude Code sends it, POST /v1/responses as the Codex CLI does)")
	scale := fs.Bool("scale", false, "run the scale part alone (--only scale): fill the tables to --scale-sessions with COPY, measuring ingest and context at each step; takes minutes")
	scaleSessions := fs.String("scale-sessions", "1000,100000", "the scale run's steps, in sessions stored")
	scaleMessages := fs.Int("scale-messages", 100, "messages of each session the scale run stores")
	scaleSamples := fs.Int("scale-samples", 1000, "context reads timed at each step of the scale run")
	only := fs.String("only", "", "run these parts, separated by commas: "+strings.Join(benchmark.Parts, ", ")+" (default: all)")
	asJSON := fs.Bool("json", false, "write the report as one JSON object instead of tables")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the measurements to this file")
	memProfile := fs.String("memprofile", "", "write a profile of the run's allocations to this file when it ends")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: mnemos bench [flags] | mnemos bench render [-update PAGE] FILE.json")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	ctxSizes, err := tokenSizes("--sizes", *sizes)
	if err != nil {
		return err
	}
	upSizes, err := tokenSizes("--proxy-sizes", *proxySizes)
	if err != nil {
		return err
	}
	steps, parts, err := benchParts(*scale, *scaleSessions, *only)
	if err != nil {
		return err
	}
	doors, err := benchDoors(*proxyDoors)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	progress := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	// The collector's target and the memory limit as serve sets them: the
	// services measured here run as they are deployed.
	applyMemoryLimit(log) // the report's machine line says what they are

	// =========================================================================
	// Postgres

	// As in production: the owner migrates, the services connect as the
	// role row-level security confines.
	dbs, err := resolveDatabases(ctx, Config{MigrateDatabaseURL: *dbURL, DatabaseURL: *appURL}, localBenchURL)
	if err != nil {
		return err
	}
	url := dbs.owner
	if err := migrateSchema(ctx, dbs, nil); err != nil {
		return err
	}
	owner, err := store.Open(ctx, store.Config{URL: dbs.owner, MaxConns: 2})
	if err != nil {
		return err
	}
	defer owner.Close()
	st, err := openServicesStore(ctx, dbs, 20, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	progress("postgres   %s", store.Redact(url))

	// =========================================================================
	// NATS JetStream

	natsAt, namespace := *natsURL, ""
	var inProcess nats.InProcessConnProvider
	if natsAt == "" {
		ns, err := natsembed.Start(natsembed.Options{})
		if err != nil {
			return fmt.Errorf("natsembed.Start: %w", err)
		}
		defer ns.Shutdown()
		inProcess = ns
		progress("nats       in-process (embedded, temporary store)")
	} else {
		// A namespace of its own, removed afterwards: the server may be shared.
		namespace = "bench" + strings.ToLower(rand.Text()[:8])
		progress("nats       %s (namespace %s)", natsAt, namespace)
	}
	b, err := bus.Connect(ctx, bus.Config{URL: natsAt, InProcess: inProcess, Name: "mnemos-bench", Namespace: namespace, Logger: log})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if namespace != "" {
			for _, name := range []string{bus.StreamTurns, bus.StreamEvents, bus.StreamDeadLetter} {
				if err := b.JetStream().DeleteStream(cctx, b.StreamName(name)); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
					log.Warn("deleting a benchmark stream", "stream", b.StreamName(name), "err", err)
				}
			}
		}
		if err := b.Close(cctx); err != nil {
			log.Warn("closing the bus", "err", err)
		}
	}()
	if err := b.EnsureStreams(ctx); err != nil {
		return err
	}

	// =========================================================================
	// The system, measured

	sys, err := benchmark.Start(ctx, st, owner.Pool(), b, log)
	if err != nil {
		return err
	}
	defer sys.Close()
	stopProfile, err := startCPUProfile(*cpuProfile, stderr)
	if err != nil {
		return err
	}
	defer stopProfile()
	rep, err := benchmark.Run(ctx, sys, benchmark.Options{
		Rounds: *rounds, Sessions: *sessions, PerSession: *perSession, Publishers: *publishers,
		SustainFor: *sustain, SustainRate: *rate, ContextSizes: ctxSizes, Samples: *samples, PreflightSamples: *preflightSamples,
		ProxySizes: upSizes, ProxySamples: *proxySamples, ProxyDoors: doors, ScaleSessions: steps, ScaleMessages: *scaleMessages, ScaleSamples: *scaleSamples, Only: parts,
		Progress: progress,
	})
	if err != nil {
		return err
	}
	info, _ := debug.ReadBuildInfo() // nil without build information: the commit is then unknown
	rep.Machine.Commit = buildCommit(info)
	if err := writeAllocProfile(*memProfile); err != nil {
		return err
	}
	if *asJSON {
		return rep.JSON(stdout)
	}
	fmt.Fprintln(stdout)
	rep.Markdown(stdout)
	return nil
}

// performanceBegin marks where the generated tables of
// docs/performance.md begin; markdownEnd ends them.
const performanceBegin = "<!-- BEGIN generated by `mnemos bench render -update docs/performance.md docs/performance.json` from the run stored there: do not edit by hand -->\n"

// runBenchRender prints the tables of a run `mnemos bench --json` stored,
// as the run printed them, or with -update writes them into a page between
// its markers. Nothing is measured.
func runBenchRender(args []string, stdout, stderr io.Writer) error {
	fs := commandFlags("bench render", "bench render [-update PAGE] FILE.json",
		"Prints the tables of a run stored with mnemos bench --json, as the run printed them; nothing is measured.", stderr)
	update := fs.String("update", "", "write the tables into this page, between its generated markers, instead of printing them")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("bench render: want the JSON file of a run (mnemos bench --json > FILE.json)")
	}
	path := fs.Arg(0)
	f, err := os.Open(path) //nolint:gosec // the run the operator named on the command line
	if err != nil {
		return err
	}
	defer f.Close()
	var tables strings.Builder
	if err := benchmark.RenderJSON(f, &tables); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if *update == "" {
		_, err := io.WriteString(stdout, tables.String())
		return err
	}
	return updatePage(*update, performanceBegin, tables.String())
}

// benchParts reads the flags that choose what runs: the scale run's steps
// (--scale-sessions, increasing) and the parts (--only, or "scale" alone
// with --scale).
func benchParts(scale bool, scaleSessions, only string) ([]int64, string, error) {
	steps, err := tokenSizes("--scale-sessions", scaleSessions)
	if err != nil {
		return nil, "", err
	}
	if !slices.IsSorted(steps) || len(slices.Compact(slices.Clone(steps))) != len(steps) {
		return nil, "", fmt.Errorf("--scale-sessions %q: want the steps in increasing order", scaleSessions)
	}
	if scale {
		if only != "" && only != "scale" {
			return nil, "", fmt.Errorf("--scale runs the scale part alone; it takes no --only %q", only)
		}
		only = "scale"
	}
	if only != "" {
		for _, part := range strings.Split(only, ",") {
			if !slices.Contains(benchmark.Parts, part) {
				return nil, "", fmt.Errorf("--only %q: want some of %s, separated by commas", only, strings.Join(benchmark.Parts, ", "))
			}
		}
	}
	return steps, only, nil
}

// benchDoors reads --proxy-doors: some of benchmark.Doors, each once.
func benchDoors(list string) ([]string, error) {
	doors := strings.Split(list, ",")
	for i, d := range doors {
		if !slices.Contains(benchmark.Doors, d) || slices.Contains(doors[:i], d) {
			return nil, fmt.Errorf("--proxy-doors %q: want some of %s, each once, separated by commas", list, strings.Join(benchmark.Doors, ", "))
		}
	}
	return doors, nil
}

// tokenSizes reads a flag's comma-separated token counts.
func tokenSizes(name, list string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s %q: want positive numbers separated by commas", name, list)
		}
		out = append(out, n)
	}
	return out, nil
}

// startCPUProfile profiles the process's CPU into the file at path until
// stop, which says on stderr when the file could not be written whole; with
// no path, it does nothing.
func startCPUProfile(path string, stderr io.Writer) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path) //nolint:gosec // the operator's own output file
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close() // empty: nothing to lose
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "the CPU profile %s: %v\n", path, err)
		}
	}, nil
}

// writeAllocProfile writes the allocations of the run so far (pprof's
// "allocs": what was allocated, and where, since the process began) to the
// file at path; with no path, it does nothing.
func writeAllocProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path) //nolint:gosec // the operator's own output file
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close() // the write's error says more
		return fmt.Errorf("the allocation profile %s: %w", path, err)
	}
	return f.Close()
}
