package recall

import (
	"context"
	"encoding/json"
	"fmt"
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

func TestStemsMeetAcrossForms(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{
		{"migrations", "migration"}, {"databases", "database"}, {"testing", "tests"}, {"tested", "test"},
		{"running", "run"}, {"Fridays", "friday"}, {"policies", "policy"}, {"staging", "stage"},
	} {
		require.Equal(t, Terms(pair[0]), Terms(pair[1]), "%q and %q", pair[0], pair[1])
	}
	require.Equal(t, []string{"run", "migration", "stag", "databas"}, Terms("Can you run the migration on the staging database?"))
	require.Empty(t, Terms("Can you do this for me, please?"), "function words carry no topic")
}

// TestBM25RanksByRelevanceAboveAFloor: the memory sharing rare words with
// the request ranks first, a memory sharing one common word ranks below
// the floor, and memories sharing nothing never score.
func TestBM25RanksByRelevanceAboveAFloor(t *testing.T) {
	t.Parallel()
	docs := [][]string{
		Terms("testing style: Integration tests hit a real database, never mocks"),
		Terms("staging db read only fridays: The staging database is read-only on Fridays"),
		Terms("deploy window: Deploys go out on Tuesdays after the standup"),
		Terms("prefers short answers: The user wants terse replies without summaries"),
	}
	query := Terms("can you run the migration on the staging database?")
	all := Rank(query, docs, 0)
	require.Len(t, all, 2, "only the memories sharing a word score at all")
	require.Equal(t, 1, all[0].Index, "two shared words, one of them rare and repeated, rank first")
	require.Equal(t, 0, all[1].Index)
	require.Greater(t, all[0].Score, all[1].Score)

	floored := Rank(query, docs, MinScore)
	require.Len(t, floored, 1, "one common word in common is under the floor")
	require.Equal(t, 1, floored[0].Index)
	require.GreaterOrEqual(t, floored[0].Score, MinScore)

	require.Empty(t, Rank(Terms("what is the weather like in Lisbon"), docs, MinScore), "an unrelated request surfaces nothing")
	require.Empty(t, Rank(nil, docs, MinScore))
	require.Empty(t, Rank(query, nil, MinScore))
}

// TestBuiltinSelectorSurfacesOnlyRelevantMemories runs the builtin through
// the request the Recaller writes: the relevant memories come back best
// first, the irrelevant ones stay out, and the answer is capped at the
// schema's maxItems.
func TestBuiltinSelectorSurfacesOnlyRelevantMemories(t *testing.T) {
	t.Parallel()
	cands := []Candidate{
		cand("user:u-1", "prefers-short-answers", memory.TypeUser, "The user wants terse replies without summaries"),
		cand("project:repo-x", "staging-db-read-only-fridays", memory.TypeFeedback, "The staging database is read-only on Fridays"),
		cand("project:repo-x", "deploy-window", memory.TypeProject, "Deploys go out on Tuesdays after the standup"),
		cand("project:repo-x", "migration-runner", memory.TypeProject, "Database migrations run through make migrate, never by hand"),
		cand("project:repo-x", "testing-style", memory.TypeFeedback, "Integration tests hit a real database, never mocks"),
	}
	got := pick(t, "can you run the migration on the staging database?", nil, cands, 5)
	require.Equal(t, []string{"project:repo-x/migration-runner", "project:repo-x/staging-db-read-only-fridays"}, got,
		"three words in common (run, migration twice, database) rank above two (staging twice, database)")
	require.Equal(t, []string{"project:repo-x/migration-runner"}, pick(t, "can you run the migration on the staging database?", nil, cands, 1),
		"no more than the answer's schema allows")
	require.Equal(t, []string{"project:repo-x/staging-db-read-only-fridays"}, pick(t, "is staging up today?", nil, cands, 5))
	require.Empty(t, pick(t, "what's the weather in Lisbon tomorrow?", nil, cands, 5))
	require.Empty(t, pick(t, "hello there", nil, nil, 5), "no candidates, nothing picked")

	// Twenty unrelated memories do not make a lone shared word rare enough.
	var many []Candidate
	for i := range 20 {
		many = append(many, cand("project:repo-x", fmt.Sprintf("topic-%d", i), memory.TypeProject, fmt.Sprintf("Notes on subsystem %d of the billing database", i)))
	}
	require.Empty(t, pick(t, "rename the database column", nil, many, 5), "a word every memory has is no sign of relevance")
}

// TestToolReferencesForToolsJustUsedAreLeftOutButTheirPitfallsAreNot: the
// builtin tells a tool's usage reference from a warning about it by the
// description's wording.
func TestToolReferencesForToolsJustUsedAreLeftOutButTheirPitfallsAreNot(t *testing.T) {
	t.Parallel()
	usage := cand("project:repo-x", "bash-usage", memory.TypeReference, "How the Bash tool runs commands in the repo sandbox")
	pitfall := cand("project:repo-x", "bash-sandbox-pitfalls", memory.TypeReference, "Bash in the repo sandbox hangs on interactive commands; pass --yes")
	feedback := cand("project:repo-x", "bash-style", memory.TypeFeedback, "Bash commands in the repo sandbox should use long flags")
	mcp := cand("project:repo-x", "github-issues", memory.TypeReference, "Filing issues in the repo sandbox through the github MCP server")
	cands := []Candidate{usage, pitfall, feedback, mcp}
	query := "run the bash commands in the repo sandbox and file the issues"

	got := pick(t, query, []string{"Bash", "mcp__github__create_issue"}, cands, 5)
	require.ElementsMatch(t, []string{pitfall.Ref, feedback.Ref}, got, "the usage references of the tools just used are left out")
	got = pick(t, query, nil, cands, 5)
	require.ElementsMatch(t, []string{usage.Ref, pitfall.Ref, feedback.Ref, mcp.Ref}, got, "with no tools just used, every reference may surface")
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
