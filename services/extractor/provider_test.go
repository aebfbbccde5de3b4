package extractor_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/services/extractor"
)

func lastText(req llmtest.Request) string { return req.Messages[len(req.Messages)-1].Text }

func firstCall(req llmtest.Request) bool {
	return strings.Contains(lastText(req), "Extract long-term memories from the conversation above.")
}

// TestAToolLoopReadsThenWrites runs a run through the real Anthropic SDK
// against a local server that answers as a model would: it lists and reads
// the scope's memories, then edits one, writes a new one and reorders the
// index, then ends. The memories, the index, the revisions and the
// memory.saved event show it.
func TestAToolLoopReadsThenWrites(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	ctx := context.Background()
	_, err := h.memories.Write(ctx, tenant, project, memory.Document{
		Name: "testing", Description: "Tests hit a real database", Type: memory.TypeFeedback, Body: "Use pgtest.",
	}, memory.Change{Actor: memory.ActorAPI}, memory.Expect{})
	require.NoError(t, err)
	var mu sync.Mutex
	var problems []string
	p, srv := anthropicProvider(t, func(req llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		last := lastText(req)
		switch {
		case firstCall(req):
			if !strings.Contains(req.Messages[0].Text, "we freeze deploys from 2026-12-20 to 2027-01-05") ||
				!strings.Contains(last, "- testing.md [feedback] updated") {
				problems = append(problems, "the first call lacks the conversation or the manifest: "+last)
			}
			return llmtest.Reply{Text: "Let me look first.", ToolCalls: []llm.ToolCall{
				call(memtools.ToolList, map[string]any{}), call(memtools.ToolRead, map[string]any{"name": "testing.md"}),
			}}
		case strings.Contains(last, "testing.md of project:repo-x, revision 1"):
			return llmtest.Reply{ToolCalls: []llm.ToolCall{
				call(memtools.ToolEdit, map[string]any{"name": "testing", "old_string": "Use pgtest.", "new_string": "Use pgtest; never mock the store."}),
				call(memtools.ToolWrite, map[string]any{"name": "deploy-freeze", "type": "project", "description": "Deploys are frozen over the holidays",
					"body": "No deploys from 2026-12-20 to 2027-01-05.\n\n**Why:** on-call is thin.\n**How to apply:** plan releases before."}),
				call(memtools.ToolIndexWrite, map[string]any{"content": "- [Deploy freeze](deploy-freeze.md) — no deploys over the holidays\n- [Testing](testing.md) — real database\n"}),
			}}
		case strings.Contains(last, "Saved the index"):
			return llmtest.Text("Saved one memory and sharpened another.")
		}
		problems = append(problems, "unexpected call: "+last)
		return llmtest.Text("unexpected")
	})
	sub := h.subscribe()
	h.service(p)
	h.relay()
	s := h.session("s1")
	s.say("we freeze deploys from 2026-12-20 to 2027-01-05, on-call is thin then; and tests must never mock the store", "Understood.")
	c := h.settled("s1", 1)
	require.Empty(t, problems)
	require.Equal(t, 3, srv.Calls())
	require.Equal(t, []string{memtools.ToolList, memtools.ToolRead, memtools.ToolWrite, memtools.ToolEdit, memtools.ToolIndexRead, memtools.ToolIndexWrite},
		srv.Requests()[0].Tools, "the scope's tools, no deletion")
	require.Contains(t, srv.Requests()[0].System, "# What is never saved")
	require.True(t, srv.Requests()[0].CachedSystem, "the fixed system prompt is cached")

	m, ok := h.memory(project, "testing")
	require.True(t, ok)
	require.Equal(t, "Use pgtest; never mock the store.", m.Body)
	require.EqualValues(t, 2, m.Revision)
	m, ok = h.memory(project, "deploy-freeze")
	require.True(t, ok)
	require.Equal(t, memory.TypeProject, m.Type)
	revs, err := h.memories.Revisions(ctx, tenant, project, "deploy-freeze")
	require.NoError(t, err)
	require.Equal(t, memory.Change{Actor: memory.ActorExtractor, Reason: "extracted from session s1 through turn 1", SourceTurns: []string{s.lastEvent()}, SessionID: "s1"}, revs[0].Change)
	ix, err := h.memories.Index(ctx, tenant, project)
	require.NoError(t, err)
	require.Equal(t, "- [Deploy freeze](deploy-freeze.md) — no deploys over the holidays\n- [Testing](testing.md) — real database\n", ix.Content)

	ev := h.nextSaved(sub)
	require.Equal(t, []string{"deploy-freeze"}, ev.Created)
	require.Equal(t, []string{"testing"}, ev.Updated)
	require.True(t, ev.IndexChanged)
	require.Equal(t, "anthropic", ev.LLMProvider)
	require.EqualValues(t, 1, c.SavedRuns)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeSaved))
}

