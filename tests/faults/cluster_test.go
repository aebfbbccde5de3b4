package faults_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// chaosSeedEnv replays a chaos schedule: the seed a failed run printed.
const chaosSeedEnv = "MNEMOS_CHAOS_SEED"

// chaosSyncEnv sets the nodes' JetStream sync_interval under chaos: unset,
// always (production's setting, deploy/nats/nats.conf); "default" for the
// server's own (every two minutes), or an interval such as 10s.
const chaosSyncEnv = "MNEMOS_CHAOS_SYNC"

// chaosSizeEnv sets the load: "<sessions>x<rounds>", e.g. 100x40 for a
// shorter run than the default.
const chaosSizeEnv = "MNEMOS_CHAOS_SIZE"

// The cluster's load: sessions × rounds events over two tenants, a pause
// between two events of a session, so the load lasts through the whole
// schedule. Two sessions in compactEvery (one of each tenant) work with
// large tool results in a small window, and are compacted several times on
// the way.
const (
	chaosSessions = 500
	chaosRounds   = 40
	chaosPause    = 400 * time.Millisecond
	compactEvery  = 20
)

// The targets' replicas under chaos.
var chaosReplicas = []struct {
	target string
	n      int
}{
	{"gateway", 2}, {"token-accounting", 3}, {"compactor", 2}, {"session-memory", 2}, {"extractor", 2}, {"dreamer", 1},
}

