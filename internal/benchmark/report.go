package benchmark

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options size a benchmark run. Zero fields take the defaults.
type Options struct {
	// Rounds of the saturated ingest (3), each Sessions × PerSession turns
	// (100 × 30) from Publishers goroutines (8).
	Rounds, Sessions, PerSession, Publishers int
	// SustainFor is how long turns are offered at SustainRate (20s); a rate
	// of 0 is half the saturated throughput, below saturation.
	SustainFor  time.Duration
	SustainRate float64
	// ContextSizes are the session sizes, in tokens, context assembly is
	// timed at (10K, 50K, 150K), Samples times each (500: a p99 of five
	// samples, not the second slowest of 120).
	ContextSizes []int64
	Samples      int
	// PreflightSamples is how many preflights are timed at each of the
	// ContextSizes (500).
	PreflightSamples int
	// ProxySizes are the session sizes the proxy is timed at (10K, 150K),
	// ProxySamples rounds each way at each (500), at each of ProxyDoors
	// (Doors: messages and responses).
	ProxySizes   []int64
	ProxySamples int
	ProxyDoors   []string
	// ScaleSessions are the steps of the scale run, in sessions stored
	// (1,000 then 100,000), each of ScaleMessages messages (100): at each
	// step one saturated ingest round of Sessions × PerSession turns and
	// ScaleSamples (1,000) context reads of a 10K-token session: enough
	// for a p99 of ten samples.
	ScaleSessions []int64
	ScaleMessages int
	ScaleSamples  int
	// Only, when set, names the parts to run, separated by commas:
	// "ingest", "context", "preflight", "proxy", "scale". The scale run
	// takes minutes and runs only when named.
	Only string
	// Run prefixes every session id, keeping runs apart (a timestamp).
	Run string
	// Progress, when set, is told what the run is doing.
	Progress func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Rounds, 3)
	def(&o.Sessions, 100)
	def(&o.PerSession, 30)
	def(&o.Publishers, 8)
	def(&o.Samples, 500)
	def(&o.PreflightSamples, 500)
	def(&o.ProxySamples, 500)
	def(&o.ScaleMessages, 100)
	def(&o.ScaleSamples, 1_000)
	if len(o.ScaleSessions) == 0 {
		o.ScaleSessions = []int64{1_000, 100_000}
	}
	if o.SustainFor <= 0 {
		o.SustainFor = 20 * time.Second
	}
	if len(o.ContextSizes) == 0 {
		o.ContextSizes = []int64{10_000, 50_000, 150_000}
	}
	if len(o.ProxySizes) == 0 {
		o.ProxySizes = []int64{10_000, 150_000}
	}
	if len(o.ProxyDoors) == 0 {
		o.ProxyDoors = Doors
	}
	if o.Run == "" {
		o.Run = "b" + time.Now().UTC().Format("20060102t150405")
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	return o
}

// Parts are the values Options.Only takes.
var Parts = []string{"ingest", "context", "preflight", "proxy", "scale"}

func (o Options) runs(part string) bool {
	if o.Only == "" {
		return part != "scale"
	}
	return slices.Contains(strings.Split(o.Only, ","), part)
}

// Report is what one run measured.
type Report struct {
	Machine    Machine
	Publishers int
	// Burst are the saturated ingest rounds; RawJetStream and RawPostgres
	// the baselines measured after each, at the same size and concurrency.
	Burst        []Ingest
	RawJetStream []float64
	RawPostgres  []float64
	// Sustained is the ingest at a rate below saturation.
	Sustained Ingest
	Context   []ContextTiming
	// Preflight is POST /v1/sessions/{id}/preflight at the context sizes.
	Preflight []PreflightTiming
	// Proxy is the proxy's latency at each size, each door's in turn;
	// ProxyCost what a short and a long session cost through its Messages
	// door.
	Proxy     []ProxyTiming
	ProxyCost []ProxyCost
	// Scale are the scale run's steps, fewest sessions first.
	Scale []ScaleStep
	Took  time.Duration
}

// ContextTiming is context assembly at one session size.
type ContextTiming struct {
	Tokens   int64
	Assemble []time.Duration
	Select   []time.Duration
}

