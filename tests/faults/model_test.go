package faults_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/llm/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/proctest"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// modelFault is a way the model provider misbehaves, as the fake server of
// pkg/llm/llmtest plays it to the real SDK client inside the process.
type modelFault struct {
	name   string
	script llmtest.Script
	env    map[string]string
	// usable: the answers, or the last of the retries, can be used.
	usable bool
	// attempts is how many calls one request of the service makes to the
	// fake server while the service's circuit is closed.
	attempts int
}

// garbageMarker is in every garbled answer; no stored output may hold it.
const garbageMarker = "zz-garbled-zz"

// goodSummary is what a working model answers a summary request with.
const goodSummary = "<analysis>What happened first.</analysis>\n<summary>\n## 1. Primary Request and Intent\nThe user wants the build green again.\n</summary>"

func modelFaults() []modelFault {
	return []modelFault{
		{name: "failing", script: always(llmtest.ServerError()), attempts: 4},
		{name: "slow", script: always(llmtest.Hang()), attempts: 4,
			env: map[string]string{"MNEMOS_LLM_TIMEOUT": "1s"}},
		{name: "garbled body", attempts: 1,
			script: always(llmtest.Garbage(`{"id": "msg_1", "type": "message", "content": [{"type": "text", "text": "` + garbageMarker))},
		{name: "empty answer", script: always(llmtest.Text("")), attempts: 1},
		{name: "no summary, only analysis", attempts: 1,
			script: always(llmtest.Text("<analysis>" + garbageMarker + " and it never ends"))},
		{name: "longer than it may write", attempts: 1,
			script: always(llmtest.Text(strings.Repeat(garbageMarker+" ", 200_000)))},
		{name: "NUL characters", usable: true, attempts: 1,
			script: always(llmtest.Text(strings.ReplaceAll(goodSummary, "build", "build\x00")))},
		{name: "flaky then fine", usable: true, attempts: 1,
			script: llmtest.Sequence(llmtest.RateLimited(), llmtest.ServerError(), llmtest.Text(goodSummary))},
	}
}

func always(r llmtest.Reply) llmtest.Script { return func(llmtest.Request) llmtest.Reply { return r } }

// modelUser is a service that calls the model: how to make it do so, and
// what it must have stored whatever the model did. The session-memory and
// long-term memory services add theirs here.
type modelUser struct {
	name string
	// settings are the tenant's settings for the test.
	settings string
	// requests the service makes before its circuit opens on failures.
	breakerAfter int
	// work drives the service until it finished n requests.
	work func(t *testing.T, s *system, n int)
	// check asserts what the service stored after the requests.
	check func(t *testing.T, s *system, api *proctest.Process, f modelFault)
}

func modelUsers() []modelUser {
	return []modelUser{compactorModelUser()}
}

