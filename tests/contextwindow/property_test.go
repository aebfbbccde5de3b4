package contextwindow_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestContextOnlyAppendsExceptAtRecordedBreaks drives sessions with random
// turns (tool calls of compactable and other tools, results of every size,
// idle gaps past the prompt cache's lifetime) through micro-compactions and
// compactions, and reads the context after every turn:
//   - two reads with nothing new in between return identical bytes;
//   - the context after a turn begins with the bytes of the context before
//     it, unless a compaction or micro-compaction was recorded in between;
//   - no cache break goes unexplained;
//   - the memory section (the system blocks) stays byte for byte the same
//     until the next compaction, while memories are written all along;
//   - memories the prefetch recalls for a user message are shown beside it
//     without breaking the above.
func TestContextOnlyAppendsExceptAtRecordedBreaks(t *testing.T) {
	t.Parallel()
	h := setup(t, nil)
	sectionChanges, reminders := 0, 0
	topics := []string{"payments", "billing", "search", "auth", "deploys"}
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
		t.Log("-short: seed 1 only; make test runs all three")
	}
	for _, seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 42))
		id := fmt.Sprintf("prop-%d", seed)
		c := h.conversation(id)
		// A small window (auto-compact at 59,000, warning 39,000, blocking
		// 69,000) so every kind of break comes round often.
		c.window, c.maxOutput = 80_000, 8_000
		user := fmt.Sprintf("u-prop-%d", seed)
		c.scope = map[string]string{"user": user, "project": "shared-repo"}
		var prevMessages, prevSystem []byte
		var prevEpoch int64 = -1
		prevCompaction := ""
		breaks, written := 0, ""
		for round := range 90 {
			if rng.IntN(6) == 0 {
				// The agent (or anyone) saves a memory between turns.
				written = fmt.Sprintf("note-%d", round)
				md := fmt.Sprintf("---\nname: %s\ndescription: How the %s service behaves, learned in round %d\ntype: project\n---\n\nA fact from round %d.\n",
					written, topics[rng.IntN(len(topics))], round, round)
				status, raw := h.call(t, "PUT", "/v1/scopes/user:"+user+"/memories/"+written+"?session="+id, md, nil)
				require.Equal(t, 201, status, string(raw))
			}
			c.user(fmt.Sprintf("Step %d, on the %s service: %s", round, topics[rng.IntN(len(topics))], filler("ask", 20+rng.IntN(400))))
			for range rng.IntN(3) { // at most 2 calls of at most 4,000 tokens: a round never jumps the blocking limit
				tool := []string{"Read", "Bash", "Grep", "Task", "Edit"}[rng.IntN(5)]
				callID := fmt.Sprintf("%s-call-%d-%d", id, round, rng.IntN(1_000_000))
				c.respond(t, time.Minute, text("Let me check."), toolUse(callID, tool, map[string]any{"file_path": fmt.Sprintf("/src/f%d.go", rng.IntN(20)), "command": "ls"}))
				size := 100 + rng.IntN(4_000)
				if rng.IntN(3) == 0 {
					size = 8_000 + rng.IntN(8_000)
				}
				c.toolResult(callID, filler(tool, size))
			}
			c.respond(t, time.Minute, text(fmt.Sprintf("Done with step %d.", round)))
			if h.session(t, id).CompactionInFlight {
				h.settle(t, id)
			}
			// The backend asks for the context after a pause, now and then
			// longer than the provider's prompt cache lives.
			pause := time.Duration(1+rng.IntN(10)) * time.Minute
			if rng.IntN(12) == 0 {
				pause = time.Duration(61+rng.IntN(120)) * time.Minute
			}
			c.at = c.at.Add(pause)
			h.at(c.at)

			status, first := h.get(t, "/v1/sessions/"+id+"/context", nil)
			require.Equal(t, 200, status, string(first))
			_, second := h.get(t, "/v1/sessions/"+id+"/context", nil)
			require.Equal(t, string(first), string(second), "seed %d round %d: two reads, nothing new in between", seed, round)

			var body struct {
				System     json.RawMessage `json:"system"`
				Messages   json.RawMessage `json:"messages"`
				Compaction *struct {
					ID string `json:"id"`
				} `json:"compaction"`
				Epoch  int64 `json:"epoch"`
				Tokens struct {
					Count    int64 `json:"count"`
					Blocking int64 `json:"blocking_threshold"`
				} `json:"tokens"`
			}
			require.NoError(t, json.Unmarshal(first, &body))
			require.Less(t, body.Tokens.Count, body.Tokens.Blocking)
			if body.Epoch == prevEpoch {
				open := prevMessages[:len(prevMessages)-1] // without the closing bracket
				require.True(t, bytes.HasPrefix(body.Messages, open), "seed %d round %d: the context no longer starts with the previous one, and no break was recorded", seed, round)
			} else if prevEpoch >= 0 {
				breaks++
			}
			compaction := ""
			if body.Compaction != nil {
				compaction = body.Compaction.ID
			}
			require.Contains(t, string(body.System), "MEMORY.md of user:"+user)
			if compaction == prevCompaction && prevSystem != nil {
				require.Equal(t, string(prevSystem), string(body.System), "seed %d round %d: the memory section changed without a compaction", seed, round)
			} else if prevSystem != nil {
				if written != "" {
					require.Contains(t, string(body.System), written+".md", "seed %d round %d: a compaction renders the section again", seed, round)
				}
				if string(prevSystem) != string(body.System) {
					sectionChanges++
				}
			}
			if n := strings.Count(string(body.Messages), "<system-reminder>"); n > 0 {
				reminders++
			}
			prevMessages, prevSystem, prevEpoch, prevCompaction = body.Messages, body.System, body.Epoch, compaction
		}
		require.Positive(t, breaks, "seed %d: the run never crossed a recorded break", seed)
	}
	require.Positive(t, sectionChanges, "no compaction brought new memories into the section")
	t.Logf("%d contexts showed recalled memories", reminders)
	require.Positive(t, reminders, "no recalled memory was ever shown")
	require.Positive(t, h.metrics.Sum("mnemos.recall.selected", "source", "prefetch"))
	require.Zero(t, h.metrics.Sum("mnemos.context.cache_breaks", "kind", "unexpected"))
	require.Positive(t, h.metrics.Sum("mnemos.context.cache_breaks", "kind", "expected"))
	require.Positive(t, h.metrics.Sum("mnemos.microcompact.cleared", "", ""))
	require.Positive(t, h.metrics.Sum("mnemos.compactions", "outcome", "completed"))
}
