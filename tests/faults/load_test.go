package faults_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// load sends sessions of events the way backends do, one event at a time
// per session, in seq order, repeating an event until it is acknowledged:
// over HTTP to a gateway (202) or straight to NATS (a PubAck). It remembers
// which events were acknowledged.
type load struct {
	s       *system
	gateway *proctest.Process // nil: every session publishes to NATS

	mu    sync.Mutex
	acked map[string]int64 // session → last acknowledged seq
	tries int              // sends that failed and were repeated
}

func newLoad(s *system, gateway *proctest.Process) *load {
	return &load{s: s, gateway: gateway, acked: map[string]int64{}}
}

// run sends every session's events until they are all acknowledged or ctx
// ends; pause is the wait between two events of a session.
func (l *load) run(ctx context.Context, sessions map[string][]turn.Event, viaHTTP func(session string) bool, pause time.Duration) {
	var wg sync.WaitGroup
	for id, evs := range sessions {
		wg.Go(func() {
			for _, ev := range evs {
				for !l.send(ctx, ev, viaHTTP(id)) {
					if ctx.Err() != nil {
						return
					}
					l.mu.Lock()
					l.tries++
					l.mu.Unlock()
					sleep(ctx, 200*time.Millisecond)
				}
				l.mu.Lock()
				l.acked[id] = ev.Seq
				l.mu.Unlock()
				sleep(ctx, pause)
			}
		})
	}
	wg.Wait()
}

func (l *load) send(ctx context.Context, ev turn.Event, viaHTTP bool) bool {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if viaHTTP {
		return post(cctx, l.gateway, ev) == http.StatusAccepted
	}
	_, err := l.s.publish(cctx, ev)
	return err == nil
}

// lastAcked is every session's last acknowledged seq.
func (l *load) lastAcked() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int64{}
	for k, v := range l.acked {
		out[k] = v
	}
	return out
}

func (l *load) retried() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tries
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// sessions makes n sessions named prefix0…, of rounds events each.
func sessions(prefix string, n, rounds int) map[string][]turn.Event {
	out := map[string][]turn.Event{}
	for i := range n {
		id := fmt.Sprintf("%s%d", prefix, i)
		out[id] = session(id, rounds, eventOptions{usage: true, firstInput: 3_000})
	}
	return out
}

// checkAcked: every acknowledged event is in Postgres, applied, and every
// message of a session is stored once.
func checkAcked(t *testing.T, s *system, acked map[string]int64) {
	t.Helper()
	for id, last := range acked {
		require.Equal(t, last, s.count("SELECT count(*) FROM turns WHERE session_id = $1 AND status = 'applied' AND seq <= $2", id, last),
			"%s: every acknowledged event applied", id)
		sess := s.count("SELECT message_count FROM sessions WHERE session_id = $1", id)
		require.Equal(t, sess, s.count("SELECT count(*) FROM messages WHERE session_id = $1", id), "%s: the count matches the rows", id)
		require.Equal(t, 2*s.count("SELECT count(*) FROM turns WHERE session_id = $1", id), sess, "%s: two messages per event, none twice", id)
	}
}

func TestNATSRestartUnderLoadLosesNoAcknowledgedEvent(t *testing.T) {
	t.Parallel()
	n := proctest.StartNATS(t, bins)
	s := newSystem(t, systemOptions{natsURL: n.URL()})
	gw := s.start("gateway", nil)
	s.start("token-accounting", nil)

	l := newLoad(s, gw)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	work := sessions("n", 8, 60)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Half the sessions go through the gateway, half straight to NATS.
		l.run(ctx, work, func(id string) bool { return id[len(id)-1]%2 == 0 }, 50*time.Millisecond)
	}()

	// Twice under load: killed outright, then stopped cleanly.
	for _, stop := range []func(){n.Kill, n.Stop} {
		require.Eventually(t, func() bool {
			total := int64(0)
			for _, seq := range l.lastAcked() {
				total += seq
			}
			return total >= 60
		}, settleTimeout, poll, "load is flowing")
		stop()
		sleep(ctx, 2*time.Second) // publishes fail meanwhile and are repeated
		n.Restart(t)
		before := l.lastAcked()
		require.Eventually(t, func() bool {
			after := l.lastAcked()
			for id := range work {
				if after[id] <= before[id] && after[id] < int64(len(work[id])) {
					return false
				}
			}
			return true
		}, settleTimeout, poll, "every session makes progress after the restart")
	}
	<-done
	t.Logf("sends repeated after a refusal or no answer: %d", l.retried())

	acked := l.lastAcked()
	for id, evs := range work {
		require.EqualValues(t, len(evs), acked[id], id)
	}
	s.waitApplied(acked)
	checkAcked(t, s, acked)
	require.Empty(t, s.deadLetters())
}

// TestPostgresBackendsTerminatedForAMinuteLoseNothing terminates every
// connection of the test database at random intervals for a whole minute,
// while a gateway and an accountant (separate processes, each with its
// outbox relay) take load over HTTP and NATS.
func TestPostgresBackendsTerminatedForAMinuteLoseNothing(t *testing.T) {
	t.Parallel()
	s := newSystem(t, systemOptions{})
	gw := s.start("gateway", nil)
	acc := s.start("token-accounting", nil)

	l := newLoad(s, gw)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	work := sessions("p", 8, 2_000) // more than a minute's worth
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.run(ctx, work, func(id string) bool { return id[len(id)-1]%2 == 0 }, 100*time.Millisecond)
	}()

	// A connection of its own, so the killer is never killed.
	killer, err := pgx.Connect(ctx, s.env["MNEMOS_DATABASE_URL"])
	require.NoError(t, err)
	defer killer.Close(context.Background())
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var rounds, terminated int
	for end := time.Now().Add(time.Minute); time.Now().Before(end); {
		sleep(ctx, time.Duration(100+r.IntN(1400))*time.Millisecond)
		var n int
		require.NoError(t, killer.QueryRow(ctx,
			"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", s.db).Scan(&n))
		rounds++
		terminated += n
	}
	t.Logf("terminated %d connections in %d rounds; sends repeated: %d", terminated, rounds, l.retried())
	require.Greater(t, terminated, rounds/2, "connections were there to terminate, again and again")

	// Work resumes: every session moves on after the last termination.
	before := l.lastAcked()
	require.Eventually(t, func() bool {
		after := l.lastAcked()
		for id := range work {
			if after[id] < before[id]+5 {
				return false
			}
		}
		return true
	}, settleTimeout, poll, "every session makes progress once the terminations stop")
	cancel()
	<-done

	acked := l.lastAcked()
	s.waitApplied(acked)
	checkAcked(t, s, acked)
	s.waitOutboxEmpty()
	require.Empty(t, s.deadLetters(), "an outage dead-letters nothing")
	require.True(t, gw.Ready(), "the gateway's pool reconnected")
	require.True(t, acc.Ready(), "the accountant's pool reconnected")
}
