package recall

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
)

var testNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func cand(scope, name string, typ memory.Type, desc string) Candidate {
	sc, err := memory.ParseScope(scope)
	if err != nil {
		panic(err)
	}
	h := memory.Header{Scope: sc, Name: memory.Name(name), Type: typ, Description: desc, UpdatedAt: testNow.Add(-time.Hour)}
	return Candidate{Header: h, Ref: Ref(sc, h.Name)}
}

// pick runs the builtin selector on the request the Recaller would send.
func pick(t *testing.T, query string, tools []string, cands []Candidate, max int) []string {
	t.Helper()
	resp, err := Builtin(context.Background(), request("acme", "", query, tools, cands, max, testNow))
	require.NoError(t, err)
	got, err := parseAnswer(resp.Text)
	require.NoError(t, err)
	return got
}

// scored is c with the search's score for the request.
func scored(c Candidate, score float64) Candidate {
	c.Score = score
	return c
}

// TestBuiltinPicksTheBestMatchesAboveTheFloor runs the builtin through the
// request the Recaller writes: it takes the memories whose match is at
// least MinScore, best first whatever their order in the list, as many as
// the answer's schema allows; a memory listed without a match (recent, no
// word of the request) is never picked.
func TestBuiltinPicksTheBestMatchesAboveTheFloor(t *testing.T) {
	t.Parallel()
	recent := cand("user:u-1", "prefers-short-answers", memory.TypeUser, "The user wants terse replies without summaries")
	fridays := scored(cand("project:repo-x", "staging-db-read-only-fridays", memory.TypeFeedback, "The staging database is read-only on Fridays"), 3.14)
	runner := scored(cand("project:repo-x", "migration-runner", memory.TypeProject, "Database migrations run through make migrate, never by hand"), 6.3)
	tests := scored(cand("project:repo-x", "testing-style", memory.TypeFeedback, "Integration tests hit a real database, never mocks"), 1.99)
	floor := scored(cand("project:repo-x", "deploy-window", memory.TypeProject, "Deploys go out on Tuesdays after the standup"), MinScore)
	cands := []Candidate{recent, tests, fridays, floor, runner}

	req := request("acme", "", "can you run the migration on the staging database?", nil, cands, 5, testNow)
	text := req.Messages[0].Content[0].Text
	require.Contains(t, text, "- project:repo-x/staging-db-read-only-fridays [feedback, saved today, match 3.1]: The staging")
	require.Contains(t, text, "- project:repo-x/testing-style [feedback, saved today, match 1.9]: ", "cut, not rounded up to the floor")
	require.Contains(t, text, "- user:u-1/prefers-short-answers [user, saved today]: ", "no match without a score")

	require.Equal(t, []string{runner.Ref, fridays.Ref, floor.Ref}, pick(t, "can you run the migration on the staging database?", nil, cands, 5))
	require.Equal(t, []string{runner.Ref}, pick(t, "can you run the migration on the staging database?", nil, cands, 1),
		"no more than the answer's schema allows")
	require.Empty(t, pick(t, "what's the weather in Lisbon tomorrow?", nil, []Candidate{recent, tests}, 5),
		"nothing at the floor, nothing picked")
	require.Empty(t, pick(t, "hello there", nil, nil, 5), "no candidates, nothing picked")
}

