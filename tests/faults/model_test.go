package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// modelFault is a way the model provider misbehaves, as the fake server of
// internal/testkit/llmtest plays it to the real SDK client inside the process.
type modelFault struct {
	name string
	// script plays the fault to a service a working model answers with good.
	script func(good llmtest.Script) llmtest.Script
	env    map[string]string
	// usable: the answers, or the last of the retries, can be used.
	usable bool
	// fails: the call ends in an error (after its retries), rather than
	// with an answer the service cannot use.
	fails bool
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
		{name: "failing", script: always(llmtest.ServerError()), fails: true, attempts: 4},
		{name: "slow", script: always(llmtest.Hang()), fails: true, attempts: 4,
			env: map[string]string{"MNEMOS_LLM_TIMEOUT": "1s"}},
		{name: "garbled body", fails: true, attempts: 1,
			script: always(llmtest.Garbage(`{"id": "msg_1", "type": "message", "content": [{"type": "text", "text": "` + garbageMarker))},
		{name: "empty answer", script: always(llmtest.Text("")), attempts: 1},
		{name: "no summary, only analysis", attempts: 1,
			script: always(llmtest.Text("<analysis>" + garbageMarker + " and it never ends"))},
		{name: "longer than it may write", attempts: 1,
			script: always(llmtest.Text(strings.Repeat(garbageMarker+" ", 200_000)))},
		{name: "NUL characters", usable: true, attempts: 1, script: withNUL},
		{name: "flaky then fine", usable: true, attempts: 1, script: flaky},
	}
}

// always answers every call with r, whatever a working model would.
func always(r llmtest.Reply) func(llmtest.Script) llmtest.Script {
	return func(llmtest.Script) llmtest.Script { return func(llmtest.Request) llmtest.Reply { return r } }
}

// withNUL answers as a working model would, with a NUL character after
// every "build" of its text and of its tool calls' string inputs. A JSON
// answer carries it escaped, as a tool call's input does: it is the input
// of the tool a JSON answer is asked for with.
func withNUL(good llmtest.Script) llmtest.Script {
	return func(req llmtest.Request) llmtest.Reply {
		r := good(req)
		if req.JSON && json.Valid([]byte(r.Text)) {
			r.Text = strings.ReplaceAll(r.Text, "build", `build\u0000`)
		} else {
			r.Text = strings.ReplaceAll(r.Text, "build", "build\x00")
		}
		calls := make([]llm.ToolCall, len(r.ToolCalls))
		for i, c := range r.ToolCalls {
			c.Input = bytes.ReplaceAll(c.Input, []byte("build"), []byte(`build\u0000`))
			calls[i] = c
		}
		r.ToolCalls = calls
		return r
	}
}

// flaky rate-limits the first call and fails the second; every later call
// is answered as a working model would.
func flaky(good llmtest.Script) llmtest.Script {
	start := llmtest.Sequence(llmtest.RateLimited(), llmtest.ServerError(), llmtest.Reply{})
	var mu sync.Mutex
	n := 0
	return func(req llmtest.Request) llmtest.Reply {
		mu.Lock()
		n++
		first := n <= 2
		mu.Unlock()
		if first {
			return start(req)
		}
		return good(req)
	}
}

// after answers the first n calls with good, and the later ones with then.
func after(n int, good, then llmtest.Script) llmtest.Script {
	var mu sync.Mutex
	calls := 0
	return func(req llmtest.Request) llmtest.Reply {
		mu.Lock()
		calls++
		early := calls <= n
		mu.Unlock()
		if early {
			return good(req)
		}
		return then(req)
	}
}

