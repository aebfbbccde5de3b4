package faults_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// benchClusterEnv runs TestClusterIngestThroughput, which measures rather
// than checks and wants the machine to itself: `make bench-cluster` sets it.
const benchClusterEnv = "MNEMOS_BENCH_CLUSTER"

// The measured load: sessions × rounds turn events, each session sending its
// next event as soon as the last one was accepted.
const (
	benchSessions = 100
	benchRounds   = 20
)

// cpuUse is CPU time by what used it.
type cpuUse struct {
	gateways, accountants, nats time.Duration
	// postgres is the backends of the test's database serving the
	// services; postgresShared the server's WAL writer, checkpointer and
	// background writer, which serve every database on the server.
	postgres, postgresShared time.Duration
	// driver is this test process: the load's HTTP clients and the polling.
	driver time.Duration
}

func (c cpuUse) total() time.Duration {
	return c.gateways + c.accountants + c.nats + c.postgres + c.postgresShared + c.driver
}

// ingestRun is one measured configuration.
type ingestRun struct {
	sync        string
	accountants int
	events      int
	elapsed     time.Duration
	cpu         cpuUse
	loadBefore  string
	loadAfter   string
}

func (r ingestRun) rate() float64 { return float64(r.events) / r.elapsed.Seconds() }

// perTurn is d per turn event, in milliseconds.
func (r ingestRun) perTurn(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond) / float64(r.events)
}

// TestClusterIngestThroughput measures saturated ingest on the chaos test's
// cluster (three JetStream nodes, every stream replicated three times, two
// gateways, one Postgres) with 1, 2 and 3 token-accounting replicas, with the
// nodes' JetStream sync at the server's default and at `always`: 2,000 turn
// events over 100 sessions sent through both gateways, timed from the first
// send until Postgres holds all of them applied. It reads every process's
// CPU time (/proc/<pid>/stat) before and after, the Postgres backends' too,
// and prints one table: the rates, and the CPU each turn cost where. The
// two clusters run side by side and the configurations take turns, so a
// change in the machine's load touches both settings alike.
func TestClusterIngestThroughput(t *testing.T) {
	if os.Getenv(benchClusterEnv) == "" {
		t.Skipf("%s is not set: this measures, run it with make bench-cluster", benchClusterEnv)
	}
	syncs := []string{"", "always"}
	clusters := map[string]*proctest.Cluster{}
	for _, s := range syncs {
		clusters[s] = proctest.StartClusterWith(t, bins, 3, proctest.ClusterOptions{Sync: s})
		requireSync(t, clusters[s], s)
	}
	var runs []ingestRun
	for accountants := 1; accountants <= 3; accountants++ {
		for _, s := range syncs {
			t.Run(fmt.Sprintf("sync=%s/accountants=%d", syncName(s), accountants), func(t *testing.T) {
				runs = append(runs, measureIngest(t, clusters[s], s, accountants))
			})
		}
	}
	require.Len(t, runs, 2*3, "every configuration measured")
	fmt.Print(ingestTable(runs))
}

// requireSync checks that every node of cluster syncs as setting says.
func requireSync(t *testing.T, cluster *proctest.Cluster, setting string) {
	t.Helper()
	for i, n := range cluster.Nodes {
		always, interval, err := n.JetStreamSync(context.Background())
		require.NoError(t, err)
		require.Equal(t, setting == "always", always, "node %d syncs after every write", i+1)
		t.Logf("node %d: JetStream sync always %t, interval %s", i+1, always, interval)
	}
}

