package codexcli_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/codexcli"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
)

// TestCodexCompactsOnItsOwnWhenRunStraight is the run the OpenAI door is
// measured against: the pinned Codex CLI straight against the scripted
// Responses upstream, on a task whose command outputs carry its count past
// its auto-compact limit. It sends its session's id and the kind of each
// request, reads most of its input from the modelled prompt cache, crosses
// the limit, compacts on its own (a request of kind compaction) and goes
// on from a short history to finish the task.
func TestCodexCompactsOnItsOwnWhenRunStraight(t *testing.T) {
	t.Parallel()
	const commands = 12
	ran := 0
	up := responses.Start(t, responses.Config{ContextWindow: 60_000, Script: func(r *responses.Request) (responses.Reply, error) {
		switch {
		case r.Kind == "compaction":
			return responses.Say(responses.Text("Summary: the numbers were counted several times; finish the task.")), nil
		case ran < commands:
			ran++
			return responses.Say(responses.FunctionCall("exec_command", map[string]string{"cmd": "seq 1 1500"})), nil
		}
		return responses.Say(responses.Text("counted them all")), nil
	}})
	s := codexcli.NewSession(t, up.URL)
	res, err := s.Run(context.Background(), codexcli.Run{Prompt: "count to 1500 a dozen times", ContextWindow: 40_000, AutoCompactLimit: 20_000})
	require.NoError(t, err)
	require.Contains(t, res.Stdout, "counted them all")

	calls := up.Calls()
	var compactions, peak int64
	var afterCompaction []int
	for i, c := range calls {
		require.NotNil(t, c.Request, "call %d parsed", i)
		require.NotEmpty(t, c.Request.Session, "the CLI names its session (session-id)")
		require.NotEmpty(t, c.Request.PromptCacheKey)
		peak = max(peak, c.Usage.Input)
		if c.Request.Kind == "compaction" {
			compactions++
			if i+1 < len(calls) {
				afterCompaction = append(afterCompaction, len(calls[i+1].Request.Items))
			}
		}
	}
	require.Positive(t, compactions, "the CLI compacted on its own")
	require.Greater(t, peak, int64(20_000), "straight, a request passed the auto-compact limit")
	for _, n := range afterCompaction {
		require.LessOrEqual(t, n, 6, "after its compaction the CLI goes on from a short history")
	}
	share := up.Usage().CachedShare()
	require.Greater(t, share, 0.5, "the prompt cache serves most of a straight run's input")
	t.Logf("straight: %d calls, %d compactions, peak request %d tokens, cached share %.3f", len(calls), compactions, peak, share)
}