// modelUser is a service that calls the model: how a working model answers
// it, how to make it call, how many calls that may cost, and what it must
// have stored whatever the model did.
type modelUser struct {
	name string
	// settings are the tenant's settings for the test: only this service
	// calls the model for the tenant, so the fake server counts its calls.
	settings string
	// answer is how a working model answers the service.
	answer llmtest.Script
	// warmup requests are answered by a working model before the fault
	// starts: what they stored must outlive it.
	warmup int
	// requests are how many requests the service makes under the fault.
	requests int
	// calls bounds the calls the fake server receives for warmup+requests
	// requests under fault f: retries are bounded, and a service with a
	// circuit breaker makes none once it opened.
	calls func(f modelFault) (least, most int)
	// work drives the service, through the process's API api or the bus,
	// until it finished n requests.
	work func(t *testing.T, s *system, api *proctest.Process, n int)
	// check asserts what the service stored after the requests.
	check func(t *testing.T, s *system, api *proctest.Process, f modelFault)
}

// modelUsers are made anew for each case: a user's work may keep what it
// saw for its check.
func modelUsers() []modelUser {
	return []modelUser{compactorModelUser(), sessionMemoryModelUser(), extractorModelUser(), recallModelUser(), recallPrefetchModelUser(), dreamerModelUser()}
}

