package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/faults"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// crashCase is a consumer killed right after one of its commits, before the
// message is acknowledged, then restarted: the message comes back, and the
// consumer must see that its work is done. Each service that consumes
// events has its case here.
type crashCase struct {
	name string
	// target runs the consumer; point is its durable name, consuming
	// stream; the process exits after the hit-th message it handled.
	target, point, stream string
	hit                   int
	// others run alongside and are not touched.
	others []string
	// env is added to every target's environment.
	env map[string]string
	// work publishes the workload and returns each session's last seq.
	work func(t *testing.T, s *system) map[string]int64
	// check asserts that nothing was lost and nothing applied twice, once
	// every session applied its last seq, the consumer acknowledged every
	// message and the outbox is empty.
	check func(t *testing.T, s *system, last map[string]int64)
}

func crashCases() []crashCase {
	return []crashCase{
		{
			name: "accountant", target: "token-accounting", point: "token-accounting", stream: bus.StreamTurns, hit: 40,
			work: func(t *testing.T, s *system) map[string]int64 {
				last := map[string]int64{}
				var all []turn.Event
				for i := range 20 {
					id := fmt.Sprintf("s%02d", i)
					all = append(all, session(id, 10, eventOptions{usage: true, firstInput: 5_000})...)
					last[id] = 10
				}
				for _, ev := range all {
					_, err := s.publish(context.Background(), ev)
					require.NoError(t, err)
				}
				return last
			},
			check: checkTurns,
		},
		{
			name: "compactor", target: "compactor", point: "compactor", stream: bus.StreamEvents, hit: 1,
			others: []string{"token-accounting"},
			// A short lease: the request the compactor crashed on comes back
			// after it, not after the default two minutes.
			env: map[string]string{"MNEMOS_COMPACTION_LEASE": "10s"},
			work: func(t *testing.T, s *system) map[string]int64 {
				last := map[string]int64{}
				for i := range 3 {
					id := fmt.Sprintf("c%d", i)
					// A 40,000-token window compacts at 23,000 tokens: about
					// every eleventh round of 6 KB tool results.
					for _, ev := range session(id, 30, eventOptions{window: 40_000, maxOutput: 4_000, resultBytes: 6_000}) {
						_, err := s.publish(context.Background(), ev)
						require.NoError(t, err)
					}
					last[id] = 30
				}
				return last
			},
			check: func(t *testing.T, s *system, last map[string]int64) {
				checkTurns(t, s, last)
				checkCompactions(t, s)
			},
		},
		{
			name: "session-memory", target: "session-memory", point: "session-memory", stream: bus.StreamEvents, hit: 1,
			others: []string{"token-accounting"},
			// The turn the process crashed on comes back after the lease, and
			// so does a claim the second kill leaves behind.
			env: map[string]string{"MNEMOS_SESSION_MEMORY_LEASE": "10s"},
			work: func(t *testing.T, s *system) map[string]int64 {
				const rounds = 12
				last := map[string]int64{}
				// The first message the service handles is n0's first turn,
				// which is due: the crash comes right after its update.
				first := notesSession("n0", rounds)
				publishAll(t, s, first[:1])
				require.Eventually(t, func() bool {
					return s.count("SELECT count(*) FROM session_notes WHERE session_id = 'n0' AND version > 0") == 1
				}, settleTimeout, poll, "n0's first update")
				publishAll(t, s, first[1:])
				last["n0"] = rounds
				for i := 1; i < 6; i++ {
					id := fmt.Sprintf("n%d", i)
					publishAll(t, s, notesSession(id, rounds))
					last[id] = rounds
				}
				return last
			},
			check: func(t *testing.T, s *system, last map[string]int64) {
				checkTurns(t, s, last)
				checkNotes(t, s, last)
			},
		},
		{
			name: "extractor", target: "extractor", point: "extractor", stream: bus.StreamEvents, hit: 1,
			others: []string{"token-accounting"},
			env:    map[string]string{"MNEMOS_EXTRACTOR_LEASE": "10s"},
			work: func(t *testing.T, s *system) map[string]int64 {
				const rounds = 5
				last := map[string]int64{}
				// Two scopes of three sessions each: runs of one scope are
				// coalesced while the other's run.
				scopes := extractorScopes()
				// The first message the service handles is x0's first turn: the
				// crash comes right after its run saved the fact and moved the
				// cursor.
				first := chat("x0", scopes["x0"], rounds)
				publishAll(t, s, first[:1])
				require.Eventually(t, func() bool {
					return s.count("SELECT count(*) FROM extractor_cursors WHERE session_id = 'x0' AND seq = 1") == 1
				}, settleTimeout, poll, "x0's first run")
				publishAll(t, s, first[1:])
				last["x0"] = rounds
				for i := 1; i < len(scopes); i++ {
					id := fmt.Sprintf("x%d", i)
					publishAll(t, s, chat(id, scopes[id], rounds))
					last[id] = rounds
				}
				return last
			},
			check: func(t *testing.T, s *system, last map[string]int64) {
				checkTurns(t, s, last)
				checkExtraction(t, s, last, extractorScopes())
			},
		},
	}
}

