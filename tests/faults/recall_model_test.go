package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/services/recallprefetch"
)

// recallScope is the scope of the recall case's session.
const recallScope = "project:repo-r"

// recallMemories are the recall case's memories: three about the build, one not.
var recallMemories = []seedMemory{
	{"build-toolchain", "project", "Builds need the gamma toolchain", "Install the gamma toolchain before building."},
	{"build-cache", "project", "The build cache lives in /var/cache/build", "Clear /var/cache/build when a build is stale."},
	{"build-flags", "feedback", "Release builds use -trimpath", "Always pass -trimpath to release builds."},
	{"deploy-window", "project", "Deploys happen on Tuesdays", "Deploy only on Tuesdays."},
}

// inventedMemory is the name a working selector makes up beside its pick.
const inventedMemory = recallScope + "/made-up-notes"

// recallAnswer is a working selector: it picks the first memory about the
// build among the candidates listed, and names one that is not there.
func recallAnswer(req llmtest.Request) llmtest.Reply {
	picks := []string{}
	for line := range strings.Lines(req.Messages[0].Text) {
		ref, _, ok := strings.Cut(strings.TrimPrefix(line, "- "), " [")
		if ok && strings.HasPrefix(line, "- ") && strings.Contains(ref, "/build-") {
			picks = append(picks, ref)
			break
		}
	}
	picks = append(picks, inventedMemory)
	answer, _ := json.Marshal(map[string][]string{"memories": picks})
	return llmtest.Text(string(answer))
}

// recallAnswered is what POST …/recall answered.
type recallAnswered struct {
	status int
	raw    []byte
	body   struct {
		Outcome  string `json:"outcome"`
		Memories []struct {
			Scope, Name, Text string
		} `json:"memories"`
		Candidates int            `json:"candidates"`
		Dropped    map[string]int `json:"dropped"`
		Invented   []string       `json:"invented"`
	}
	code string
}

// recallModelUser: recalls through the API of one session of the scope's
// four memories. The selector has no circuit breaker: each recall makes
// one call, whose retries the guard bounds. A recall whose selector failed
// or answered what it cannot read answers 502 recall_failed, surfacing and
// recording nothing: there is no fallback to the builtin selector, so the
// caller learns that the selector is down.
func recallModelUser() modelUser {
	const session = "r1"
	var answers []recallAnswered
	return modelUser{
		// The prefetch is off: the recalls through the API are the only calls.
		name: "recall", requests: 3,
		settings: `{"session_memory": {"enabled": false}, "extraction": {"enabled": false},
			"recall": {"prefetch": false}, "dreaming": {"enabled": false}}`,
		answer: recallAnswer,
		calls: func(f modelFault) (int, int) {
			if f.usable {
				return 3, 3 + 2
			}
			return 3 * f.attempts, 3 * f.attempts
		},
		work: func(t *testing.T, s *system, api *proctest.Process, n int) {
			putMemories(t, api, recallScope, recallMemories)
			// The session's one turn names the scope.
			ev := chat(session, "repo-r", 1)[0]
			_, err := s.publish(context.Background(), ev)
			require.NoError(t, err)
			s.waitApplied(map[string]int64{session: 1})
			for range n {
				var a recallAnswered
				a.status, a.raw = call(api, http.MethodPost, "/v1/sessions/"+session+"/recall",
					`{"query": "Why does the build fail on the new target?", "recent_tools": ["Bash"]}`)
				if a.status == http.StatusOK {
					require.NoError(t, json.Unmarshal(a.raw, &a.body), string(a.raw))
				} else {
					var e struct {
						Error struct {
							Code string `json:"code"`
						} `json:"error"`
					}
					require.NoError(t, json.Unmarshal(a.raw, &e), string(a.raw))
					a.code = e.Error.Code
				}
				answers = append(answers, a)
			}
		},
		check: func(t *testing.T, s *system, _ *proctest.Process, f modelFault) {
			require.Len(t, answers, 3)
			surfaced := map[string]bool{}
			for i, a := range answers {
				require.NotContains(t, string(a.raw), garbageMarker, "recall %d answered no garbage", i)
				if !f.usable {
					require.Equal(t, http.StatusBadGateway, a.status, "recall %d: the selector failed: %s", i, a.raw)
					require.Equal(t, "recall_failed", a.code, "recall %d", i)
					continue
				}
				require.Equal(t, http.StatusOK, a.status, "recall %d: %s", i, a.raw)
				require.Equal(t, "surfaced", a.body.Outcome, "recall %d: %s", i, a.raw)
				require.Len(t, a.body.Memories, 1, "recall %d surfaced the selector's pick alone", i)
				m := a.body.Memories[0]
				require.Equal(t, recallScope, m.Scope)
				require.True(t, strings.HasPrefix(m.Name, "build-"), m.Name)
				require.False(t, surfaced[m.Name], "recall %d surfaced %s again", i, m.Name)
				surfaced[m.Name] = true
				require.NotContains(t, m.Text, "\x00")
				require.Equal(t, []string{inventedMemory}, a.body.Invented, "recall %d: the made-up name is dropped", i)
				require.Equal(t, 1, a.body.Dropped["invented"])
				require.Equal(t, len(recallMemories)-i, a.body.Candidates, "recall %d: what the session was shown is no candidate", i)
			}
			// What is recorded as surfaced is what the recalls answered: memories
			// that exist, each once.
			rows, err := s.admin.Query(context.Background(), "SELECT scope, name, source FROM recall_surfaced WHERE session_id = $1", session)
			require.NoError(t, err)
			recorded := map[string]bool{}
			for rows.Next() {
				var scope, name, source string
				require.NoError(t, rows.Scan(&scope, &name, &source))
				require.Equal(t, recallScope, scope)
				require.Equal(t, "api", source)
				recorded[name] = true
			}
			require.NoError(t, rows.Err())
			require.Equal(t, surfaced, recorded, "the memories surfaced, and only those, recorded")
			require.Zero(t, s.count("SELECT count(*) FROM recall_surfaced WHERE strpos(name, $1) > 0 OR name = 'made-up-notes'", garbageMarker))
			// The memories and the session are as they were.
			for _, m := range recallMemories {
				var body string
				var revision int64
				require.NoError(t, s.admin.QueryRow(context.Background(),
					"SELECT body, revision FROM memories WHERE scope = $1 AND name = $2 AND deleted_at IS NULL", recallScope, m.name).Scan(&body, &revision), m.name)
				require.Contains(t, body, m.body)
				require.EqualValues(t, 1, revision, m.name)
			}
			require.EqualValues(t, len(recallMemories), s.count("SELECT count(*) FROM memory_revisions"), "recall writes no memory")
			require.EqualValues(t, 1, s.count("SELECT count(*) FROM sessions WHERE session_id = $1 AND applied_seq = 1", session), "the session is whole")
		},
	}
}

