package faults_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/proctest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
)

// dreamScope is the scope the dreamer case consolidates.
const dreamScope = "project:repo-d"

// dreamMemories are the scope's memories: five, so one dream may rewrite
// one of them (20%) without asking for approval.
var dreamMemories = []seedMemory{
	{"toolchain", "project", "The toolchain builds need", "The build needs the gamma toolchain."},
	{"cache", "project", "The build cache lives in /var/cache/build", "Clear /var/cache/build when a build is stale."},
	{"flags", "feedback", "Release builds use -trimpath", "Always pass -trimpath to release builds."},
	{"deploy", "project", "Deploys happen on Tuesdays", "Deploy only on Tuesdays."},
	{"style", "feedback", "Tests hit a real database", "Integration tests run against a real Postgres."},
}

// dreamEdit is what a working model's dream writes in place of the gamma
// toolchain.
const dreamEdit = "delta toolchain (the build moved to it)"

// dreamAnswer is a working model's consolidation: it edits one memory,
// then ends with its summary.
func dreamAnswer(req llmtest.Request) llmtest.Reply {
	if len(req.Messages) > 1 {
		return llmtest.Text("Consolidated: the build notes are current.")
	}
	input, _ := json.Marshal(map[string]string{"name": "toolchain", "old_string": "gamma toolchain", "new_string": dreamEdit})
	return llmtest.Reply{Text: "Updating the toolchain note.", ToolCalls: []llm.ToolCall{{Name: memtools.ToolEdit, Input: input}}}
}

// dreamState is a dream as GET /v1/dreams/{id} answers it.
type dreamState struct {
	ID         string   `json:"id"`
	Status     string   `json:"status"`
	Turns      int      `json:"turns"`
	ToolCalls  int      `json:"tool_calls"`
	ToolErrors int      `json:"tool_errors"`
	Written    []string `json:"written"`
	Deleted    []string `json:"deleted"`
	Summary    string   `json:"summary"`
	Error      string   `json:"error"`
}

// dreamerModelUser: consolidations of one scope of five memories, each
// asked for through the API and awaited to its end. A dream makes one tool
// loop; each call's retries the guard bounds, and a failed call ends the
// dream failed with nothing applied.
func dreamerModelUser() modelUser {
	var dreams []dreamState
	return modelUser{
		// The scheduled scan finds too few sessions: the dreams asked for are
		// the only ones.
		name: "dreamer", requests: 1,
		settings: `{"session_memory": {"enabled": false}, "extraction": {"enabled": false}, "recall": {"enabled": false},
			"dreaming": {"min_sessions": 1000}}`,
		answer: dreamAnswer,
		calls: func(f modelFault) (int, int) {
			if f.usable {
				return 2, 2 + 2 // the edit and the end, and the retries of the flaky start
			}
			return f.attempts, f.attempts
		},
		work: func(t *testing.T, s *system, api *proctest.Process, n int) {
			putMemories(t, api, dreamScope, dreamMemories)
			for range n {
				status, raw := call(api, http.MethodPost, "/v1/scopes/"+dreamScope+"/dream", "")
				require.Equal(t, http.StatusAccepted, status, string(raw))
				var d dreamState
				require.NoError(t, json.Unmarshal(raw, &d))
				require.Eventually(t, func() bool {
					status, raw := call(api, http.MethodGet, "/v1/dreams/"+d.ID, "")
					return status == http.StatusOK && json.Unmarshal(raw, &d) == nil && d.Status != "requested" && d.Status != "running"
				}, settleTimeout, poll, "dream %s ended", d.ID)
				dreams = append(dreams, d)
			}
		},
		check: func(t *testing.T, s *system, _ *proctest.Process, f modelFault) {
			ctx := context.Background()
			require.Len(t, dreams, 1)
			d := dreams[0]
			require.NotContains(t, d.Summary, "\x00")
			require.LessOrEqual(t, len(d.Summary), 4_000+len("…"), "the summary is clipped")
			var consolidated bool
			var leaseDream string
			require.NoError(t, s.admin.QueryRow(ctx, "SELECT last_consolidated_at IS NOT NULL, lease_dream_id FROM dream_scopes WHERE scope = $1", dreamScope).
				Scan(&consolidated, &leaseDream))
			require.Empty(t, leaseDream, "the lease is free")
			want := map[string]string{}
			for _, m := range dreamMemories {
				want[m.name] = m.body
			}
			switch {
			case f.usable:
				require.Equal(t, "completed", d.Status, d.Error)
				require.Equal(t, []string{"toolchain"}, d.Written, "%+v", d)
				require.Empty(t, d.Deleted)
				require.Equal(t, 2, d.Turns)
				require.Equal(t, 1, d.ToolCalls)
				require.Zero(t, d.ToolErrors)
				require.Contains(t, d.Summary, "Consolidated: the build")
				require.True(t, consolidated, "the consolidation time moved")
				want["toolchain"] = "The build needs the " + dreamEdit + "."
				require.EqualValues(t, 1, s.count("SELECT count(*) FROM memory_revisions WHERE name = 'toolchain' AND revision = 2 AND actor = 'dreamer'"),
					"the dream's revision recorded")
			case f.fails:
				require.Equal(t, "failed", d.Status)
				require.NotEmpty(t, d.Error, "the dream says why it failed")
				require.Empty(t, d.Written)
				require.False(t, consolidated, "the consolidation time stays, so a later scan tries again")
			default:
				// An answer without a tool call ends the loop: nothing to change.
				require.Equal(t, "completed", d.Status, d.Error)
				require.Empty(t, d.Written)
				require.Empty(t, d.Deleted)
				require.Equal(t, 1, d.Turns)
				require.True(t, consolidated)
			}
			// No memory lost or garbled.
			rows, err := s.admin.Query(ctx, "SELECT name, body FROM memories WHERE scope = $1 AND deleted_at IS NULL", dreamScope)
			require.NoError(t, err)
			got := map[string]string{}
			for rows.Next() {
				var name, body string
				require.NoError(t, rows.Scan(&name, &body))
				got[name] = strings.TrimSpace(body)
			}
			require.NoError(t, rows.Err())
			require.Equal(t, want, got, "every memory kept, with its body")
			revisions := int64(len(dreamMemories))
			if f.usable {
				revisions++
			}
			require.Equal(t, revisions, s.count("SELECT count(*) FROM memory_revisions"), "no other revision")
			require.Zero(t, s.count(`SELECT count(*) FROM memory_revisions WHERE strpos(body, $1) > 0 OR strpos(description, $1) > 0 OR strpos(name, $1) > 0`,
				garbageMarker), "no garbage in any memory")
			require.Zero(t, s.count(`SELECT count(*) FROM memory_indexes WHERE strpos(content, $1) > 0`, garbageMarker), "nor in the index")
			for name := range want {
				require.EqualValues(t, 1, s.count(`SELECT count(*) FROM memory_indexes, regexp_matches(content, $2, 'g') WHERE scope = $1`,
					dreamScope, `\(`+name+`\.md\)`), "%s listed once in the index", name)
			}
			s.waitOutboxEmpty()
			ended := bus.KindDreamCompleted
			if f.fails {
				ended = bus.KindDreamFailed
			}
			require.Len(t, s.msgIDs(bus.StreamEvents, ended+".>"), 1, "the dream's end announced")
		},
	}
}