// TestTheLoopStopsAfterFiveTurns: a model that never stops calling tools
// is cut off after five turns; the run counts as capped and the cursor
// moves on.
func TestTheLoopStopsAfterFiveTurns(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	p, srv := anthropicProvider(t, func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llm.ToolCall{call(memtools.ToolIndexRead, map[string]any{})}}
	})
	h.service(p)
	h.relay()
	s := h.session("s1")
	s.say("remember that the loop must end", "Ok.")
	c := h.settled("s1", 1)
	require.Equal(t, 5, srv.Calls())
	require.EqualValues(t, 2, c.Position, "the cursor moved on")
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeCapped))

	// A tenant may allow fewer turns.
	require.NoError(t, h.store.SetTenantSettings(context.Background(), tenant, []byte(`{"extraction": {"max_turns": 2}}`)))
	time.Sleep(1100 * time.Millisecond) // the settings cache's TTL in these tests
	s.say("remember that two turns are enough", "Ok.")
	h.settled("s1", 2)
	require.Equal(t, 7, srv.Calls())
	require.EqualValues(t, 2, h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeCapped))
}

// TestAFailedModelCallKeepsTheCursor: when the model call fails, the run
// is recorded as failed and the cursor stays, so the next run reads those
// messages again.
func TestAFailedModelCallKeepsTheCursor(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	var mu sync.Mutex
	var second string
	p, _ := anthropicProvider(t, llmtest.Script(func(req llmtest.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		all := ""
		for _, m := range req.Messages {
			all += m.Text + "\n"
		}
		if !strings.Contains(all, "second words") {
			return llmtest.ServerError()
		}
		second = all
		return llmtest.Text("Nothing to save.")
	}))
	h.service(p)
	h.relay()
	s := h.session("s1")
	s.say("first words", "Ok.")
	c := h.settled("s1", 1)
	require.EqualValues(t, 0, c.Position, "the cursor stays")
	require.EqualValues(t, 1, c.FailedRuns)
	require.Contains(t, c.LastError, "the model call failed")
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeFailed))

	s.say("second words", "Ok.")
	c = h.settled("s1", 2)
	mu.Lock()
	require.Contains(t, second, "first words", "the next run reads the messages of the failed one again")
	mu.Unlock()
	require.EqualValues(t, 4, c.Position)
	require.Empty(t, c.LastError)
}

var turnOf = regexp.MustCompile(`session (\w+) turn (\d+):`)

// TestTwoProcessesNeverRunOneScopeAtOnce: two extractor services — each
// with its own bus connection and Postgres pool, on the same durable
// consumer — get the turns of four sessions sharing one scope all at once.
// A scripted model records how many runs of the scope are under way at any
// moment (from a run's first call to its last answer): never more than one.
// Each session's memory ends up reflecting its newest turn.
func TestTwoProcessesNeverRunOneScopeAtOnce(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	var (
		mu           sync.Mutex
		active, most = map[string]int{}, map[string]int{}
		runs         int
	)
	p, _ := anthropicProvider(t, func(req llmtest.Request) llmtest.Reply {
		all := ""
		for _, m := range req.Messages {
			all += m.Text + "\n"
		}
		scope := regexp.MustCompile(`<memory-manifest scope="([^"]+)"`).FindStringSubmatch(all)[1]
		if !firstCall(req) {
			mu.Lock()
			active[scope]--
			mu.Unlock()
			return llmtest.Text("Saved.")
		}
		mu.Lock()
		active[scope]++
		most[scope] = max(most[scope], active[scope])
		runs++
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // a model takes its time
		found := turnOf.FindAllStringSubmatch(all, -1)
		latest := found[len(found)-1]
		return llmtest.Reply{ToolCalls: []llm.ToolCall{call(memtools.ToolWrite, map[string]any{
			"name": "progress-" + latest[1], "type": "project", "description": "How far session " + latest[1] + " got",
			"body": fmt.Sprintf("Session %s reached turn %s.\n\n**Why:** it said so.\n**How to apply:** resume from there.", latest[1], latest[2]),
		})}}
	})
	sessions := []string{"alpha", "bravo", "charlie", "delta"}
	const turns = 6
	for _, id := range sessions {
		s := h.session(id)
		s.scope = map[string]string{"project": "shared"}
		for k := 1; k <= turns; k++ {
			s.say(fmt.Sprintf("session %s turn %d: carry on", id, k), "Done.")
		}
	}
	h.service(p)
	h.service(p)
	h.relay() // 24 turn.accounted events at once, for both replicas

	shared := memory.Scope{Kind: memory.KindProject, ID: "shared"}
	for _, id := range sessions {
		require.Eventually(t, func() bool {
			c := h.cursor(id)
			return c.SeenSeq == turns && !c.Due() && h.idle(shared)
		}, 60*time.Second, 10*time.Millisecond, id)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, most["project:shared"], "never two runs of one scope at once")
	require.GreaterOrEqual(t, runs, len(sessions))
	require.Less(t, runs, len(sessions)*turns, "turns were coalesced")
	t.Logf("%d runs for %d turns", runs, len(sessions)*turns)
	for _, id := range sessions {
		m, ok := h.memory(shared, "progress-"+id)
		require.True(t, ok, id)
		require.Contains(t, m.Body, fmt.Sprintf("Session %s reached turn %d.", id, turns), "the newest turn")
	}
}