// compactorModelUser: automatic compactions of one session whose window is
// 40,000 tokens (auto-compact at 23,000).
func compactorModelUser() modelUser {
	const session = "m1"
	return modelUser{
		// Only the compactor calls the model: the services that would call it
		// on the same turns (notes, extraction, recall) are off for the tenant.
		// Its circuit opens after two failed requests; the third makes no call.
		name: "compactor", requests: 3,
		settings: `{"compaction": {"breaker_failures": 2}, "session_memory": {"enabled": false},
			"extraction": {"enabled": false}, "recall": {"enabled": false}, "dreaming": {"enabled": false}}`,
		answer: always(llmtest.Text(goodSummary))(nil),
		calls: func(f modelFault) (int, int) {
			if f.usable {
				return 3, 3 + 2 // the retries of the flaky start only
			}
			return 2 * f.attempts, 2 * f.attempts
		},
		work: func(t *testing.T, s *system, _ *proctest.Process, n int) {
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
// number of calls (and none once a service's circuit opened), the service
// falls back to output it makes without a model or keeps what it had, and
// never stores garbage.
func TestModelFaults(t *testing.T) {
	t.Parallel()
	for i, u := range modelUsers() {
		for _, f := range modelFaults() {
			t.Run(u.name+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				u := modelUsers()[i]
				script := f.script(u.answer)
				if u.warmup > 0 {
					script = after(u.warmup, u.answer, script)
				}
				srv := llmtest.NewAnthropicServer(t, script)
				s := newSystem(t, systemOptions{settings: u.settings})
				env := map[string]string{
					"MNEMOS_LLM_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "test-key", "MNEMOS_ANTHROPIC_BASE_URL": srv.URL,
				}
				for k, v := range f.env {
					env[k] = v
				}
				api := s.start("all", env)

				u.work(t, s, api, u.warmup+u.requests)
				least, most := u.calls(f)
				calls := srv.Calls()
				require.GreaterOrEqual(t, calls, least, "%d attempts per request", f.attempts)
				require.LessOrEqual(t, calls, most, "%d attempts per request, no more", f.attempts)
				u.check(t, s, api, f)
				require.Empty(t, s.deadLetters(), "no request was given up")
			})
		}
	}
}

// goodNotes is a working model's edit of a session's notes (its Current
// State section, written whole) and the notes it makes of the template.
func goodNotes() (answer, stored string) {
	tmpl, err := sessionnotes.ParseTemplate(sessionnotes.DefaultTemplate)
	if err != nil {
		panic(fmt.Sprintf("the default notes template: %v", err))
	}
	state, _ := tmpl.Section(sessionnotes.HeadingState)
	body := "Fixing the build: the linker step fails on the new target."
	answer = "# " + state.Heading + "\n" + state.Description + "\n\n" + body + "\n"
	stored = sessionnotes.Apply(tmpl, []sessionnotes.Section{{Heading: state.Heading, Description: state.Description, Body: body}}).Render()
	return answer, stored
}

// sessionMemoryModelUser: the notes of one session, first written by a
// working model, then updated under the fault. It has no circuit breaker:
// each due turn makes one request, whose retries the guard bounds, and an
// unusable answer leaves the notes as they were.
func sessionMemoryModelUser() modelUser {
	const session = "n1"
	answer, stored := goodNotes()
	return modelUser{
		name: "session-memory", warmup: 1, requests: 3,
		settings: `{"extraction": {"enabled": false}, "recall": {"enabled": false}, "dreaming": {"enabled": false}}`,
		answer:   always(llmtest.Text(answer))(nil),
		calls: func(f modelFault) (int, int) {
			if f.usable {
				return 4, 4 + 2
			}
			return 1 + 3*f.attempts, 1 + 3*f.attempts
		},
		work: func(t *testing.T, s *system, _ *proctest.Process, n int) {
			// Turns are due at the first and then every third (see
			// notesSession); each is published once the one before it settled,
			// so no request is coalesced into another.
			evs := notesSession(session, 3*n)
			for next := 0; ; next++ {
				if s.count("SELECT coalesce(sum(version + rejected_updates + failed_updates), 0) FROM session_notes WHERE session_id = $1", session) >= int64(n) {
					return
				}
				require.Less(t, next, len(evs), "the session ran out of rounds")
				_, err := s.publish(context.Background(), evs[next])
				require.NoError(t, err)
				seq := int64(next + 1)
				require.Eventually(t, func() bool {
					var seen int64
					var owner string
					var pending bool
					err := s.admin.QueryRow(context.Background(), "SELECT seen_seq, update_owner, pending FROM session_notes WHERE session_id = $1",
						session).Scan(&seen, &owner, &pending)
					return err == nil && seen >= seq && owner == "" && !pending
				}, settleTimeout, poll, "turn %d settled", seq)
			}
		},
		check: func(t *testing.T, s *system, _ *proctest.Process, f modelFault) {
			n := s.notes(session)
			require.NotContains(t, n.content, garbageMarker, "no garbage in the notes")
			require.NotContains(t, n.content, "\x00")
			require.Contains(t, n.content, "Fixing the build: the linker step fails")
			if f.usable {
				require.EqualValues(t, 4, n.version, "every update stored (%s)", n.lastError)
				require.Zero(t, n.rejected+n.failed)
			} else {
				require.EqualValues(t, 1, n.version, "only the working model's update stored")
				require.Equal(t, stored, n.content, "the notes stay as they were")
				if f.fails {
					require.EqualValues(t, 3, n.failed, "every update under the fault failed")
				} else {
					require.EqualValues(t, 3, n.rejected, "every update under the fault was rejected")
				}
				require.NotEmpty(t, n.lastError)
			}
			require.Len(t, s.msgIDs(bus.StreamEvents, bus.KindSessionMemoryUpdated+".>"), int(n.version), "each stored version announced")
			require.EqualValues(t, 1, s.count("SELECT count(*) FROM sessions WHERE session_id = $1 AND applied_seq = 10", session), "the session is whole")
			s.waitConsumerSettled(bus.StreamEvents, "session-memory")
		},
	}
}

// factOf finds the facts of chat sessions in a request's messages.
var factOf = regexp.MustCompile(`Remember that (\w+) builds need the gamma toolchain`)

// extractorAnswer is a working model's run: on the first call it saves the
// latest fact of the conversation as a project memory, then it ends.
func extractorAnswer(req llmtest.Request) llmtest.Reply {
	last := req.Messages[len(req.Messages)-1].Text
	if !strings.Contains(last, "Extract long-term memories from the conversation above.") {
		return llmtest.Text("Saved.")
	}
	var all strings.Builder
	for _, m := range req.Messages {
		all.WriteString(m.Text)
	}
	found := factOf.FindAllStringSubmatch(all.String(), -1)
	if len(found) == 0 {
		return llmtest.Text("Nothing to save.")
	}
	id := found[len(found)-1][1]
	input, _ := json.Marshal(map[string]string{
		"name": "toolchain-" + id, "type": "project", "description": "Builds of " + id + " need the gamma toolchain",
		"body": "The build of " + id + " needs the gamma toolchain.\n\n**Why:** the user said so.\n**How to apply:** install it before building.",
	})
	return llmtest.Reply{Text: "Saving it.", ToolCalls: []llm.ToolCall{{Name: memtools.ToolWrite, Input: input}}}
}

// extractorModelUser: the runs of one session whose user asks the agent to
// remember a fact each turn. It has no circuit breaker: each turn makes one
// run of at most two calls here (the write, then the end), whose retries
// the guard bounds; a failed run leaves the cursor for the next one.
func extractorModelUser() modelUser {
	const session = "m1"
	return modelUser{
		name: "extractor", requests: 3,
		settings: `{"session_memory": {"enabled": false}, "recall": {"enabled": false}, "dreaming": {"enabled": false}}`,
		answer:   extractorAnswer,
		calls: func(f modelFault) (int, int) {
			if f.usable {
				return 2 * 3, 2*3 + 2
			}
			return 3 * f.attempts, 3 * f.attempts
		},
		work: func(t *testing.T, s *system, _ *proctest.Process, n int) {
			// Each turn is published once the run of the one before ended.
			for i, ev := range chat(session, "repo-m", n) {
				_, err := s.publish(context.Background(), ev)
				require.NoError(t, err)
				runs := int64(i + 1)
				require.Eventually(t, func() bool {
					return s.count("SELECT count(*) FROM extractor_cursors WHERE session_id = $1 AND runs >= $2 AND due_seq <= seq", session, runs) == 1 &&
						s.count("SELECT count(*) FROM run_leases WHERE owner <> '' OR pending") == 0
				}, settleTimeout, poll, "run %d ended", runs)
			}
		},
		check: func(t *testing.T, s *system, _ *proctest.Process, f modelFault) {
			require.Zero(t, s.count(`SELECT count(*) FROM memory_revisions WHERE strpos(body, $1) > 0 OR strpos(description, $1) > 0 OR strpos(name, $1) > 0`,
				garbageMarker), "no garbage in any memory")
			require.Zero(t, s.count(`SELECT count(*) FROM memory_indexes WHERE strpos(content, $1) > 0`, garbageMarker), "nor in the index")
			var seq, runs, failed int64
			require.NoError(t, s.admin.QueryRow(context.Background(), "SELECT seq, runs, failed_runs FROM extractor_cursors WHERE session_id = $1", session).
				Scan(&seq, &runs, &failed))
			require.EqualValues(t, 3, runs, "one run per turn")
			if f.usable {
				require.Zero(t, failed)
				require.EqualValues(t, 3, seq, "the cursor moved past every turn")
				for i := 1; i <= 3; i++ {
					name := fmt.Sprintf("toolchain-%s%d", session, i)
					var revision int64
					var body string
					require.NoError(t, s.admin.QueryRow(context.Background(), "SELECT revision, body FROM memories WHERE name = $1", name).Scan(&revision, &body), name)
					require.EqualValues(t, 1, revision, name)
					require.Contains(t, body, "The build of "+session)
					require.NotContains(t, body, "\x00")
				}
				require.EqualValues(t, 3, s.count("SELECT count(*) FROM memories"))
				require.Len(t, s.msgIDs(bus.StreamEvents, bus.KindMemorySaved+".>"), 3, "each run announced what it saved")
			} else {
				require.Zero(t, s.count("SELECT count(*) FROM memories"), "nothing saved from an unusable answer")
				require.Empty(t, s.msgIDs(bus.StreamEvents, bus.KindMemorySaved+".>"))
				if f.fails {
					require.EqualValues(t, 3, failed, "every run failed")
					require.Zero(t, seq, "the cursor stays for the next run")
				} else {
					require.Zero(t, failed)
					require.EqualValues(t, 3, seq, "the runs ended, finding nothing to save")
				}
			}
			require.EqualValues(t, 1, s.count("SELECT count(*) FROM sessions WHERE session_id = $1 AND applied_seq = 3", session), "the session is whole")
			s.waitConsumerSettled(bus.StreamEvents, "extractor")
		},
	}
}