// Run measures the system: saturated ingest with its baselines, ingest at a
// sustained rate, context assembly, pre-flight, and the proxy (or the parts
// Options.Only names).
func Run(ctx context.Context, s *System, opts Options) (Report, error) {
	o := opts.withDefaults()
	start := time.Now()
	rep := Report{Machine: Describe(ctx, s), Publishers: o.Publishers}
	if o.runs("ingest") {
		if err := runIngest(ctx, s, o, &rep); err != nil {
			return rep, err
		}
	}
	built := map[int64]string{} // the sessions BuildSession made, by size
	if o.runs("context") {
		if err := runContext(ctx, s, o, built, &rep); err != nil {
			return rep, err
		}
	}
	if o.runs("preflight") {
		if err := runPreflight(ctx, s, o, built, &rep); err != nil {
			return rep, err
		}
	}
	if o.runs("proxy") {
		if err := runProxy(ctx, s, o, &rep); err != nil {
			return rep, err
		}
	}
	if o.runs("scale") {
		if err := runScale(ctx, s, o, built, &rep); err != nil {
			return rep, err
		}
	}
	rep.Took = time.Since(start)
	return rep, nil
}

func runIngest(ctx context.Context, s *System, o Options, rep *Report) error {
	o.Progress("ingest warm-up: %d turns, not measured, then VACUUM (ANALYZE)", o.Sessions*warmPerSession)
	if err := s.WarmIngest(ctx, o.Run, o.Sessions, o.Publishers); err != nil {
		return err
	}
	for i := range o.Rounds {
		turns, err := s.Encode(Events(fmt.Sprintf("%s-burst%d", o.Run, i), o.Sessions, o.PerSession))
		if err != nil {
			return err
		}
		o.Progress("ingest round %d of %d: %d turns, %d publishers", i+1, o.Rounds, turns.Len(), o.Publishers)
		in, err := s.IngestBurst(ctx, turns, o.Publishers)
		if err != nil {
			return err
		}
		js, err := RawJetStream(ctx, s.Bus, fmt.Sprintf("%s_%d", o.Run, i), turns.Len(), in.EventBytes, o.Publishers)
		if err != nil {
			return err
		}
		pg, err := RawPostgres(ctx, s.Store, s.Owner, turns.Len(), in.EventBytes, o.Publishers)
		if err != nil {
			return err
		}
		o.Progress("  %.0f turns/s; raw JetStream %.0f msgs/s, raw Postgres %.0f rows/s", in.Rate, js, pg)
		rep.Burst, rep.RawJetStream, rep.RawPostgres = append(rep.Burst, in), append(rep.RawJetStream, js), append(rep.RawPostgres, pg)
	}

	rate := o.SustainRate
	if rate <= 0 {
		rate = rep.Throughput() / 2
	}
	n := max(int(rate*o.SustainFor.Seconds()), 1)
	per := max(n/o.Sessions, 1)
	o.Progress("sustained ingest: %.0f turns/s for %s (%d turns)", rate, o.SustainFor, per*o.Sessions)
	turns, err := s.Encode(Events(o.Run+"-sustained", o.Sessions, per))
	if err != nil {
		return err
	}
	in, err := s.IngestAtRate(ctx, turns, rate)
	if err != nil {
		return err
	}
	rep.Sustained = in
	return nil
}

// contextSession is the session of about size tokens context assembly and
// pre-flight are timed on, built once a run.
func contextSession(ctx context.Context, s *System, o Options, built map[int64]string, size int64) (string, error) {
	if id, ok := built[size]; ok {
		return id, nil
	}
	id := fmt.Sprintf("%s-ctx%dk", o.Run, size/1000)
	o.Progress("building a %d-token session", size)
	if err := s.BuildSession(ctx, id, size); err != nil {
		return "", err
	}
	built[size] = id
	return id, nil
}