// TestToolReferencesForToolsJustUsedAreLeftOutButTheirPitfallsAreNot: the
// builtin tells a tool's usage reference from a warning about it by the
// description's wording.
func TestToolReferencesForToolsJustUsedAreLeftOutButTheirPitfallsAreNot(t *testing.T) {
	t.Parallel()
	usage := scored(cand("project:repo-x", "bash-usage", memory.TypeReference, "How the Bash tool runs commands in the repo sandbox"), 8)
	pitfall := scored(cand("project:repo-x", "bash-sandbox-pitfalls", memory.TypeReference, "Bash in the repo sandbox hangs on interactive commands; pass --yes"), 7)
	feedback := scored(cand("project:repo-x", "bash-style", memory.TypeFeedback, "Bash commands in the repo sandbox should use long flags"), 6)
	mcp := scored(cand("project:repo-x", "github-issues", memory.TypeReference, "Filing issues in the repo sandbox through the github MCP server"), 5)
	cands := []Candidate{usage, pitfall, feedback, mcp}
	query := "run the bash commands in the repo sandbox and file the issues"

	got := pick(t, query, []string{"Bash", "mcp__github__create_issue"}, cands, 5)
	require.Equal(t, []string{pitfall.Ref, feedback.Ref}, got, "the usage references of the tools just used are left out")
	got = pick(t, query, []string{"Bash"}, cands, 2)
	require.Equal(t, []string{pitfall.Ref, feedback.Ref}, got, "one left out makes room for the next")
	got = pick(t, query, nil, cands, 5)
	require.Equal(t, []string{usage.Ref, pitfall.Ref, feedback.Ref, mcp.Ref}, got, "with no tools just used, every reference may surface")
	got = pick(t, query, []string{"Read"}, cands, 5)
	require.Len(t, got, 4, "tools that no memory is about change nothing")

	for _, tc := range []struct {
		desc string
		want bool
	}{
		{"How to call the Bash tool", true},
		{"Bash: known issue with long output", false},
		{"Bash times out after ten minutes; do not use it for builds", false},
		{"Avoid Bash for file edits", false},
		{"The Bash tool's workaround for quoting", false},
		{"Bash is deprecated here, use the Task tool instead", false},
		{"Where the CI logs live", false},
	} {
		require.Equal(t, tc.want, ToolReference(memory.TypeReference, "notes", tc.desc, []string{"Bash"}), tc.desc)
	}
	require.False(t, ToolReference(memory.TypeFeedback, "notes", "How to call the Bash tool", []string{"Bash"}), "only reference memories")
}

// TestBuiltinRefusesARequestItCannotRead: a request not written by the
// Recaller is a bad request, not an empty answer.
func TestBuiltinRefusesARequestItCannotRead(t *testing.T) {
	t.Parallel()
	req := request("acme", "", "hello world", nil, nil, 5, testNow)
	bad := req
	bad.JSONSchema = json.RawMessage(`{"type":"object"}`)
	_, err := Builtin(context.Background(), bad)
	require.Equal(t, llm.KindRequest, llm.KindOf(err))
	bad = req
	bad.Messages = nil
	_, err = Builtin(context.Background(), bad)
	require.Equal(t, llm.KindRequest, llm.KindOf(err))
	bad = request("acme", "", "hello world", nil, []Candidate{scored(cand("project:p", "notes", memory.TypeProject, "a"), 3)}, 5, testNow)
	bad.Messages[0].Content[0].Text = strings.Replace(bad.Messages[0].Content[0].Text, "match 3.0", "match high", 1)
	_, err = Builtin(context.Background(), bad)
	require.Equal(t, llm.KindRequest, llm.KindOf(err), "a match that is no number")
}

func TestAnswersResolveByReferenceOrName(t *testing.T) {
	t.Parallel()
	cands := []Candidate{
		cand("user:u-1", "notes", memory.TypeUser, "a"),
		cand("project:p", "notes", memory.TypeProject, "b"),
		cand("project:p", "deploy", memory.TypeProject, "c"),
	}
	for in, want := range map[string]string{
		"project:p/notes": "project:p/notes", "project:p/notes.md": "project:p/notes", " `deploy.md` ": "project:p/deploy",
		"notes": "user:u-1/notes", // a bare name two scopes share: the most recently updated (the list's first)
	} {
		c, ok := resolve(in, cands)
		require.True(t, ok, in)
		require.Equal(t, want, c.Ref, in)
	}
	for _, in := range []string{"made-up", "team:x/notes", "project:q/deploy", ""} {
		_, ok := resolve(in, cands)
		require.False(t, ok, in)
	}
	_, err := parseAnswer(`{"picked": []}`)
	require.Error(t, err)
	_, err = parseAnswer(`not json`)
	require.Error(t, err)
}
