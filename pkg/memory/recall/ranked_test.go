package recall_test

import (
	"context"
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
