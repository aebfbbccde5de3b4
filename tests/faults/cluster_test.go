package faults_test

import (
	"context"
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

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/proctest"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// chaosSeedEnv replays a chaos schedule: the seed a failed run printed.
const chaosSeedEnv = "MNEMOS_CHAOS_SEED"

// chaosSyncEnv sets the nodes' JetStream sync_interval under chaos: unset,
// always (production's setting, deploy/nats/nats.conf); "default" for the
// server's own (every two minutes), or an interval such as 10s.
const chaosSyncEnv = "MNEMOS_CHAOS_SYNC"

// The cluster's load: sessions × rounds events, a pause between two events
// of a session, so the load lasts through the whole schedule.
const (
	chaosSessions = 100
	chaosRounds   = 40
	chaosPause    = 400 * time.Millisecond
)

// TestClusterLosesNothingWhenNodesAndReplicasDie runs Mnemos as a platform
// that outgrew one machine would: a three-node JetStream cluster with every
// stream replicated three times, two gateways and three accountants as
// separate processes, all on one Postgres. Sessions send their events
// through both gateways while a seeded schedule kill -9s and restarts the
// turns stream's leader node, another node, an accountant and a gateway,
// and terminates every Postgres connection.
// Then, with exact counts: every acknowledged event applied once, each
// session's messages stored in seq order, the outbox drained, nothing
// dead-lettered, and the accountants' consumer left with nothing pending.
func TestClusterLosesNothingWhenNodesAndReplicasDie(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(chaosSeedEnv); v != "" {
		var err error
		seed, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s", chaosSeedEnv)
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
	gateways := []*proctest.Process{s.start("gateway", nil), s.start("gateway", nil)}
	var accountants []*proctest.Process
	for range 3 {
		accountants = append(accountants, s.start("token-accounting", nil))
	}

	// Each gateway takes half the sessions.
	work := sessions("c", chaosSessions, chaosRounds)
	halves := []map[string][]turn.Event{{}, {}}
	for i, id := range slices.Sorted(maps.Keys(work)) {
		halves[i%2][id] = work[id]
	}
	loads := []*load{newLoad(s, gateways[0]), newLoad(s, gateways[1])}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
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
	steps := []struct {
		what string
		do   func()
	}{
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
		{"kill -9 an accountant", func() { restart(accountants[rng.IntN(len(accountants))]) }},
		{"kill -9 a gateway", func() { restart(gateways[rng.IntN(len(gateways))]) }},
		{"terminate every Postgres connection of the test's database", func() {
			_, err := s.admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", s.db)
			require.NoError(t, err)
		}},
	}
	rng.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })

	total := int64(chaosSessions * chaosRounds)
	var recoveries []time.Duration
	for i, step := range steps {
		// The steps spread over the load, each at a random point of its part.
		at := total * int64(8+15*i+rng.IntN(8)) / 100
		require.Eventually(t, func() bool { return acked() >= at }, settleTimeout, poll, "load is flowing (%d of %d acknowledged)", acked(), total)
		t.Logf("at %d of %d events acknowledged: %s", acked(), total, step.what)
		killed := time.Now()
		step.do()
		// Recovered once the load moved on by a session's worth of events.
		before := acked()
		require.Eventually(t, func() bool { return acked() >= min(before+chaosRounds, total) }, settleTimeout, poll, "the load recovers after: %s", step.what)
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
	s.waitApplied(all)
	s.waitOutboxEmpty()
	s.waitConsumerSettled(bus.StreamTurns, "token-accounting")

	applied := s.count("SELECT count(*) FROM turns WHERE status = 'applied'")
	doubled := s.count("SELECT count(*) FROM messages") - 2*applied
	outOfOrder := s.count(`SELECT count(*) FROM messages a JOIN messages b
		ON a.tenant_id = b.tenant_id AND a.session_id = b.session_id AND a.seq < b.seq AND a.position > b.position`)
	slices.Sort(recoveries)
	t.Logf("chaos: %d events, JetStream sync %s, %d kills, %d lost, %d doubled, %d out of order, recovery p99 %.1f s",
		total, syncName(syncSetting), len(steps), total-applied, doubled, outOfOrder, recoveries[len(recoveries)-1].Seconds())
	require.Equal(t, total, applied, "every acknowledged event applied once")
	require.Zero(t, doubled, "no message stored twice")
	require.Zero(t, outOfOrder, "every session's messages in seq order")
	checkAcked(t, s, all)
	require.Empty(t, s.deadLetters())
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