func runContext(ctx context.Context, s *System, o Options, built map[int64]string, rep *Report) error {
	for _, size := range o.ContextSizes {
		id, err := contextSession(ctx, s, o, built, size)
		if err != nil {
			return err
		}
		o.Progress("context assembly: %d samples of the %d-token session", o.Samples, size)
		t := ContextTiming{Tokens: size}
		for range o.Samples {
			a, err := s.ContextLatency(ctx, id, 1)
			if err != nil {
				return err
			}
			q, err := s.SelectLatency(ctx, id, 1)
			if err != nil {
				return err
			}
			t.Assemble, t.Select = append(t.Assemble, a...), append(t.Select, q...)
		}
		rep.Context = append(rep.Context, t)
	}
	return nil
}

// runPreflight times pre-flight on the sessions of context assembly: they
// are not changed by it (no compaction is asked for).
func runPreflight(ctx context.Context, s *System, o Options, built map[int64]string, rep *Report) error {
	for _, size := range o.ContextSizes {
		id, err := contextSession(ctx, s, o, built, size)
		if err != nil {
			return err
		}
		o.Progress("pre-flight: %d samples of the %d-token session", o.PreflightSamples, size)
		d, err := s.PreflightLatency(ctx, id, o.PreflightSamples)
		if err != nil {
			return err
		}
		rep.Preflight = append(rep.Preflight, PreflightTiming{Tokens: size, Latencies: d})
	}
	return nil
}

// The proxy's cost sessions: a short one, far from auto-compaction, and a
// long one that grows past the threshold of a 200K window.
var costSessions = []struct {
	name         string
	files, lines int
}{{"short", 6, 100}, {"long", 18, 600}, {"large-reads", 16, 1070}}

func runProxy(ctx context.Context, s *System, o Options, rep *Report) error {
	for _, size := range o.ProxySizes {
		for _, door := range o.ProxyDoors {
			o.Progress("proxy, %s door: %d rounds of %d-token sessions, through Mnemos and straight", door, o.ProxySamples, size)
			t, err := s.ProxyLatency(ctx, door, o.Run, size, o.ProxySamples)
			if err != nil {
				return err
			}
			rep.Proxy = append(rep.Proxy, t)
		}
	}
	for _, c := range costSessions {
		o.Progress("messages proxy: the %s session's cost (%d files of %d lines), straight and through Mnemos", c.name, c.files, c.lines)
		cost, err := s.ProxyCost(ctx, o.Run, c.name, c.files, c.lines)
		if err != nil {
			return err
		}
		rep.ProxyCost = append(rep.ProxyCost, cost)
	}
	return nil
}

// Throughput is the median saturated rate, turns a second.
func (r Report) Throughput() float64 { return Median(rates(r.Burst)) }

// rates are the rounds' rates, turns a second, in the order they ran.
func rates(rounds []Ingest) []float64 {
	out := make([]float64, len(rounds))
	for i, in := range rounds {
		out[i] = in.Rate
	}
	return out
}

// ScaleRatios compare the scale run's last step with its first: ingest's
// time per turn (the first step's median rate over the last's) and the
// context p99, each last over first.
func (r Report) ScaleRatios() (ingest, contextP99 float64) {
	first, last := r.Scale[0], r.Scale[len(r.Scale)-1]
	return first.Rate() / last.Rate(), ms(Percentile(last.Context, 99)) / ms(Percentile(first.Context, 99))
}

// percentiles are the p50 and p99 through Mnemos and straight, in ms.
func (p ProxyTiming) percentiles() (t50, t99, s50, s99 float64) {
	return ms(Percentile(p.Through, 50)), ms(Percentile(p.Through, 99)), ms(Percentile(p.Straight, 50)), ms(Percentile(p.Straight, 99))
}

// Percentile is the p-th percentile of ds (nearest rank); 0 for none.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Median is the middle value of xs; 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Machine describes where a run ran.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpu_model"`
	Memory   string `json:"memory"`
	OS       string `json:"os"`
	Go       string `json:"go"`
	Postgres string `json:"postgres"`
	NATS     string `json:"nats"`
	// Load is the load average over 1, 5 and 15 minutes.
	Load string `json:"load_average"`
	// Autovacuum is the server's autovacuum setting ("on" or "off"). Off,
	// the benchmark's database keeps every dead row of the runs before
	// but for the VACUUM of the warm-up.
	Autovacuum string `json:"autovacuum"`
	// GC is the collector's target and the soft memory limit the run had,
	// as GOGC and GOMEMLIMIT write them ("off" for none).
	GC string `json:"gc"`
	// Commit is the revision the measured binary was built from, as its
	// build information holds it; empty when unknown (Describe does not
	// set it: the command that runs the benchmark does).
	Commit string `json:"commit,omitempty"`
}