// extractorScopes are the project scopes of the extractor case's sessions.
func extractorScopes() map[string]string {
	return map[string]string{"x0": "repo-a", "x1": "repo-b", "x2": "repo-a", "x3": "repo-b", "x4": "repo-a", "x5": "repo-b"}
}

func TestCrashAfterCommitLosesNothingAndAppliesNothingTwice(t *testing.T) {
	t.Parallel()
	for _, c := range crashCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newSystem(t, systemOptions{})
			for _, o := range c.others {
				s.start(o, c.env)
			}
			env := map[string]string{"MNEMOS_FAULT_CRASH_AFTER_COMMIT": fmt.Sprintf("%s:%d", c.point, c.hit)}
			for k, v := range c.env {
				env[k] = v
			}
			p := s.start(c.target, env)
			last := c.work(t, s)

			require.Equal(t, faults.ExitCode, p.WaitExit(t, settleTimeout), "%s crashed at its crash point", c.target)
			p.RestartWith(t, map[string]string{"MNEMOS_FAULT_CRASH_AFTER_COMMIT": ""})

			// And once more, killed at whatever it is doing.
			time.Sleep(time.Second)
			p.Kill()
			p.Restart(t)

			s.waitApplied(last)
			// The message the first process crashed on was never acknowledged:
			// once every message is, it came back and was found done.
			s.waitConsumerSettled(c.stream, c.point)
			s.waitOutboxEmpty()
			c.check(t, s, last)
			require.Empty(t, s.deadLetters(), "nothing was refused")
		})
	}
}

// checkTurns: every event applied once, every message stored once, and one
// turn.accounted per event on the bus.
func checkTurns(t *testing.T, s *system, last map[string]int64) {
	t.Helper()
	events := checkRows(t, s, last)
	accounted := s.msgIDs(bus.StreamEvents, bus.KindTurnAccounted+".>")
	require.Len(t, accounted, int(events), "one turn.accounted per event")
	for id, n := range accounted {
		require.Equal(t, 1, n, "%s published once (within the duplicate window)", id)
	}
}

// checkRows: every event applied once and every message stored once. It
// returns the number of events.
func checkRows(t *testing.T, s *system, last map[string]int64) int64 {
	t.Helper()
	var events, messages int64
	for id, n := range last {
		events += n
		messages += 2 * n
		require.Equal(t, n, s.count("SELECT count(*) FROM turns WHERE session_id = $1 AND status = 'applied'", id), id)
		require.Equal(t, 2*n, s.count("SELECT count(*) FROM messages WHERE session_id = $1", id), "%s: every message stored once", id)
		require.Equal(t, 2*n, s.count("SELECT message_count FROM sessions WHERE session_id = $1", id), id)
	}
	require.Equal(t, events, s.count("SELECT count(*) FROM turns"))
	require.Equal(t, messages, s.count("SELECT count(*) FROM messages"))
	require.Zero(t, s.count("SELECT count(*) FROM outbox"))
	return events
}

// checkCompactions: one compaction per request, each completed once and
// announced once; none left running.
func checkCompactions(t *testing.T, s *system) {
	t.Helper()
	requests := s.msgIDs(bus.StreamEvents, bus.KindCompactRequested+".>")
	require.NotEmpty(t, requests, "the workload crossed the auto-compact threshold")
	require.Equal(t, int64(len(requests)), s.count("SELECT count(*) FROM compactions"), "one compaction per request")
	require.Equal(t, int64(len(requests)), s.count("SELECT count(*) FROM compactions WHERE status IN ('completed', 'skipped')"), "every one ended")
	require.Zero(t, s.count("SELECT count(*) FROM sessions WHERE compaction_in_flight"))
	completed := s.msgIDs(bus.StreamEvents, bus.KindCompactCompleted+".>")
	require.Len(t, completed, int(s.count("SELECT count(*) FROM compactions WHERE status = 'completed'")))
	require.NotEmpty(t, completed)
	for id, n := range completed {
		require.Equal(t, 1, n, "%s announced once", id)
	}
}