// compactorModelUser: automatic compactions of one session whose window is
// 40,000 tokens (auto-compact at 23,000).
func compactorModelUser() modelUser {
	const session = "m1"
	return modelUser{
		// Only the compactor calls the model: the services that would call it
		// on the same turns (notes, extraction, recall) are off for the tenant.
		name: "compactor", breakerAfter: 2,
		settings: `{"compaction": {"breaker_failures": 2}, "session_memory": {"enabled": false},
			"extraction": {"enabled": false}, "recall": {"enabled": false}, "dreaming": {"enabled": false}}`,
		work: func(t *testing.T, s *system, n int) {
			evs := session40k(session, 400)
			deadline := time.Now().Add(settleTimeout)
			for next := 0; s.count("SELECT count(*) FROM compactions WHERE status NOT IN ('requested', 'running')") < int64(n); {
				require.True(t, time.Now().Before(deadline), "%d compactions within %s", n, settleTimeout)
				require.Less(t, next, len(evs), "the session ran out of rounds")
				// A backend waiting for the compaction in flight before its next round.
				if s.count("SELECT count(*) FROM sessions WHERE session_id = $1 AND compaction_in_flight", session) > 0 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				_, err := s.publish(context.Background(), evs[next])
				require.NoError(t, err)
				next++
				s.waitApplied(map[string]int64{session: int64(next)})
			}
		},
		check: func(t *testing.T, s *system, api *proctest.Process, f modelFault) {
			rows, err := s.admin.Query(context.Background(),
				"SELECT status, method, summary, error, llm_calls FROM compactions ORDER BY created_at")
			require.NoError(t, err)
			defer rows.Close()
			i := 0
			for rows.Next() {
				var status, method, summary, cerr string
				var calls int
				require.NoError(t, rows.Scan(&status, &method, &summary, &cerr, &calls))
				require.Equal(t, "completed", status, "compaction %d: the session was compacted whatever the model did (%s)", i, cerr)
				require.NotEmpty(t, strings.TrimSpace(summary), "compaction %d has a summary", i)
				require.NotContains(t, summary, garbageMarker, "compaction %d stored no garbage", i)
				require.NotContains(t, summary, "\x00")
				if f.usable {
					require.Equal(t, "full", method, "compaction %d: the model's summary", i)
					require.Contains(t, summary, "The user wants the build")
					require.NotContains(t, summary, "What happened first", "the analysis is stripped")
				} else {
					require.Equal(t, "extractive", method, "compaction %d fell back to the extractive summary", i)
					if i < 2 {
						require.NotEmpty(t, cerr, "compaction %d records why the model's summary was not used", i)
					}
				}
				i++
			}
			require.NoError(t, rows.Err())
			circuit := s.count("SELECT count(*) FROM sessions WHERE session_id = $1 AND compact_circuit_open", session)
			if f.usable {
				require.Zero(t, circuit)
			} else {
				require.EqualValues(t, 1, circuit, "the session's circuit opened")
				require.Len(t, s.msgIDs(bus.StreamEvents, bus.KindCircuitOpened+".>"), 1)
			}
			// The context served next starts with the boundary and the summary.
			req, err := http.NewRequest(http.MethodGet, api.URL()+"/v1/sessions/"+session+"/context", nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+apiKey)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var body struct {
				Messages []struct {
					Content turn.Content `json:"content"`
				} `json:"messages"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			require.NotEmpty(t, body.Messages)
			head := body.Messages[0].Content
			require.GreaterOrEqual(t, len(head), 2)
			require.True(t, strings.HasPrefix(head[0].Text, "<mnemos:compact-boundary "), head[0].Text)
			require.NotContains(t, head[1].Text, garbageMarker)
		},
	}
}

// session40k is a session reporting a 40,000-token window, each round
// adding a 6 KB tool result (about 2,000 tokens, counted by the estimate).
func session40k(id string, n int) []turn.Event {
	return session(id, n, eventOptions{window: 40_000, maxOutput: 4_000, resultBytes: 6_000})
}

// TestModelFaults: a model failing, slow or answering garbage costs a bounded
// number of calls, opens the circuit after the tenant's limit of failures in
// a row, falls back to output the service makes without a model, and never
// leaves garbage in what is stored.
func TestModelFaults(t *testing.T) {
	t.Parallel()
	for _, u := range modelUsers() {
		for _, f := range modelFaults() {
			t.Run(u.name+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				srv := llmtest.NewAnthropicServer(t, f.script)
				s := newSystem(t, systemOptions{settings: u.settings})
				env := map[string]string{
					"MNEMOS_LLM_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "test-key", "MNEMOS_ANTHROPIC_BASE_URL": srv.URL,
				}
				for k, v := range f.env {
					env[k] = v
				}
				api := s.start("all", env)

				// Past the breaker's limit, and one more request after it.
				n := u.breakerAfter + 1
				u.work(t, s, n)
				if f.usable {
					calls := srv.Calls()
					require.GreaterOrEqual(t, calls, n, "one call per request at least")
					require.LessOrEqual(t, calls, n+2, "retries of the flaky start only")
				} else {
					require.Equal(t, f.attempts*u.breakerAfter, srv.Calls(),
						"%d attempts per request until the circuit opened, none after", f.attempts)
				}
				u.check(t, s, api, f)
				require.Empty(t, s.deadLetters(), "no request was given up")
			})
		}
	}
}