// TestClusterLosesNothingWhenNodesAndReplicasDie runs Mnemos as a platform
// that outgrew one machine would: a three-node JetStream cluster with every
// stream replicated three times, every target as separate processes (two
// gateways, three accountants, two compactors, two session-memory, two
// extractors, a dreamer), all on one Postgres. Two tenants' sessions send
// their events through both gateways while a seeded schedule kill -9s and
// restarts the turns stream's leader node, another node, one replica of
// every target, and terminates every Postgres connection.
// Then, with exact counts: every acknowledged event applied once, each
// session's messages stored in seq order, no session compacted twice at
// once, every compaction requested done, each tenant's rows its own, the
// outbox drained, nothing dead-lettered, and every consumer left with
// nothing pending.
func TestClusterLosesNothingWhenNodesAndReplicasDie(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(chaosSeedEnv); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s", chaosSeedEnv)
	}
	nSessions, rounds := chaosSessions, chaosRounds
	if v := os.Getenv(chaosSizeEnv); v != "" {
		_, err := fmt.Sscanf(v, "%dx%d", &nSessions, &rounds)
		require.NoError(t, err, "%s: <sessions>x<rounds>", chaosSizeEnv)
	}
	t.Logf("chaos seed %d (replay with %s=%d)", seed, chaosSeedEnv, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	syncSetting := "always"
	if v := os.Getenv(chaosSyncEnv); v == "default" {
		syncSetting = ""
	} else if v != "" {
		syncSetting = v
	}

	cluster := proctest.StartClusterWith(t, bins, 3, proctest.ClusterOptions{Sync: syncSetting})
	requireSync(t, cluster, syncSetting)
	s := newSystem(t, systemOptions{natsURL: cluster.URL(), replicas: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	require.NoError(t, s.store.EnsureTenant(ctx, otherTenant, "Globex"))
	require.NoError(t, s.store.AddAPIKey(ctx, otherTenant, "faults", otherKey))
	// Work a killed replica held comes back after its lease, well within
	// the run.
	leases := map[string]string{"MNEMOS_COMPACTION_LEASE": "10s", "MNEMOS_SESSION_MEMORY_LEASE": "10s", "MNEMOS_EXTRACTOR_LEASE": "10s"}
	replicas := map[string][]*proctest.Process{}
	for _, r := range chaosReplicas {
		for range r.n {
			replicas[r.target] = append(replicas[r.target], s.start(r.target, leases))
		}
	}

	// Sessions alternate between the tenants, and each gateway takes half.
	work, tenantOf := map[string][]turn.Event{}, map[string]string{}
	for i := range nSessions {
		id, o := fmt.Sprintf("c%d", i), eventOptions{usage: true, firstInput: 3_000, tenant: tenant}
		if i%2 == 1 {
			id, o.tenant = fmt.Sprintf("g%d", i), otherTenant
		}
		if i%compactEvery < 2 { // one session of each tenant
			// A 40,000-token window compacts at 23,000 tokens: about every
			// eleventh round of 6 KB tool results.
			o = eventOptions{window: 40_000, maxOutput: 4_000, resultBytes: 6_000, tenant: o.tenant}
		}
		work[id], tenantOf[id] = session(id, rounds, o), o.tenant
	}
	halves := []map[string][]turn.Event{{}, {}}
	for i, id := range slices.Sorted(maps.Keys(work)) {
		halves[i%2][id] = work[id]
	}
	gateways := replicas["gateway"]
	loads := []*load{newLoad(s, gateways[0]), newLoad(s, gateways[1])}
	var running sync.WaitGroup
	for i, l := range loads {
		running.Go(func() { l.run(ctx, halves[i], func(string) bool { return true }, chaosPause) })
	}
	acked := func() int64 {
		var n int64
		for _, l := range loads {
			for _, seq := range l.lastAcked() {
				n += seq
			}
		}
		return n
	}

	turns := s.bus.StreamName(bus.StreamTurns)
	// restart kills a process and starts it again after a moment.
	restart := func(p *proctest.Process) {
		p.Kill()
		sleep(ctx, time.Duration(500+rng.IntN(1500))*time.Millisecond)
		p.Restart(t)
	}
	type step struct {
		what string
		do   func()
	}
	steps := []step{
		{"kill -9 the turns stream's leader node", func() {
			var leader *proctest.NATS
			require.Eventually(t, func() bool {
				var err error
				leader, err = cluster.StreamLeader(ctx, turns)
				return err == nil
			}, settleTimeout, poll, "the turns stream has a leader")
			restart(leader.Process)
		}},
		{"kill -9 a node that does not lead the turns stream", func() {
			leader, err := cluster.StreamLeader(ctx, turns)
			require.NoError(t, err)
			others := slices.DeleteFunc(slices.Clone(cluster.Nodes), func(n *proctest.NATS) bool { return n == leader })
			restart(others[rng.IntN(len(others))].Process)
		}},
		{"terminate every Postgres connection of the test's database", func() {
			_, err := s.admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", s.db)
			require.NoError(t, err)
		}},
	}
	for _, r := range chaosReplicas {
		steps = append(steps, step{"kill -9 a replica of " + r.target, func() {
			ps := replicas[r.target]
			restart(ps[rng.IntN(len(ps))])
		}})
	}
	rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })

	total := int64(nSessions * rounds)
	start := time.Now()
	var recoveries []time.Duration
	spread := 80 / len(steps) // percent of the load between two steps
	for i, step := range steps {
		// The steps spread over the load, each at a random point of its part.
		at := total * int64(5+spread*i+rng.IntN(spread/2+1)) / 100
		require.Eventually(t, func() bool { return acked() >= at }, settleTimeout, poll, "load is flowing (%d of %d acknowledged)", acked(), total)
		t.Logf("at %d of %d events acknowledged: %s", acked(), total, step.what)
		killed := time.Now()
		step.do()
		// Recovered once the load moved on by a session's worth of events.
		before := acked()
		require.Eventually(t, func() bool { return acked() >= min(before+int64(rounds), total) }, settleTimeout, poll, "the load recovers after: %s", step.what)
		recoveries = append(recoveries, time.Since(killed))
	}
	running.Wait()
	require.NoError(t, ctx.Err(), "the load finished in time")

	all := map[string]int64{}
	for _, l := range loads {
		for id, seq := range l.lastAcked() {
			all[id] = seq
		}
	}
	for id, evs := range work {
		require.EqualValues(t, len(evs), all[id], "%s: every event acknowledged", id)
	}
	s.waitApplied(all, tenantOf)
	loaded := time.Since(start)
	s.waitOutboxEmpty()
	s.waitConsumerSettled(bus.StreamTurns, "token-accounting")
	for _, durable := range []string{"compactor", "session-memory", "extractor"} {
		s.waitConsumerSettled(bus.StreamEvents, durable)
	}
	// Every compaction requested ends; none is left running.
	require.Eventually(t, func() bool {
		return s.count("SELECT count(*) FROM compactions WHERE status IN ('requested', 'running')") == 0
	}, settleTimeout, poll, "every compaction ended")

	applied := s.count("SELECT count(*) FROM turns WHERE status = 'applied'")
	doubled := s.count("SELECT count(*) FROM messages") - 2*applied
	outOfOrder := s.count(`SELECT count(*) FROM messages a JOIN messages b
		ON a.tenant_id = b.tenant_id AND a.session_id = b.session_id AND a.seq < b.seq AND a.position > b.position`)
	slices.Sort(recoveries)
	t.Logf("chaos: %d events, JetStream sync %s, %d kills, %d lost, %d doubled, %d out of order, recovery p99 %.1f s (load applied in %.0f s)",
		total, syncName(syncSetting), len(steps), total-applied, doubled, outOfOrder, recoveries[len(recoveries)-1].Seconds(), loaded.Seconds())
	require.Equal(t, total, applied, "every acknowledged event applied once")
	require.Zero(t, doubled, "no message stored twice")
	require.Zero(t, outOfOrder, "every session's messages in seq order")
	checkAcked(t, s, all)
	checkChaosCompactions(t, s, work)
	checkTenantsApart(t, s, tenantOf)
	require.Empty(t, s.deadLetters())
}

