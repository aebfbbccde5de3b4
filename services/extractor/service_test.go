package extractor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/services/extractor"
)

// TestARememberedFactBecomesAMemory: a user turn that asks to remember
// something is extracted by the builtin provider into a feedback memory of
// the session's project scope, listed in the scope's index, announced as
// memory.saved, and the cursor moves past the turn.
func TestARememberedFactBecomesAMemory(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	sub := h.subscribe()
	var rec recorder
	h.service(rec.provider())
	h.relay()
	s := h.session("s1")
	s.say("remember that our staging DB is read-only on Fridays", "Noted.")

	c := h.settled("s1", 1)
	m, ok := h.memory(project, "staging-db-read-only-fridays")
	require.True(t, ok, "have %v", h.names(project))
	require.Equal(t, memory.TypeFeedback, m.Type)
	require.True(t, strings.HasPrefix(m.Body, "Our staging DB is read-only on Fridays.\n\n**Why:**"), m.Body)
	require.Contains(t, m.Body, "**How to apply:**")
	ix, err := h.memories.Index(context.Background(), tenant, project)
	require.NoError(t, err)
	require.Contains(t, ix.Content, "(staging-db-read-only-fridays.md)")
	revs, err := h.memories.Revisions(context.Background(), tenant, project, "staging-db-read-only-fridays")
	require.NoError(t, err)
	require.Equal(t, memory.ActorExtractor, revs[0].Change.Actor)
	require.Equal(t, []string{s.lastEvent()}, revs[0].Change.SourceTurns)
	require.Equal(t, "s1", revs[0].Change.SessionID)
	require.Empty(t, h.names(memory.Scope{Kind: memory.KindUser, ID: "u-42"}), "one write scope per session")

	ev := h.nextSaved(sub)
	require.Equal(t, events.MemorySaved{
		Schema: events.SchemaMemorySaved, TenantID: tenant, SessionID: "s1", Scope: "project:repo-x",
		Created: []string{"staging-db-read-only-fridays"}, Updated: []string{},
		RunID: ev.RunID, SourceTurn: s.lastEvent(), Seq: 1, LLMProvider: "builtin", At: ev.At,
	}, ev)
	require.NotEmpty(t, ev.RunID, "the run is named, and its message id with it")
	require.EqualValues(t, 1, c.Seq)
	require.EqualValues(t, 2, c.Position, "past the turn's two messages")
	require.EqualValues(t, 1, c.SavedRuns)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeSaved))

	// A turn with nothing to keep: the run saves nothing and publishes nothing.
	s.say("what does the deploy script do?", "It builds and uploads the image.")
	c = h.settled("s1", 2)
	require.EqualValues(t, 4, c.Position)
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeNothing))
	require.Len(t, rec.seen(), 2)
	require.NotContains(t, rec.seen()[1], "staging DB", "the second run reads only the messages after the cursor")
	_, err = sub.NextMsg(500 * time.Millisecond)
	require.Error(t, err, "no memory.saved without a write")
}

// TestTheAgentsOwnWriteSkipsAndAdvances: when the main agent wrote memory
// itself since the cursor, the turn is skipped — no run — and the cursor
// moves past it; the next turn's run reads only what came after.
func TestTheAgentsOwnWriteSkipsAndAdvances(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	var rec recorder
	h.service(rec.provider())
	h.relay()
	s := h.session("s1")
	s.say("remember that the release train leaves every Tuesday", "Noted.")
	h.settled("s1", 1)
	require.Len(t, rec.seen(), 1)

	// The agent saves a memory through the API during the next turn.
	_, err := h.memories.Write(context.Background(), tenant, project, memory.Document{
		Name: "qa-signoff", Description: "QA signs off every release", Type: memory.TypeProject, Body: "QA signs off.",
	}, memory.Change{Actor: memory.ActorAgent, SessionID: "s1"}, memory.Expect{})
	require.NoError(t, err)
	s.say("remember that QA signs off every release", "I saved that to memory.")
	c := h.settled("s1", 2)
	require.EqualValues(t, 1, c.SkippedTurns)
	require.EqualValues(t, 2, c.Seq)
	require.EqualValues(t, 4, c.Position, "the cursor moved past the skipped turn")
	require.EqualValues(t, 1, c.AgentWrites)
	require.Len(t, rec.seen(), 1, "no run for the skipped turn")
	_, ok := h.memory(project, "qa-signs-off-every-release")
	require.False(t, ok, "the agent saved it itself")
	// No run made the skip, so settled's wait for the run's lease does not
	// cover its count: the handler counts it after the transaction that
	// moved the cursor commits, a moment after settled may have seen it.
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeSkippedAgentWrote) == 1
	}, 30*time.Second, 10*time.Millisecond, "the skipped turn is counted")

	s.say("from now on write changelog entries in the past tense", "Will do.")
	c = h.settled("s1", 3)
	require.Len(t, rec.seen(), 2)
	require.Contains(t, rec.seen()[1], "changelog entries")
	require.NotContains(t, rec.seen()[1], "QA signs off", "the skipped turn is behind the cursor")
	_, ok = h.memory(project, "write-changelog-entries-past-tense")
	require.True(t, ok, "have %v", h.names(project))
	require.EqualValues(t, 6, c.Position)
}

