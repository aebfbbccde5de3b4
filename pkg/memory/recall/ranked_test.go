package recall_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
)

// TestCandidatesBeginWithTheMemoriesTheQueryFinds: the selector sees
// first the memories that hold the query's words, by the search's ranking
// of name, description and body, even one older than every other and past
// the candidates' bound; the most recent fill the rest.
func TestCandidatesBeginWithTheMemoriesTheQueryFinds(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string // the selector's request, as it read it
	selector := builtin.New(map[llm.Task]builtin.Handler{llm.TaskRecall: func(ctx context.Context, req llm.Request) (llm.Response, error) {
		mu.Lock()
		for _, m := range req.Messages {
			for _, b := range m.Content {
				seen = append(seen, b.Text)
			}
		}
		mu.Unlock()
		return recall.Builtin(ctx, req)
	}})
	e := setup(t, selector)
	e.settings(func(s *recall.Settings) { s.Candidates = 2 })
	e.write(t, project, "fridays", memory.TypeProject, "What happens at the end of the week", "The staging database is read-only on Fridays.", t0.Add(-72*time.Hour))
	e.write(t, project, "coffee", memory.TypeUser, "The team's coffee order", "Oat milk.", t0.Add(-2*time.Hour))
	e.write(t, project, "lunch", memory.TypeUser, "Where the team eats", "The canteen.", t0.Add(-1*time.Hour))

	res := e.recall(t, "s1", "can I write to the staging database today?")
	require.Equal(t, 2, res.Candidates)
	mu.Lock()
	request := strings.Join(seen, "\n")
	mu.Unlock()
	first, second := strings.Index(request, "project:repo-x/fridays"), strings.Index(request, "project:repo-x/lunch")
	require.GreaterOrEqual(t, first, 0, "the oldest memory, found by its body, is a candidate: %s", request)
	require.Greater(t, second, first, "and comes before the most recent: %s", request)
	require.NotContains(t, request, "project:repo-x/coffee", "the bound holds")
}

// TestTheBuiltinRecallsTheOldestMemoryByItsBody: of 1,001 memories, the
// only one bearing on the request is the oldest, and it holds the
// request's words in its body alone (its name and description say
// nothing of them). Through the builtin provider, it is the one memory
// recalled; the thousand others, which share an ordinary word of the
// request, are not.
func TestTheBuiltinRecallsTheOldestMemoryByItsBody(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.write(t, project, "end-of-week", memory.TypeProject, "What happens at the end of the week",
		"The staging database is read-only on Fridays while the replicas resync.", t0.Add(-2000*time.Hour))
	for i := range 1000 {
		e.write(t, project, fmt.Sprintf("billing-note-%04d", i), memory.TypeProject, fmt.Sprintf("Billing subsystem note %d", i),
			fmt.Sprintf("Invoice batch %d of the billing database closes at midnight.", i), t0.Add(-time.Duration(1000-i)*time.Hour))
	}

	res := e.recall(t, "s1", "can I write to the staging database today?")
	require.Equal(t, recall.OutcomeSurfaced, res.Outcome)
	require.Equal(t, []string{"end-of-week"}, names(res.Memories))
	require.Equal(t, recall.DefaultSettings().Candidates, res.Candidates, "among the bound of candidates")
	require.Contains(t, res.Memories[0].Text, "read-only on Fridays")
	require.Equal(t, "builtin", res.Provider)
}

// TestAnUnrelatedRequestRecallsNothing: through the builtin provider, a
// request that shares no word with any memory recalls nothing, nor one
// that shares only a word every memory holds; a related one recalls the
// memories it bears on, best first.
func TestAnUnrelatedRequestRecallsNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.write(t, user, "prefers-short-answers", memory.TypeUser, "The user wants terse replies without summaries", "No summaries at the end.", t0)
	e.write(t, project, "staging-db-read-only-fridays", memory.TypeFeedback, "The staging database is read-only on Fridays",
		"Schema changes wait until Monday.", t0)
	e.write(t, project, "deploy-window", memory.TypeProject, "Deploys go out on Tuesdays after the standup", "Tuesdays, 11:00.", t0)
	e.write(t, project, "migration-runner", memory.TypeProject, "Database migrations run through make migrate, never by hand",
		"make migrate runs every pending migration in order.", t0)
	e.write(t, project, "testing-style", memory.TypeFeedback, "Integration tests hit a real database, never mocks", "Mocks hid a bug once.", t0)

	for i, q := range []string{"what's the weather in Lisbon tomorrow?", "hello there", "thanks, that is all"} {
		res := e.recall(t, fmt.Sprintf("unrelated-%d", i), q)
		require.Equal(t, recall.OutcomeNone, res.Outcome, q)
		require.Empty(t, res.Memories, q)
		require.Equal(t, 5, res.Candidates, "the recent are candidates still: %s", q)
	}
	res := e.recall(t, "related", "can you run the migration on the staging database?")
	require.Equal(t, []string{"migration-runner", "staging-db-read-only-fridays"}, names(res.Memories),
		"run and migration, three times, rank above staging")
	res = e.recall(t, "staging", "is staging up today?")
	require.Equal(t, []string{"staging-db-read-only-fridays"}, names(res.Memories))

	// Twenty memories sharing one word of the request do not make it rare.
	f := setup(t, nil)
	for i := range 20 {
		f.write(t, project, fmt.Sprintf("topic-%d", i), memory.TypeProject, fmt.Sprintf("Notes on subsystem %d of the billing database", i),
			"Owned by the payments team.", t0)
	}
	res = f.recall(t, "s1", "rename the database column")
	require.Equal(t, recall.OutcomeNone, res.Outcome, "a word every memory holds is no sign of relevance")
	require.Equal(t, 20, res.Candidates)
}

// TestARequestIsReadAsPlainWords: a request is no search query. One longer
// than a search allows (500 characters, 32 words), with quotes and a word
// after a dash, still finds the memory by its words, the dashed one
// included.
func TestARequestIsReadAsPlainWords(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.write(t, project, "race-detector", memory.TypeFeedback, "The race detector is required in CI", "Run go test -race before pushing.", t0)
	e.write(t, project, "deploy-window", memory.TypeProject, "Deploys go out on Tuesdays after the standup", "Tuesdays, 11:00.", t0)
	var log strings.Builder
	for i := range 40 {
		fmt.Fprintf(&log, "ok  \tgithub.com/acme/pkg%d\t0.%03ds\n", i, i)
	}
	q := `the "unit tests" pass, see the log below; should I run go test -race too?` + "\n" + log.String()
	require.Greater(t, len(q), 500)
	res := e.recall(t, "s1", q)
	require.Equal(t, []string{"race-detector"}, names(res.Memories))
}
