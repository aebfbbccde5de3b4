package faults_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchRSSEnv runs TestRSSWithActiveSessions, which measures rather than
// checks and wants the machine to itself: `make bench-rss` sets it.
const benchRSSEnv = "MNEMOS_BENCH_RSS"

// rssSteps are the active sessions at which the resident set is read.
var rssSteps = []int{1_000, 2_000, 4_000, 6_000, 8_000, 10_000}

// TestRSSWithActiveSessions measures the resident set of one `mnemos
// -target=all` process (every target: the accountant, the compactor,
// session memory, the extractor, the dreamer, recall's prefetch, the
// gateway and the console) as sessions become active: at each step of
// rssSteps, new sessions of two rounds each (a user stating a fact to keep
// and the agent's answer, so extraction runs too) are published until that
// many were active, every one is applied and every event relayed, and the
// process's VmRSS is read after a pause. It logs a table: the RSS at each
// step and what each session added since the step before.
func TestRSSWithActiveSessions(t *testing.T) {
	if os.Getenv(benchRSSEnv) == "" {
		t.Skipf("measures rather than checks, alone on the machine: set %s (make bench-rss)", benchRSSEnv)
	}
	// The tenant's rate and active-session limits are off, as in `mnemos
	// bench`: the point is what the sessions cost, not where a tenant is
	// stopped.
	s := newSystem(t, systemOptions{settings: `{"limits": {"events_per_second": 0, "active_sessions": 0}}`})
	p := s.start("all", nil)
	start, err := p.RSS()
	require.NoError(t, err)

	type step struct {
		sessions int
		rss      int64
		took     time.Duration
	}
	var steps []step
	active := 0
	for _, n := range rssSteps {
		began := time.Now()
		publishSessions(t, s, active, n)
		require.Eventually(t, func() bool {
			return s.count("SELECT count(*) FROM sessions WHERE session_id LIKE 'rss-%' AND applied_seq >= 2") == int64(n)
		}, settleTimeout, poll, "every session applied its two rounds; refused: %v", s.deadLetters())
		s.waitOutboxEmpty()
		time.Sleep(5 * time.Second) // the background work the rounds started settles
		rss, err := p.RSS()
		require.NoError(t, err)
		steps = append(steps, step{sessions: n, rss: rss, took: time.Since(began)})
		active = n
	}

	var b strings.Builder
	fmt.Fprintf(&b, "RSS of mnemos -target=all: %.1f MiB at start\n", mib(start))
	fmt.Fprintln(&b, "| active sessions | RSS | per session since the step before | took |")
	fmt.Fprintln(&b, "|---|---|---|---|")
	prev := step{rss: start}
	for _, st := range steps {
		per := float64(st.rss-prev.rss) / float64(st.sessions-prev.sessions) / 1024
		fmt.Fprintf(&b, "| %d | %.1f MiB | %.1f KiB | %s |\n", st.sessions, mib(st.rss), per, st.took.Round(time.Second))
		prev = st
	}
	t.Log("\n" + b.String())
}

// publishSessions publishes two rounds for each of the sessions rss-<from>
// through rss-<to-1>, eight publishers at a time, each session's rounds in
// order.
func publishSessions(t *testing.T, s *system, from, to int) {
	t.Helper()
	ctx := context.Background()
	ids := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for i := range ids {
				id := fmt.Sprintf("rss-%05d", i)
				for _, ev := range chat(id, fmt.Sprintf("repo-%d", i%50), 2) {
					if _, err := s.publish(ctx, ev); err != nil {
						errs <- fmt.Errorf("%s seq %d: %w", ev.SessionID, ev.Seq, err)
						return
					}
				}
			}
		})
	}
	for i := from; i < to; i++ {
		ids <- i
	}
	close(ids)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