// TestEveryNthTurnRuns: with every_turns 3, the first two eligible turns
// only count and the third runs over all three; turns that do not close a
// user turn, and sub-agents' turns, do not count.
func TestEveryNthTurnRuns(t *testing.T) {
	t.Parallel()
	h := setup(t, `{"extraction": {"every_turns": 3}}`)
	var rec recorder
	h.service(rec.provider())
	h.relay()
	s := h.session("s1")
	for k := 1; k <= 7; k++ {
		s.say(fmt.Sprintf("remember that fact number %d holds", k), "Noted.")
		h.settled("s1", s.seq)
		if k == 4 {
			s.work("run the tests") // two rounds, one of which closes the turn
			h.settled("s1", s.seq)
		}
	}
	sub := h.session("s1-agent-explore")
	sub.agent = "explore"
	sub.say("remember that sub-agents are not asked", "Ok.")

	c := h.settled("s1", 9)             // 7 turns + the two rounds of the work turn
	require.Eventually(t, func() bool { // every turn.accounted handled, the sub-agent's too
		return h.metrics.SumAll("mnemos.bus.deliveries", "consumer", "extractor", "result", string(bus.Acked)) == 10
	}, 30*time.Second, 10*time.Millisecond)
	require.Len(t, rec.seen(), 2, "runs at the 3rd and 6th eligible turns")
	for k := 1; k <= 3; k++ {
		require.Contains(t, rec.seen()[0], fmt.Sprintf("fact number %d holds", k))
	}
	require.NotContains(t, rec.seen()[1], "fact number 3 holds")
	require.Contains(t, rec.seen()[1], "fact number 4 holds")
	require.Contains(t, rec.seen()[1], "run the tests")
	require.Contains(t, rec.seen()[1], "fact number 5 holds")
	require.NotContains(t, rec.seen()[1], "fact number 6 holds", "the work turn's closing round was the 5th eligible turn, fact 5 the 6th")
	require.EqualValues(t, 7, c.Seq, "through the 6th eligible turn; facts 6 and 7 only counted since")
	for k := 1; k <= 5; k++ {
		_, ok := h.memory(project, fmt.Sprintf("fact-number-%d-holds", k))
		require.True(t, ok, "fact %d: have %v", k, h.names(project))
	}
	for k := 6; k <= 7; k++ {
		_, ok := h.memory(project, fmt.Sprintf("fact-number-%d-holds", k))
		require.False(t, ok, "fact %d waits for the next run", k)
	}
	require.EqualValues(t, 6, h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeThrottled))
	require.EqualValues(t, 2, h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeSaved))
	require.Zero(t, h.cursor("s1-agent-explore").SeenSeq, "sub-agent sessions are skipped")
}

// TestTurnsDuringARunCoalesceIntoOneTrailingRun: while a run of the scope
// is held up, more turns of its session and of another session writing to
// the same scope arrive; they wait as one trailing run, which reads the
// newest state of both sessions.
func TestTurnsDuringARunCoalesceIntoOneTrailingRun(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	started, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	rec := recorder{pause: func(run int) {
		if run == 1 {
			close(started)
			<-release
		}
	}}
	p := rec.provider()
	h.service(p)
	h.service(p)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // a failing test does not hold the run up
	h.relay()
	a, b := h.session("a"), h.session("b")
	a.say("remember that fact a1 holds", "Noted.")
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the first run did not start")
	}
	for k := 2; k <= 5; k++ {
		a.say(fmt.Sprintf("remember that fact a%d holds", k), "Noted.")
	}
	for k := 1; k <= 3; k++ {
		b.say(fmt.Sprintf("remember that fact b%d holds", k), "Noted.")
	}
	require.Eventually(t, func() bool {
		return h.cursor("a").SeenSeq == 5 && h.cursor("b").SeenSeq == 3
	}, 30*time.Second, 10*time.Millisecond)
	require.False(t, h.idle(project), "a run holds the scope, the trailing run is pending")
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeCoalesced) == 7
	}, 30*time.Second, 10*time.Millisecond, "each of the seven turns was coalesced")
	releaseOnce.Do(func() { close(release) })

	h.settled("a", 5)
	h.settled("b", 3)
	seen := rec.seen()
	require.Len(t, seen, 3, "the first run, then one trailing run over both sessions")
	require.Equal(t, 1, rec.most[project.String()], "one run of the scope at a time")
	var aTrail, bTrail string
	for _, s := range seen[1:] {
		if strings.Contains(s, "fact a") {
			aTrail = s
		} else {
			bTrail = s
		}
	}
	for k := 2; k <= 5; k++ {
		require.Contains(t, aTrail, fmt.Sprintf("fact a%d holds", k), "the trailing run read the newest turn")
	}
	require.NotContains(t, aTrail, "fact a1 holds")
	require.Contains(t, bTrail, "fact b3 holds")
	for _, n := range []string{"fact-a1-holds", "fact-a5-holds", "fact-b1-holds", "fact-b3-holds"} {
		_, ok := h.memory(project, n)
		require.True(t, ok, n)
	}
}