func syncName(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// measureIngest runs the measured load on a system of its own on cluster:
// two gateways and accountants replicas, started and warmed up first.
func measureIngest(t *testing.T, cluster *proctest.Cluster, syncSetting string, accountants int) ingestRun {
	s := newSystem(t, systemOptions{natsURL: cluster.URL(), replicas: 3})
	gateways := []*proctest.Process{s.start("gateway", nil), s.start("gateway", nil)}
	var accs []*proctest.Process
	for range accountants {
		accs = append(accs, s.start("token-accounting", nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Warm up: connections opened, consumers bound, code paths taken once.
	s.waitApplied(sendThroughGateways(ctx, s, gateways, sessions("w", 20, 3)))
	waitNoOutbox(t, s)

	work := sessions("b", benchSessions, benchRounds)
	run := ingestRun{sync: syncSetting, accountants: accountants, events: benchSessions * benchRounds, loadBefore: loadavg(t)}
	before := cpuNow(t, s, gateways, accs, cluster)
	start := time.Now()
	sent := make(chan map[string]int64, 1)
	go func() { sent <- sendThroughGateways(ctx, s, gateways, work) }()
	for applied(t, s, "b%") < int64(run.events) {
		require.NoError(t, ctx.Err(), "every event applied in time")
		time.Sleep(20 * time.Millisecond)
	}
	run.elapsed = time.Since(start)
	acked := <-sent
	waitNoOutbox(t, s) // the relays' share of the work: turn.accounted published
	run.cpu = cpuNow(t, s, gateways, accs, cluster).since(before)
	run.loadAfter = loadavg(t)

	for id, evs := range work {
		require.EqualValues(t, len(evs), acked[id], "%s: every event accepted", id)
	}
	s.waitConsumerSettled(bus.StreamTurns, "token-accounting")
	require.Empty(t, s.deadLetters())
	t.Logf("%d events in %s: %.0f turns/s, %.2f ms CPU per turn in all", run.events, run.elapsed.Round(time.Millisecond), run.rate(), run.perTurn(run.cpu.total()))
	return run
}

// sendThroughGateways sends each session's events, back to back, through
// one of the gateways (the sessions split between them) and returns the last
// seq accepted of each.
func sendThroughGateways(ctx context.Context, s *system, gateways []*proctest.Process, work map[string][]turn.Event) map[string]int64 {
	parts := make([]map[string][]turn.Event, len(gateways))
	loads := make([]*load, len(gateways))
	for i, g := range gateways {
		parts[i], loads[i] = map[string][]turn.Event{}, newLoad(s, g)
	}
	for i, id := range slices.Sorted(maps.Keys(work)) {
		parts[i%len(gateways)][id] = work[id]
	}
	var wg sync.WaitGroup
	for i, l := range loads {
		wg.Go(func() { l.run(ctx, parts[i], func(string) bool { return true }, 0) })
	}
	wg.Wait()
	acked := map[string]int64{}
	for _, l := range loads {
		maps.Copy(acked, l.lastAcked())
	}
	return acked
}

// applied sums the applied seqs of the sessions whose id is LIKE pattern.
func applied(t *testing.T, s *system, pattern string) int64 {
	t.Helper()
	return s.count("SELECT coalesce(sum(applied_seq), 0)::bigint FROM sessions WHERE session_id LIKE $1", pattern)
}

// waitNoOutbox waits until the outbox relays published every row; through
// the administrator's connection, whose backend is not measured.
func waitNoOutbox(t *testing.T, s *system) {
	t.Helper()
	require.Eventually(t, func() bool { return s.count("SELECT count(*) FROM outbox") == 0 }, settleTimeout, 20*time.Millisecond,
		"the outbox was not drained")
}

// cpuSample is every measured process's CPU time at one moment; Postgres
// backends by pid, as they may come and go.
type cpuSample struct {
	gateways, accountants, nats, driver time.Duration
	postgres, postgresShared            map[int]time.Duration
}

func cpuNow(t *testing.T, s *system, gateways, accountants []*proctest.Process, cluster *proctest.Cluster) cpuSample {
	t.Helper()
	sum := func(ps []*proctest.Process) time.Duration {
		var d time.Duration
		for _, p := range ps {
			c, err := p.CPUTime()
			require.NoError(t, err)
			d += c
		}
		return d
	}
	var nodes []*proctest.Process
	for _, n := range cluster.Nodes {
		nodes = append(nodes, n.Process)
	}
	driver, err := proctest.CPUTime(os.Getpid())
	require.NoError(t, err)
	return cpuSample{
		gateways: sum(gateways), accountants: sum(accountants), nats: sum(nodes), driver: driver,
		// The services connect as another role than the administrator,
		// whose own polling is left out.
		postgres:       backendsCPU(t, s, "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND usename <> current_user", s.db),
		postgresShared: backendsCPU(t, s, "SELECT pid FROM pg_stat_activity WHERE backend_type IN ('walwriter', 'checkpointer', 'background writer')"),
	}
}

// backendsCPU reads the CPU time of the Postgres processes query lists,
// which must run on this machine. A backend that ended meanwhile is skipped.
func backendsCPU(t *testing.T, s *system, query string, args ...any) map[int]time.Duration {
	t.Helper()
	rows, err := s.admin.Query(context.Background(), query, args...)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int]time.Duration{}
	for rows.Next() {
		var pid int
		require.NoError(t, rows.Scan(&pid))
		if c, err := proctest.CPUTime(pid); err == nil {
			out[pid] = c
		}
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, out, "the Postgres server runs on this machine, its processes readable (%s)", query)
	return out
}

// since is the CPU used from before to c. A backend that started meanwhile
// counts from zero; one that ended is lost (the pools keep theirs open).
func (c cpuSample) since(before cpuSample) cpuUse {
	delta := func(now, then map[int]time.Duration) time.Duration {
		var d time.Duration
		for pid, v := range now {
			d += v - then[pid]
		}
		return d
	}
	return cpuUse{
		gateways: c.gateways - before.gateways, accountants: c.accountants - before.accountants,
		nats: c.nats - before.nats, driver: c.driver - before.driver,
		postgres: delta(c.postgres, before.postgres), postgresShared: delta(c.postgresShared, before.postgresShared),
	}
}

// loadavg is the first three fields of /proc/loadavg.
func loadavg(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/loadavg")
	require.NoError(t, err)
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// ingestTable renders the runs as two Markdown tables: the rates, and the
// CPU per turn by process.
func ingestTable(runs []ingestRun) string {
	var b strings.Builder
	first := map[string]float64{} // each sync's rate with one accountant
	for _, r := range runs {
		if r.accountants == 1 {
			first[r.sync] = r.rate()
		}
	}
	fmt.Fprintf(&b, "\n| JetStream sync | accountants | events | seconds | turns/s | ÷ 1 accountant | ÷ default sync | load average before → after |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		var def float64
		for _, o := range runs {
			if o.sync == "" && o.accountants == r.accountants {
				def = o.rate()
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f | %.0f | %.2f | %.2f | %s → %s |\n", syncName(r.sync), r.accountants, r.events,
			r.elapsed.Seconds(), r.rate(), r.rate()/first[r.sync], r.rate()/def, r.loadBefore, r.loadAfter)
	}
	fmt.Fprintf(&b, "\nCPU per turn (ms) by process, over the same runs (`cores busy`: all of it ÷ the run's seconds):\n\n")
	fmt.Fprintf(&b, "| JetStream sync | accountants | gateways (2) | accountants | NATS nodes (3) | Postgres backends | Postgres WAL writer etc. (shared) | load driver | all | cores busy |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		c := r.cpu
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", syncName(r.sync), r.accountants,
			r.perTurn(c.gateways), r.perTurn(c.accountants), r.perTurn(c.nats), r.perTurn(c.postgres), r.perTurn(c.postgresShared),
			r.perTurn(c.driver), r.perTurn(c.total()), c.total().Seconds()/r.elapsed.Seconds())
	}
	return b.String()
}
