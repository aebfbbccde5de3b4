package proxy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/codexcli"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// codexTask is the task both Codex runs do: twelve commands whose outputs
// carry a straight run past the CLI's auto-compact limit.
type codexTask struct {
	commands, ran int
}

func (c *codexTask) script(r *responses.Request) (responses.Reply, error) {
	switch {
	case r.Kind == "compaction":
		return responses.Say(responses.Text("Summary: the numbers were counted several times; finish the task.")), nil
	case c.ran < c.commands:
		c.ran++
		return responses.Say(responses.Reasoning("count again"), responses.FunctionCall("exec_command", map[string]string{"cmd": "seq 1 1500"})), nil
	}
	return responses.Say(responses.Text("counted them all")), nil
}

// codexRun is what the test reads of a run's calls.
type codexRun struct {
	calls       int
	compactions int
	peak        int64
	share       float64
}

func measureCodex(t *testing.T, up *responses.Upstream) codexRun {
	t.Helper()
	var run codexRun
	for i, c := range up.Calls() {
		require.NotNil(t, c.Request, "call %d parsed", i)
		run.calls++
		run.peak = max(run.peak, c.Usage.Input)
		if c.Request.Kind == "compaction" {
			run.compactions++
		}
	}
	run.share = up.Usage().CachedShare()
	return run
}

// codexWindow is the CLI's window and auto-compact limit in both runs, a
// seventh of gpt-5's so that a dozen commands cross it. Mnemos holds the
// session below the limit less a round's growth (7% of gpt-5's effective
// 252,000: 17,640 tokens), and keeps after a compaction what fits a window
// that small (the session-memory keep settings scaled down alike).
const (
	codexWindow     = 40_000
	codexAutoLimit  = 20_000
	codexMnemosKnob = `{"tokens": {"auto_compact_percent": 7, "warning_buffer": 3000, "error_buffer": 500},
		"compaction": {"session_memory": {"min_tokens": 2000, "min_text_messages": 1, "max_tokens": 6000}}}`
)

// TestCodexThroughMnemosNeverCompactsOnItsOwn: the pinned Codex CLI, its
// base URL pointed at Mnemos's Responses door, does the task that makes it
// compact on its own when run straight. Through Mnemos no request the
// upstream gets passes the CLI's auto-compact limit, Mnemos compacts the
// session before a call, the CLI never sends a compaction request, its
// instructions and its first user message are still in the last request,
// and the share of input read from the prompt cache is at least 0.8 of the
// straight run's.
func TestCodexThroughMnemosNeverCompactsOnItsOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	run := codexcli.Run{Prompt: "count to 1500 a dozen times", ContextWindow: codexWindow, AutoCompactLimit: codexAutoLimit}

	straightTask := &codexTask{commands: 12}
	straightUp := responses.Start(t, responses.Config{ContextWindow: 60_000, Script: straightTask.script})
	res, err := codexcli.NewSession(t, straightUp.URL).Run(ctx, run)
	require.NoError(t, err)
	require.Contains(t, res.Stdout, "counted them all")
	straight := measureCodex(t, straightUp)
	require.Positive(t, straight.compactions, "straight, the CLI compacts on its own")

	task := &codexTask{commands: 12}
	up := responses.Start(t, responses.Config{ContextWindow: 60_000, Script: task.script})
	m := startMnemos(t, "http://127.0.0.1:1", key)
	require.NoError(t, m.store.SetTenantUpstream(ctx, tenant, store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(up.URL, "/v1"), Key: "sk-acme-openai"}))
	require.NoError(t, m.store.SetTenantSettings(ctx, tenant, []byte(codexMnemosKnob)))
	s := codexcli.NewSession(t, m.api.URL+"/v1")
	s.APIKey = key
	res, err = s.Run(ctx, run)
	require.NoError(t, err)
	require.Contains(t, res.Stdout, "counted them all")
	through := measureCodex(t, up)
	calls := up.Calls()
	t.Logf("straight: %d calls, %d compactions, peak %d tokens, cached share %.3f; through Mnemos: %d calls, %d compactions, peak %d, cached share %.3f",
		straight.calls, straight.compactions, straight.peak, straight.share, through.calls, through.compactions, through.peak, through.share)

	require.Zero(t, through.compactions, "through Mnemos the CLI never compacts on its own")
	require.Less(t, through.peak, int64(codexAutoLimit), "no request the upstream got passes the CLI's limit")
	require.Positive(t, compactionsBeforeTheCall(t, m.store, calls[0].Request.Session), "Mnemos compacted the session before a call")
	first, last := calls[0].Request, calls[len(calls)-1].Request
	require.Equal(t, first.Instructions, last.Instructions, "the CLI's instructions go up unchanged")
	firstUser := first.Messages("user")
	require.NotEmpty(t, firstUser)
	var kept bool
	for _, it := range last.Items {
		kept = kept || string(it.Raw) == string(firstUser[0].Raw)
	}
	require.True(t, kept, "the CLI's first user message, byte for byte, is in the last request")
	require.GreaterOrEqual(t, through.share, 0.8*straight.share, "the prompt cache serves as much as it does straight, within a fifth")
}

// TestCodexCompactingOnItsOwnThroughMnemosStaysTheMainAgent: when Mnemos
// does not keep the session under the CLI's limit (the tenant's threshold
// is the model's own, far above it), the CLI compacts itself through
// Mnemos. Its summarization call is managed but not recorded as a round,
// and the short history it goes on from is the main agent's conversation
// after its own compaction (client_compacted), not another agent's, nor a
// branch.
func TestCodexCompactingOnItsOwnThroughMnemosStaysTheMainAgent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	task := &codexTask{commands: 8}
	up := responses.Start(t, responses.Config{ContextWindow: 60_000, Script: task.script})
	m := startMnemos(t, "http://127.0.0.1:1", key)
	require.NoError(t, m.store.SetTenantUpstream(ctx, tenant, store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(up.URL, "/v1"), Key: "sk-acme-openai"}))
	s := codexcli.NewSession(t, m.api.URL+"/v1")
	s.APIKey = key
	res, err := s.Run(ctx, codexcli.Run{Prompt: "count to 1500 eight times", ContextWindow: codexWindow, AutoCompactLimit: codexAutoLimit})
	require.NoError(t, err)
	require.Contains(t, res.Stdout, "counted them all")

	run := measureCodex(t, up)
	require.Positive(t, run.compactions, "the CLI compacted on its own")
	require.EqualValues(t, run.compactions, m.metrics.Sum("mnemos.proxy.requests", "outcome", "client_compaction"), "each summarization call is the client's, not a round")
	require.EqualValues(t, run.compactions, m.metrics.Sum("mnemos.proxy.requests", "outcome", "client_compacted"), "the history after each is the main agent's")
	require.Zero(t, m.metrics.Sum("mnemos.proxy.requests", "outcome", "new_agent"))
	require.Zero(t, m.metrics.Sum("mnemos.proxy.requests", "outcome", "branched"))
}