// Describe reads the machine and the servers' versions.
func Describe(ctx context.Context, s *System) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), CPUModel: "unknown CPU", Memory: "unknown", OS: runtime.GOOS, Load: "unknown"}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(data)); len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		m.CPUModel = v
	}
	if v := procField("/proc/meminfo", "MemTotal"); v != "" {
		var kb float64
		if _, err := fmt.Sscanf(v, "%f kB", &kb); err == nil {
			m.Memory = fmt.Sprintf("%.0f GiB", kb/(1<<20))
		}
	}
	if v := procField("/etc/os-release", "PRETTY_NAME"); v != "" {
		m.OS = strings.Trim(v, `"`)
	}
	m.GC = collector()
	m.NATS = s.Bus.Conn().ConnectedServerVersion()
	if conn, err := s.Store.Pool().Acquire(ctx); err == nil {
		m.Postgres = conn.Conn().PgConn().ParameterStatus("server_version")
		_ = conn.QueryRow(ctx, "SELECT current_setting('autovacuum')").Scan(&m.Autovacuum) // left empty when it cannot be read
		conn.Release()
	}
	return m
}

// collector is the garbage collector's target and soft memory limit, as
// the runtime reports them: "GOGC=400 GOMEMLIMIT=off".
func collector() string {
	samples := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(samples)
	gogc, limit := "off", "off"
	if samples[0].Value.Kind() == metrics.KindUint64 && samples[0].Value.Uint64() <= math.MaxInt32 { // off reads as -1
		gogc = strconv.FormatUint(samples[0].Value.Uint64(), 10)
	}
	if samples[1].Value.Kind() == metrics.KindUint64 && samples[1].Value.Uint64() < math.MaxInt64 {
		limit = fmt.Sprintf("%dMiB", samples[1].Value.Uint64()>>20)
	}
	return "GOGC=" + gogc + " GOMEMLIMIT=" + limit
}

// procField returns the value of the first "key: value" or key=value line
// of a file, or "".
func procField(path, key string) string {
	f, err := os.Open(path) //nolint:gosec // fixed system files: /proc/cpuinfo, /proc/meminfo, /etc/os-release
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, key) {
			continue
		}
		rest := strings.TrimSpace(line[len(key):])
		rest = strings.TrimPrefix(strings.TrimPrefix(rest, ":"), "=")
		return strings.TrimSpace(rest)
	}
	return ""
}

// warmPerSession is how many turns each session of the unmeasured warm-up
// round takes.
const warmPerSession = 5

// WarmIngest runs an unmeasured ingest round of sessions × 5 turns (run
// keeps its ids apart), then vacuums the tables and gathers their
// statistics, so that the rounds measured after it meet the database as a
// running one looks: autovacuum analyzes a table within a minute or so of
// its first writes, and a benchmark's ingest is over in less; and it
// removes the rows earlier runs deleted or replaced (the outbox's, the
// sessions' old versions), which on a server whose autovacuum is off
// stay until something vacuums them. Without statistics Postgres
// plans the store's prepared statements from default guesses, and the
// generic plan it settles on after five runs can read the whole tenant (a
// batch's sessions found through the tenant's index of creation times,
// each then compared with the batch's ids).
func (s *System) WarmIngest(ctx context.Context, run string, sessions, publishers int) error {
	turns, err := s.Encode(Events(run+"-warm", sessions, warmPerSession))
	if err != nil {
		return err
	}
	if _, err := s.IngestBurst(ctx, turns, publishers); err != nil {
		return err
	}
	if _, err := s.Owner.Exec(ctx, "VACUUM (ANALYZE) sessions, messages, turns, outbox"); err != nil {
		return fmt.Errorf("benchmark: vacuum: %w", err)
	}
	return nil
}