// TestBadEventsAreDeadLettered: an event that cannot be read is refused
// with its reason, counted, and changes nothing.
func TestBadEventsAreDeadLettered(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	var rec recorder
	h.service(rec.provider())
	sub, err := h.bus.Conn().SubscribeSync(h.bus.Prefix("deadletter." + bus.KindTurnAccounted + ".>"))
	require.NoError(t, err)
	other, err := json.Marshal(events.TurnAccounted{Schema: events.SchemaTurnAccounted, TenantID: "someone-else", SessionID: "bad", Seq: 1, ClosesUserTurn: true})
	require.NoError(t, err)
	unknown, err := json.Marshal(events.TurnAccounted{Schema: "mnemos.turn_accounted.v9", TenantID: tenant, SessionID: "bad", Seq: 1})
	require.NoError(t, err)
	zero, err := json.Marshal(events.TurnAccounted{Schema: events.SchemaTurnAccounted, TenantID: tenant, SessionID: "bad", Seq: 0})
	require.NoError(t, err)
	for i, data := range [][]byte{[]byte("{not json"), other, unknown, zero} {
		_, err := h.bus.Publish(context.Background(), h.bus.Subject(bus.KindTurnAccounted, tenant, "bad"), fmt.Sprintf("bad-%d", i), data, nil)
		require.NoError(t, err)
	}
	var reasons []string
	for range 4 {
		msg, err := sub.NextMsg(30 * time.Second)
		require.NoError(t, err)
		require.Equal(t, "extractor", msg.Header.Get(bus.HeaderDeadLetterConsumer))
		reasons = append(reasons, msg.Header.Get(bus.HeaderDeadLetterReason))
	}
	all := strings.Join(reasons, "\n")
	require.Contains(t, all, "turn.accounted: invalid character")
	require.Contains(t, all, "arrived on the subject of acme/bad")
	require.Contains(t, all, "unknown schema")
	require.Contains(t, all, "want a positive seq")
	require.Eventually(t, func() bool {
		return h.metrics.SumAll("mnemos.bus.deliveries", "consumer", "extractor", "result", string(bus.DeadLettered)) == 4
	}, 10*time.Second, 10*time.Millisecond)
	require.Zero(t, rec.calls.Load())
}

// TestASessionWithoutAWriteScopeIsCounted: a session whose events name no
// scope the tenant lets extraction write to is left alone and counted.
func TestASessionWithoutAWriteScopeIsCounted(t *testing.T) {
	t.Parallel()
	h := setup(t, `{"extraction": {"write_scope": ["project"]}}`)
	var rec recorder
	h.service(rec.provider())
	h.relay()
	s := h.session("s1")
	s.scope = map[string]string{"user": "u-42"}
	s.say("remember that I prefer short answers", "Ok.")
	require.Eventually(t, func() bool {
		return h.metrics.Sum("mnemos.extractor.runs", "outcome", extractor.OutcomeNoScope) == 1
	}, 30*time.Second, 10*time.Millisecond)
	require.Zero(t, rec.calls.Load())
	require.Zero(t, h.cursor("s1").SeenSeq)
}

// TestTheSameRuleUpdatesItsMemory: a rule said again later updates the
// memory it made the first time rather than adding another.
func TestTheSameRuleUpdatesItsMemory(t *testing.T) {
	t.Parallel()
	h := setup(t, "")
	sub := h.subscribe()
	var rec recorder
	h.service(rec.provider())
	h.relay()
	s := h.session("s1")
	s.say("From now on use pnpm.", "Ok.")
	h.settled("s1", 1)
	require.Equal(t, []string{"use-pnpm"}, h.nextSaved(sub).Created)
	s.say("Ok, from now on, use pnpm!", "Sorry, pnpm it is.")
	h.settled("s1", 2)
	ev := h.nextSaved(sub)
	require.Empty(t, ev.Created)
	require.Equal(t, []string{"use-pnpm"}, ev.Updated)
	require.Equal(t, []string{"use-pnpm"}, h.names(project), "one memory, not two")
	m, _ := h.memory(project, "use-pnpm")
	require.EqualValues(t, 2, m.Revision)
	require.Contains(t, m.Body, "from now on, use pnpm")
}
