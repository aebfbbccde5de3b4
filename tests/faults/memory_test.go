package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/sessionmemory"
)

// This file holds what the fault tests of the memory services share: the
// workloads that make session-memory and the extractor work, and the
// checks of what they stored.

// notesSession is a session whose notes are due on its first turn and
// then every third: it starts above the first-update threshold, and each
// round adds a 20 KB tool result (about 5,000 tokens) and one tool call.
func notesSession(id string, n int) []turn.Event {
	return session(id, n, eventOptions{usage: true, firstInput: 12_000, resultBytes: 20_000})
}

// publishAll publishes events straight to NATS, in order.
func publishAll(t *testing.T, s *system, evs []turn.Event) {
	t.Helper()
	for _, ev := range evs {
		_, err := s.publish(context.Background(), ev)
		require.NoError(t, err)
	}
}

// notesRow is what a session's notes row holds, as the checks read it.
type notesRow struct {
	content, lastUUID, lastError string
	version, tokens, toolCalls   int64
	seenSeq                      int64
	mark                         store.NotesMark
	owner                        string
	pending                      bool
	rejected, failed             int64
}

func (s *system) notes(session string) notesRow {
	s.t.Helper()
	var n notesRow
	require.NoError(s.t, s.admin.QueryRow(context.Background(), `
		SELECT content, last_summarized_uuid, last_error, version, tokens_at_update, tool_calls_at_update, seen_seq,
		       mark_attempted, mark_seq, mark_tokens, mark_tool_calls, update_owner, pending, rejected_updates, failed_updates
		FROM session_notes WHERE session_id = $1`, session).Scan(
		&n.content, &n.lastUUID, &n.lastError, &n.version, &n.tokens, &n.toolCalls, &n.seenSeq,
		&n.mark.Attempted, &n.mark.Seq, &n.mark.Tokens, &n.mark.ToolCalls, &n.owner, &n.pending, &n.rejected, &n.failed), session)
	return n
}

// notesUpdates reads the session_memory.updated events of the stream by
// session, each version's once, and requires that none was published twice.
func notesUpdates(t *testing.T, s *system) map[string][]events.SessionMemoryUpdated {
	t.Helper()
	out := map[string][]events.SessionMemoryUpdated{}
	seen := map[string]bool{}
	for _, m := range s.streamMsgs(bus.StreamEvents, bus.KindSessionMemoryUpdated+".>") {
		id := m.Headers().Get(jetstream.MsgIDHeader)
		require.False(t, seen[id], "%s published once (within the duplicate window)", id)
		seen[id] = true
		var ev events.SessionMemoryUpdated
		require.NoError(t, json.Unmarshal(m.Data(), &ev))
		out[ev.SessionID] = append(out[ev.SessionID], ev)
	}
	for _, evs := range out {
		slices.SortFunc(evs, func(a, b events.SessionMemoryUpdated) int { return int(a.Version - b.Version) })
	}
	return out
}

// checkNotes: every session's notes were written, each update once and
// announced once, under the gate (the first at the first-update threshold,
// each later one after the growth and the tool calls it asks), and no
// update still owed: the session's last turn is not due against where the
// last update left the mark. No claim or trailing run is left behind.
func checkNotes(t *testing.T, s *system, last map[string]int64) {
	t.Helper()
	set := tenantcfg.Defaults().SessionMemory
	// An update a kill cut short is made again: by the redelivered turn, or
	// by the sweep once its claim ran out. A kill between an update's commit
	// and its release leaves the claim's owner behind with nothing owed; its
	// lease runs out and the next due turn takes it, so only a live claim
	// counts as an update under way.
	require.Eventually(t, func() bool {
		return s.count(`SELECT count(*) FROM session_notes
			WHERE pending OR (update_owner <> '' AND update_lease_until > now())`) == 0
	}, settleTimeout, poll, "every notes update ended")
	s.waitOutboxEmpty()
	updates := notesUpdates(t, s)
	require.Len(t, updates, len(last), "notes updates announced for every session, and only those")
	for id, seq := range last {
		n := s.notes(id)
		evs := updates[id]
		require.Equal(t, seq, n.seenSeq, "%s: the service looked at every turn", id)
		require.Zero(t, n.rejected+n.failed, "%s: every builtin update was stored (%s)", id, n.lastError)
		require.EqualValues(t, len(evs), n.version, "%s: one announcement per stored version", id)
		for i, ev := range evs {
			require.EqualValues(t, i+1, ev.Version, "%s: versions 1, 2, … each once", id)
			if i == 0 {
				require.GreaterOrEqual(t, ev.TokensAtUpdate, set.InitTokens, "%s: the first update at the threshold", id)
				continue
			}
			prev := evs[i-1]
			require.GreaterOrEqual(t, ev.TokensAtUpdate-prev.TokensAtUpdate, set.UpdateTokens, "%s v%d: an update is made once per growth", id, ev.Version)
			require.GreaterOrEqual(t, ev.ToolCallsAtUpdate-prev.ToolCallsAtUpdate, set.UpdateToolCalls, "%s v%d: and once per tool calls", id, ev.Version)
			require.NotEqual(t, prev.LastSummarizedMessage, ev.LastSummarizedMessage, "%s v%d: each update covers new messages", id, ev.Version)
		}
		final := evs[len(evs)-1]
		require.Equal(t, final.LastSummarizedMessage, n.lastUUID, id)
		require.Equal(t, final.TokensAtUpdate, n.tokens, id)
		require.True(t, strings.HasPrefix(n.content, "# Session Title\n"), "%s: the notes keep their structure", id)

		var tokens, tools int64
		require.NoError(t, s.admin.QueryRow(context.Background(),
			"SELECT token_count, tool_calls_total FROM sessions WHERE session_id = $1", id).Scan(&tokens, &tools))
		// Every response of the workload calls one tool.
		d := sessionmemory.Decide(n.mark, store.NotesTurn{Seq: seq, Tokens: tokens, ToolCallsTotal: tools, ToolCalls: 1}, set)
		require.False(t, d.Due, "%s: no update owed is lost (mark %+v, last turn at %d tokens, %d tool calls)", id, n.mark, tokens, tools)
	}
}