// checkChaosCompactions: no session was compacted by two compactions at
// once, every compaction requested has its one row and ended, and every
// session that worked in a small window was compacted.
func checkChaosCompactions(t *testing.T, s *system, work map[string][]turn.Event) {
	t.Helper()
	overlapping := s.count(`SELECT count(*) FROM compactions a JOIN compactions b
		ON a.tenant_id = b.tenant_id AND a.session_id = b.session_id AND a.id < b.id
		WHERE a.started_at < b.finished_at AND b.started_at < a.finished_at`)
	require.Zero(t, overlapping, "no session compacted twice at once")
	requests := s.msgIDs(bus.StreamEvents, bus.KindCompactRequested+".>")
	require.Equal(t, int64(len(requests)), s.count("SELECT count(*) FROM compactions WHERE trigger = 'auto'"), "one compaction per request")
	require.Equal(t, int64(len(requests)), s.count("SELECT count(*) FROM compactions WHERE status IN ('completed', 'skipped')"), "every one ended")
	require.Zero(t, s.count("SELECT count(*) FROM sessions WHERE compaction_in_flight"))
	compacting := 0
	for id, evs := range work {
		if evs[0].ContextWindow == 0 {
			require.Zero(t, s.count("SELECT count(*) FROM compactions WHERE session_id = $1", id), "%s: never near its window", id)
			continue
		}
		compacting++
		require.Positive(t, s.count("SELECT count(*) FROM compactions WHERE session_id = $1 AND status = 'completed'", id),
			"%s crossed its auto-compact threshold and was compacted", id)
	}
	t.Logf("compactions: %d requested over %d sessions in small windows, none overlapping", len(requests), compacting)
}

// checkTenantsApart: every row of a session is its tenant's, and each
// tenant holds exactly its own sessions.
func checkTenantsApart(t *testing.T, s *system, tenantOf map[string]string) {
	t.Helper()
	ids, owners := slices.Collect(maps.Keys(tenantOf)), []string{}
	for _, id := range ids {
		owners = append(owners, tenantOf[id])
	}
	for _, table := range []string{"sessions", "turns", "messages", "compactions", "session_notes"} {
		require.Zero(t, s.count("SELECT count(*) FROM "+table+" t JOIN unnest($1::text[], $2::text[]) AS o(session_id, tenant_id) USING (session_id) WHERE t.tenant_id <> o.tenant_id",
			ids, owners), "every row of %s is its session's tenant's", table)
	}
	for _, owner := range []string{tenant, otherTenant} {
		want := 0
		for _, o := range tenantOf {
			if o == owner {
				want++
			}
		}
		require.EqualValues(t, want, s.count("SELECT count(*) FROM sessions WHERE tenant_id = $1", owner), "%s holds its own sessions", owner)
	}
}

// TestATargetStartedWhileTheClusterHasNoLeaderWaitsForIt: a target that
// starts while its JetStream cluster cannot answer (two of three nodes
// down: no meta leader) waits until it can, and serves. It used to exit at
// its first unanswered request, which the chaos schedule found: a gateway
// restarted just after a node was.
func TestATargetStartedWhileTheClusterHasNoLeaderWaitsForIt(t *testing.T) {
	t.Parallel()
	cluster := proctest.StartCluster(t, bins, 3)
	s := newSystem(t, systemOptions{natsURL: cluster.URL(), replicas: 3})
	down := cluster.Nodes[1:]
	for _, n := range down {
		n.Kill()
	}
	// Back after longer than one request's wait, from another goroutine:
	// the gateway's start below blocks until it is ready.
	back := time.AfterFunc(8*time.Second, func() {
		for _, n := range down {
			n.Restart(t)
		}
	})
	defer back.Stop()
	gw := s.start("gateway", nil)
	ev := session("waited", 1, eventOptions{})[0]
	require.Eventually(t, func() bool { return post(context.Background(), gw, ev) == http.StatusAccepted },
		settleTimeout, poll, "the gateway serves once the cluster answers")
}
