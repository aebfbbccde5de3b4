package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/pkg/searcheval"
)

// evalFixture is a conversation whose answers are known: q1's words are
// in one turn and no other; q2's words are in none; q3's words are all in
// one evidence turn, "postcard" in the other too, and only "a" anywhere
// else; q4 asks "paddling" of a turn that says "paddled", which English
// stemming finds and a BM25 without stemming does not, no other word of
// it in any turn. The turns are in two sessions, so positions restart.
const evalFixture = `{"conversations": [{"id": "lake", "sessions": [
  {"id": "1", "date": "2026-05-02T10:00:00Z", "turns": [
    {"id": "D1:1", "speaker": "Ines", "text": "I bought a secondhand kayak on Saturday."},
    {"id": "D1:2", "speaker": "Tomas", "text": "Nice, what colour is it?"},
    {"id": "D1:3", "speaker": "Ines", "text": "Orange, with a cracked seat."}
  ]},
  {"id": "2", "date": "2026-05-09T10:00:00Z", "turns": [
    {"id": "D2:1", "speaker": "Tomas", "text": "My cousin sent me a postcard from Tromso."},
    {"id": "D2:2", "speaker": "Ines", "text": "We paddled across the reservoir this morning."},
    {"id": "D2:3", "speaker": "Tomas", "text": "Another postcard came, this one of a glacier."}
  ]}
], "questions": [
  {"id": "q1", "question": "Which kayak was bought?", "evidence": ["D1:1"], "kind": "single"},
  {"id": "q2", "question": "xylophone zeppelin", "evidence": ["D1:3"], "kind": "single"},
  {"id": "q3", "question": "Who sent a postcard?", "evidence": ["D2:1", "D2:3"], "kind": "multi"},
  {"id": "q4", "question": "Where did they go paddling?", "evidence": ["D2:2"], "kind": "single"},
  {"id": "q5", "question": "Who owns the harp?", "evidence": ["D9:9"]}
]}]}`

// TestEvalSearchMeasuresAgainstBM25: `mnemos eval search` sends the
// fixture's turns to a server in a fresh scope, waits until they are
// applied, asks each question of the scope's search and maps the hits
// back to turns: the figures are those the fixture was written to give,
// for Mnemos and for BM25. The question whose evidence names no turn is
// skipped and named; the sessions are the scope's; a second run makes a
// scope of its own.
func TestEvalSearchMeasuresAgainstBM25(t *testing.T) {
	t.Parallel()
	p := startAllInOne(t, nil)
	file := filepath.Join(t.TempDir(), "eval.json")
	require.NoError(t, os.WriteFile(file, []byte(evalFixture), 0o600))

	var out, progress bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"eval", "search", "--url", p.http, "--api-key", "test-dev-key", "--json", file},
		env(nil), &out, &progress))
	require.Contains(t, progress.String(), "mnemos format, 1 conversations, 6 turns, 4 questions, 1 skipped")
	var rep searcheval.Report
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep))
	require.Equal(t, []searcheval.Skipped{{Conversation: "lake", Question: "q5", Reason: "evidence D9:9 names no turn of the conversation"}}, rep.Skipped)

	ranks := map[string][2][]int{}
	for _, r := range rep.Results {
		ranks[r.ID] = [2][]int{r.Mnemos, r.BM25}
	}
	require.Equal(t, [2][]int{{1}, {1}}, ranks["q1"], "one turn has the word")
	require.Equal(t, [2][]int{{0}, {0}}, ranks["q2"], "no turn has the words")
	require.ElementsMatch(t, []int{1, 2}, ranks["q3"][0], "both postcards, first and second")
	require.ElementsMatch(t, []int{1, 2}, ranks["q3"][1])
	require.Equal(t, [2][]int{{1}, {0}}, ranks["q4"], "stemming finds paddled for paddling; BM25 does not")
	require.Equal(t, searcheval.Score([][]int{{1}, {0}, {1, 2}, {1}}), rep.Mnemos)
	require.InDelta(t, 0.75, rep.Mnemos.AnyAt5, 1e-12)
	require.InDelta(t, 0.75, rep.Mnemos.MRR, 1e-12)
	require.InDelta(t, 0.5, rep.BM25.AnyAt10, 1e-12)
	require.InDelta(t, 0.5, rep.BM25.AllAt5, 1e-12)
	require.Equal(t, 0, rep.MemoryHits)

	err := run(context.Background(), []string{"eval", "search", "--url", p.http, "--api-key", "wrong-key", file}, env(nil), io.Discard, io.Discard)
	require.ErrorContains(t, err, "server answered 401", "a key the server refuses")

	require.Len(t, rep.Scopes, 1)
	mn := client.New(p.http, "test-dev-key")
	var sessions api.SessionList
	sessions, err = mn.ListSessions(context.Background(), client.ListOptions{Filters: map[string]string{"scope": rep.Scopes[0]}})
	require.NoError(t, err)
	require.Len(t, sessions.Items, 2, "one session per session of the file, in the run's scope")

	// The table, from a second run into scopes of its own.
	out.Reset()
	require.NoError(t, run(context.Background(), []string{"eval", "search", "--url", p.http, "--api-key", "test-dev-key", file},
		env(nil), &out, io.Discard))
	require.Regexp(t, `(?m)^\s+mnemos\s+4\s+0\.750\s+0\.750\s+0\.750\s+0\.750\s+0\.750\s*$`, out.String())
	require.Regexp(t, `(?m)^\s+bm25\s+4\s+0\.500\s+0\.500\s+0\.500\s+0\.500\s+0\.500\s*$`, out.String())
	require.Contains(t, out.String(), "skipped: conversation lake, question q5: evidence D9:9 names no turn of the conversation")
	require.NotContains(t, out.String(), rep.Scopes[0]+" ", "a fresh scope")
}

// TestEvalSearchFailsLoudly: a file that is refused and a server that
// cannot be reached end the command with an error that says which; -h
// prints the usage.
func TestEvalSearchFailsLoudly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "eval.json")
	require.NoError(t, os.WriteFile(good, []byte(evalFixture), 0o600))
	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"conversations": [{"id": "x", "sessions": []}]}`), 0o600))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval"}, "the one evaluation is search"},
		{[]string{"eval", "search", "--api-key", "k"}, "takes one evaluation file"},
		{[]string{"eval", "search", good}, "needs --api-key"},
		{[]string{"eval", "search", "--api-key", "k", bad}, "conversation x has no turn"},
		{[]string{"eval", "search", "--api-key", "k", filepath.Join(dir, "none.json")}, "no such file"},
		{[]string{"eval", "search", "--api-key", "k", "--url", "http://127.0.0.1:1", good}, "send turns"},
	} {
		err := run(context.Background(), c.args, env(nil), io.Discard, io.Discard)
		require.ErrorContains(t, err, c.want, strings.Join(c.args, " "))
	}
	for _, args := range [][]string{{"eval", "-h"}, {"eval", "search", "--help"}} {
		var out bytes.Buffer
		require.ErrorIs(t, run(context.Background(), args, env(nil), &out, &out), flag.ErrHelp, "%v", args)
		require.Contains(t, out.String(), "Usage: mnemos eval search [flags] FILE.json", "%v", args)
	}
}