// facts are the facts the user of a chat session asks the agent to keep,
// one a round, and the memory names the builtin extractor gives them.
func fact(id string, round int) (text, name string) {
	return fmt.Sprintf("Remember that %s%d builds need the gamma toolchain.", id, round),
		fmt.Sprintf("%s%d-builds-need-gamma-toolchain", id, round)
}

// chat makes n rounds of a user talking with the main agent, each round
// closing a user turn: the user states a fact to remember, the agent
// acknowledges it without a tool call. The session's memories go to the
// project scope project. Event ids are "<session>-<seq>".
func chat(id, project string, n int) []turn.Event {
	evs := make([]turn.Event, 0, n)
	for seq := 1; seq <= n; seq++ {
		text, _ := fact(id, seq)
		evs = append(evs, turn.Event{
			Schema: turn.SchemaV1, EventID: fmt.Sprintf("%s-%d", id, seq), TenantID: tenant, SessionID: id, Seq: int64(seq),
			AgentID: turn.MainAgent, MemoryScope: map[string]string{"project": project},
			Model: "claude-sonnet-4-5",
			InputMessages: []turn.Message{{UUID: fmt.Sprintf("%s-u%d", id, seq), Role: "user", Content: turn.Content{
				{Type: turn.BlockText, Text: text},
			}}},
			Response: &turn.Message{UUID: fmt.Sprintf("%s-a%d", id, seq), Role: "assistant", StopReason: "end_turn", Content: turn.Content{
				{Type: turn.BlockText, Text: "Noted."},
			}},
			OccurredAt: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Second),
		})
	}
	return evs
}

// checkExtraction: every fact the users asked to keep is one memory of its
// session's scope, made once (one revision, by the extractor, for that
// session), listed once in the scope's index and announced once in
// memory.saved; every session's cursor is past its last turn with no run
// owed and none failed. (A run a kill cut short may leave its scope's lease
// behind; it runs out, and the cursors say that no run is owed.)
func checkExtraction(t *testing.T, s *system, last map[string]int64, scopes map[string]string) {
	t.Helper()
	ctx := context.Background()
	// A run a kill cut short is made again once its scope's lease ran out:
	// by the redelivered turn or by the sweep, after every message was
	// acknowledged.
	require.Eventually(t, func() bool {
		return s.count("SELECT count(*) FROM extractor_cursors WHERE due_seq > seq") == 0
	}, settleTimeout, poll, "every owed extraction ran")
	s.waitOutboxEmpty()
	announced := map[string]int{}
	for _, m := range s.streamMsgs(bus.StreamEvents, bus.KindMemorySaved+".>") {
		var ev events.MemorySaved
		require.NoError(t, json.Unmarshal(m.Data(), &ev))
		require.Empty(t, ev.Updated, "%s: the builtin only makes memories here", ev.SourceTurn)
		for _, name := range ev.Created {
			announced[ev.Scope+"/"+name]++
		}
	}
	for id, msgs := range s.msgIDs(bus.StreamEvents, bus.KindMemorySaved+".>") {
		require.Equal(t, 1, msgs, "%s published once", id)
	}
	var facts int64
	for id, n := range last {
		scope := "project:" + scopes[id]
		for round := 1; round <= int(n); round++ {
			_, name := fact(id, round)
			facts++
			var revision int64
			var body string
			require.NoError(t, s.admin.QueryRow(ctx, "SELECT revision, body FROM memories WHERE scope = $1 AND name = $2 AND deleted_at IS NULL",
				scope, name).Scan(&revision, &body), "%s/%s was saved", scope, name)
			require.EqualValues(t, 1, revision, "%s/%s saved once", scope, name)
			require.Contains(t, body, "gamma toolchain")
			require.EqualValues(t, 1, s.count(`SELECT count(*) FROM memory_revisions
				WHERE scope = $1 AND name = $2 AND actor = 'extractor' AND op = 'created' AND session_id = $3`, scope, name, id),
				"%s/%s: one revision, the extractor's, for its session", scope, name)
			require.EqualValues(t, 1, s.count("SELECT count(*) FROM memory_indexes, regexp_matches(content, $2, 'g') WHERE scope = $1",
				scope, `\(`+name+`\.md\)`), "%s/%s listed once in the index", scope, name)
			require.Equal(t, 1, announced[scope+"/"+name], "%s/%s announced once", scope, name)
		}
		var seq, seen, due, position, failed int64
		require.NoError(t, s.admin.QueryRow(ctx, "SELECT seq, seen_seq, due_seq, position, failed_runs FROM extractor_cursors WHERE session_id = $1", id).
			Scan(&seq, &seen, &due, &position, &failed), id)
		require.Equal(t, n, seq, "%s: the cursor moved past the last turn", id)
		require.Equal(t, n, seen, id)
		require.Zero(t, due, "%s: no run owed", id)
		require.Equal(t, 2*n, position, "%s: every message considered", id)
		require.Zero(t, failed, id)
	}
	require.Equal(t, facts, s.count("SELECT count(*) FROM memories"), "no other memory")
	require.Equal(t, facts, s.count("SELECT count(*) FROM memory_revisions"), "no other revision")
	require.Len(t, announced, int(facts), "no other memory announced")
}