// TestShutdownFinishesTheRunInFlight: a run whose model is slow is under
// way when the service is stopped; the run is not cancelled — its memory
// is written and its cursor moves — and Run returns within the drain
// window.
func TestShutdownFinishesTheRunInFlight(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	inFlight := make(chan struct{})
	var once sync.Once
	p, srv := anthropicProvider(t, func(req llmtest.Request) llmtest.Reply {
		if !firstCall(req) {
			return llmtest.Text("Saved.")
		}
		once.Do(func() { close(inFlight) })
		time.Sleep(3 * time.Second) // a slow model
		return llmtest.Reply{ToolCalls: []llm.ToolCall{call(memtools.ToolWrite, map[string]any{
			"name": "slow-model", "type": "reference", "description": "Where the slow model's notes live", "body": "In the ops wiki.",
		})}}
	})
	_, stop := h.service(p)
	h.relay()
	s := h.session("s1")
	s.say("the slow model's notes are in the ops wiki", "Ok.")
	select {
	case <-inFlight:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not start")
	}
	began := time.Now()
	require.NoError(t, stop(), "Run drains and returns cleanly")
	took := time.Since(began)
	t.Logf("Run returned %v after the stop", took)
	require.Less(t, took, extractor.DefaultConfig().DrainTimeout)

	_, ok := h.memory(project, "slow-model")
	require.True(t, ok, "the run in flight finished: its memory is written")
	require.Equal(t, 2, srv.Calls(), "the loop ran to its end")
	c := h.cursor("s1")
	require.False(t, c.Due())
	require.EqualValues(t, 2, c.Position)
	require.True(t, h.idle(project), "the scope is let go")
}

// TestARunCutShortIsAnnouncedByTheNextOne: a run that wrote a memory and
// was cut short (a crash, a kill) before it moved the cursor never
// announced it; the run made again for the same turn, which finds the
// memory written and writes nothing, announces it, unless it was deleted
// meanwhile.
func TestARunCutShortIsAnnouncedByTheNextOne(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	ctx := context.Background()
	sub := h.subscribe()
	s := h.session("s1")
	s.say("the release branch is cut every Tuesday", "Noted.")
	// What the cut-short run left: two memories, as the extractor writes
	// them for this turn, and the cursor still owing the run. One of them
	// was deleted since (through the API): nothing to announce.
	cut := memory.Change{Actor: memory.ActorExtractor, Reason: "extracted from session s1 through turn 1", SourceTurns: []string{s.lastEvent()}, SessionID: "s1"}
	for _, name := range []memory.Name{"release-cut-tuesdays", "release-cut-deleted"} {
		_, err := h.memories.Write(ctx, tenant, project, memory.Document{
			Name: name, Description: "The release branch is cut on Tuesdays", Type: memory.TypeProject, Body: "Every Tuesday.",
		}, cut, memory.Expect{})
		require.NoError(t, err)
	}
	_, err := h.memories.Delete(ctx, tenant, project, "release-cut-deleted", memory.Change{Actor: memory.ActorAPI}, memory.Expect{})
	require.NoError(t, err)
	p, _ := anthropicProvider(t, func(llmtest.Request) llmtest.Reply { return llmtest.Text("It is saved already.") })
	h.service(p)
	h.relay()

	c := h.settled("s1", 1)
	ev := h.nextSaved(sub)
	require.Equal(t, []string{"release-cut-tuesdays"}, ev.Created)
	require.Empty(t, ev.Updated)
	require.Equal(t, s.lastEvent(), ev.SourceTurn)
	require.EqualValues(t, 1, c.SavedRuns)
}