// recallPrefetchModelUser: the prefetches of one session's three user
// messages, each published once the one before was decided. A prefetch
// whose selector failed or answered what it cannot read is recorded as
// showing nothing beside its message (outcome failed) and acknowledged:
// a retry would come too late to help.
func recallPrefetchModelUser() modelUser {
	const session = "p1"
	return modelUser{
		name: "recall-prefetch", requests: 3,
		settings: `{"session_memory": {"enabled": false}, "extraction": {"enabled": false}, "dreaming": {"enabled": false}}`,
		answer:   recallAnswer,
		calls: func(f modelFault) (int, int) {
			if f.usable {
				return 3, 3 + 2
			}
			return 3 * f.attempts, 3 * f.attempts
		},
		work: func(t *testing.T, s *system, api *proctest.Process, n int) {
			putMemories(t, api, "project:repo-p", recallMemories)
			for i, ev := range chat(session, "repo-p", n) {
				_, err := s.publish(context.Background(), ev)
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					return s.count("SELECT count(*) FROM recall_prefetches WHERE session_id = $1", session) == int64(i+1)
				}, settleTimeout, poll, "the prefetch of turn %d decided", i+1)
			}
		},
		check: func(t *testing.T, s *system, _ *proctest.Process, f modelFault) {
			ctx := context.Background()
			rows, err := s.admin.Query(ctx, "SELECT message_uuid, outcome, blocks FROM recall_prefetches WHERE session_id = $1 ORDER BY message_uuid", session)
			require.NoError(t, err)
			i := 0
			for rows.Next() {
				var uuid, outcome string
				var blocks []string
				require.NoError(t, rows.Scan(&uuid, &outcome, &blocks))
				require.Equal(t, fmt.Sprintf("%s-u%d", session, i+1), uuid)
				for _, b := range blocks {
					require.NotContains(t, b, garbageMarker)
				}
				if f.usable {
					require.Equal(t, "surfaced", outcome, uuid)
					require.Len(t, blocks, 1, "%s: the selector's pick alone", uuid)
				} else {
					require.Equal(t, "failed", outcome, uuid)
					require.Empty(t, blocks, uuid)
				}
				i++
			}
			require.NoError(t, rows.Err())
			require.Equal(t, 3, i)
			want := int64(0)
			if f.usable {
				want = 3
			}
			require.Equal(t, want, s.count(`SELECT count(*) FROM recall_surfaced WHERE session_id = $1 AND source = 'prefetch'
				AND scope = 'project:repo-p' AND name LIKE 'build-%'`, session), "the memories surfaced recorded, each once")
			require.Equal(t, want, s.count("SELECT count(*) FROM recall_surfaced"), "and nothing else")
			require.EqualValues(t, len(recallMemories), s.count("SELECT count(*) FROM memory_revisions"), "recall writes no memory")
			require.EqualValues(t, 1, s.count("SELECT count(*) FROM sessions WHERE session_id = $1 AND applied_seq = 3", session), "the session is whole")
			s.waitConsumerSettled(bus.StreamEvents, recallprefetch.Durable)
		},
	}
}
