package searcheval

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// memServer is a Server in memory, for the run's own logic: it keeps the
// messages it was sent by session and position, applies a session's
// rounds only on the second look, and answers a search with a memory
// first, then every message of the scope holding the query's last word,
// the latest first.
type memServer struct {
	events  []turn.Event
	looked  map[string]int
	queries []string
}

func (m *memServer) Send(_ context.Context, events []turn.Event) error {
	m.events = append(m.events, events...)
	return nil
}

func (m *memServer) AppliedSeq(_ context.Context, session string) (int64, error) {
	m.looked[session]++
	if m.looked[session] < 2 {
		return 0, nil
	}
	var seq int64
	for _, ev := range m.events {
		if ev.SessionID == session {
			seq = max(seq, ev.Seq)
		}
	}
	return seq, nil
}

func (m *memServer) Search(_ context.Context, scope, query string, limit int) ([]Hit, error) {
	m.queries = append(m.queries, scope+" "+query)
	words := Tokens(query)
	word := words[len(words)-1]
	hits := []Hit{{Source: "memory", Memory: "a-memory"}}
	position := map[string]int64{}
	var found []Hit
	for _, ev := range m.events {
		p := position[ev.SessionID]
		position[ev.SessionID]++
		if "project:"+ev.MemoryScope["project"] == scope && strings.Contains(strings.ToLower(ev.InputMessages[0].Content[0].Text), word) {
			found = append([]Hit{{Source: "message", Session: ev.SessionID, Position: p}}, found...)
		}
	}
	hits = append(hits, found...)
	return hits[:min(limit, len(hits))], nil
}

const runFixture = `{"conversations": [
  {"id": "one", "sessions": [
    {"turns": [{"id": "a1", "speaker": "Ann", "text": "I adopted a cat"}, {"id": "a2", "speaker": "Bo", "text": "A cat, lovely"}]},
    {"turns": [{"id": "b1", "speaker": "Ann", "text": "The cat sleeps all day"}]}
  ], "questions": [
    {"id": "q1", "question": "Who adopted a cat", "evidence": ["a1"], "kind": "single"},
    {"id": "q2", "question": "What pet sleeps? cat", "evidence": ["a1", "b1"], "kind": "multi"}
  ]},
  {"id": "two", "sessions": [
    {"turns": [{"id": "a1", "speaker": "Cy", "text": "My cat is grey"}]}
  ], "questions": [
    {"id": "q1", "question": "what colour is the cat", "evidence": ["a1"], "kind": "single"}
  ]}
]}`

// TestRunMapsHitsToTurns: each turn goes to its conversation's scope as a
// round of one message; the run waits until each session is applied; a
// hit's session and position name the turn, a memory names none; BM25 is
// asked over each conversation's own turns; the figures are those of the
// ranks found. Ready is called between the last session applied and the
// first question.
func TestRunMapsHitsToTurns(t *testing.T) {
	ds, _, _, err := Parse([]byte(runFixture))
	require.NoError(t, err)
	srv := &memServer{looked: map[string]int{}}
	var progress bytes.Buffer
	ready := false
	rep, err := Run(context.Background(), ds, srv, Options{RunID: "r1", Progress: &progress, Ready: func(context.Context) error {
		require.Len(t, srv.looked, 3, "every session applied first")
		require.Empty(t, srv.queries, "no question asked yet")
		ready = true
		return nil
	}})
	require.NoError(t, err)
	require.True(t, ready)

	require.Len(t, srv.events, 4)
	ev := srv.events[2]
	require.Equal(t, "r1-c1-s2", ev.SessionID)
	require.Equal(t, int64(1), ev.Seq)
	require.Equal(t, map[string]string{"project": "r1-c1"}, ev.MemoryScope)
	require.Equal(t, "Ann: The cat sleeps all day", ev.InputMessages[0].Content[0].Text)
	require.Nil(t, ev.Response, "one message per round")
	require.Equal(t, map[string]int{"r1-c1-s1": 2, "r1-c1-s2": 2, "r1-c2-s1": 2}, srv.looked, "each session looked at until applied")
	require.Equal(t, []string{"project:r1-c1 Who adopted a cat", "project:r1-c1 What pet sleeps? cat", "project:r1-c2 what colour is the cat"}, srv.queries)
	require.Equal(t, []string{"project:r1-c1", "project:r1-c2"}, rep.Scopes)

	// The fake answers the memory, then b1, a2, a1 in conversation one.
	require.Equal(t, []string{"", "b1", "a2", "a1"}, rep.Results[0].MnemosHits)
	require.Equal(t, []int{4}, rep.Results[0].Mnemos)
	require.Equal(t, []int{4, 2}, rep.Results[1].Mnemos)
	require.Equal(t, []string{"", "a1"}, rep.Results[2].MnemosHits, "conversation two's a1 is its own turn")
	require.Equal(t, []int{2}, rep.Results[2].Mnemos)
	require.Equal(t, 3, rep.MemoryHits)
	require.Equal(t, Score([][]int{{4}, {4, 2}, {2}}), rep.Mnemos)
	require.Equal(t, Score([][]int{{4, 2}}), rep.ByKind["multi"].Mnemos)

	// BM25: "adopted" is in a1 alone of conversation one.
	require.Equal(t, "a1", rep.Results[0].BM25Hits[0])
	require.Equal(t, 1, rep.Results[0].BM25[0])
	require.Equal(t, []string{"a1"}, rep.Results[2].BM25Hits)

	var table bytes.Buffer
	require.NoError(t, rep.PrintTable(&table))
	require.Contains(t, table.String(), "2 conversations, 3 sessions, 4 turns, 3 questions; scopes project:r1-c1 project:r1-c2")
	require.Regexp(t, `(?m)^\s+mnemos\s+3\s+1\.000\s+1\.000\s+1\.000\s+1\.000\s+0\.417\s*$`, table.String())
	var back Report
	data, err := json.Marshal(rep)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &back))
	require.Equal(t, rep.Mnemos, back.Mnemos)

	var behind bytes.Buffer
	rep.PrintBehind(&behind)
	require.Contains(t, behind.String(), `conversation one, question q1 (single): "Who adopted a cat"`)
	require.Contains(t, behind.String(), "3 questions where Mnemos ranks the evidence below BM25")
}
