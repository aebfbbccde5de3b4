package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
)

// agentSystem is an agent's system prompt of about 15,000 tokens, the
// size of a coding agent's instructions and tool guide.
func agentSystem() string {
	var b strings.Builder
	b.WriteString("You are Quill, a coding agent working in the user's repository.\n")
	for i := 0; b.Len() < 60_000; i++ {
		fmt.Fprintf(&b, "Rule %d: before changing file module_%d.go, read it whole, run its tests, and say which of them you ran.\n", i, i%97)
	}
	return b.String()
}

// forkScript answers the agent, and the background calls Mnemos makes on
// its behalf: a notes update edits the first section of the notes it is
// shown, a forked extraction writes one memory with the tool it is told
// of, then stops when it sees the result; a summary is one paragraph.
func forkScript(r *upstream.Request) (upstream.Reply, error) {
	last := r.Last().Text()
	switch {
	case strings.Contains(last, "<current-notes>"):
		notes := last[strings.Index(last, "<current-notes>")+len("<current-notes>"):]
		lines := strings.Split(strings.TrimSpace(notes), "\n")
		return upstream.Final(lines[0] + "\n" + lines[1] + "\nMoving the billing tables to the new schema, one migration a day.\n"), nil
	case strings.Contains(last, "<tool-result"):
		return upstream.Final(`{"tool_calls": []}`), nil
	case strings.Contains(last, "<memory-manifest") && strings.Contains(last, `"tool_calls"`):
		return upstream.Final(`{"tool_calls": [{"name": "memory_write", "input": {"name": "billing-migration", ` +
			`"description": "How the billing tables move to the new schema", "type": "project", ` +
			`"body": "One migration a day, each test written first."}}]}`), nil
	case strings.Contains(last, "summarize the conversation above"):
		return upstream.Final("<summary>The user and the agent plan the billing migration: three steps, tests first.</summary>"), nil
	case strings.Contains(string(r.System), "You are Quill"):
		return upstream.Final(fmt.Sprintf("Step %d is clear: I will write its test first.", len(r.Messages)/2+1)), nil
	default:
		return upstream.Final("Nothing here is worth keeping."), nil
	}
}

// TestBackgroundCallsForkTheAgentsRequest runs an agent's session through
// the proxy with the background services calling a model: the notes
// writer, the extractor (its tools described in the ask, called in JSON)
// and the compaction summary fork the agent's last request, so the prompt
// cache the agent's calls wrote serves at least 80% of their input.
func TestBackgroundCallsForkTheAgentsRequest(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{Script: forkScript, MinCacheTokens: upstream.SonnetMinCacheTokens})
	st := pgtest.New(t)
	raw, err := anthropic.New(anthropic.Config{APIKey: upstreamKey, BaseURL: up.URL, Model: model})
	require.NoError(t, err)
	ledger := llm.NewMemoryLedger(0)
	provider := llm.Guard(llm.WithForks(raw, llmledger.AgentRequests(st)), llm.GuardOptions{Recorder: ledger})
	m := startMnemosWith(t, st, bustest.New(t), up.URL, key, provider)
	ctx := context.Background()
	// Notes first at 10,000 tokens (the system prompt passes it), then
	// after every 200 more.
	require.NoError(t, st.SetTenantSettings(ctx, tenant, []byte(`{"session_memory":{"init_tokens":10000,"update_tokens":200,"update_tool_calls":0}}`)))

	client := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(m.api.URL), option.WithAPIKey(key),
		option.WithMaxRetries(0), option.WithHeader("X-Mnemos-Session", "forked"), option.WithHeader("X-Mnemos-Project", "billing"))
	system := []sdk.TextBlockParam{{Text: agentSystem(), CacheControl: sdk.NewCacheControlEphemeralParam()}}
	var msgs []sdk.MessageParam
	const rounds = 3
	for i := 1; i <= rounds; i++ {
		ask := fmt.Sprintf("Step %d of the billing migration: %s", i, strings.Repeat("move the invoices table and keep its history; ", 40))
		// The breakpoint on the last message only, as agents place it.
		for j := range msgs {
			for k := range msgs[j].Content {
				if b := msgs[j].Content[k].OfText; b != nil {
					b.CacheControl = sdk.CacheControlEphemeralParam{}
				}
			}
		}
		msgs = append(msgs, sdk.NewUserMessage(sdk.ContentBlockParamUnion{OfText: &sdk.TextBlockParam{Text: ask, CacheControl: sdk.NewCacheControlEphemeralParam()}}))
		answer, err := client.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 1024, System: system, Messages: msgs})
		require.NoError(t, err)
		msgs = append(msgs, answer.ToParam())
		waitApplied(t, st, "forked", int64(i))
		// Each round's notes update before the next round.
		if !assert.Eventually(t, func() bool { return forkedCalls(ledger.Calls(), llm.TaskNotes) >= i }, 30*time.Second, 20*time.Millisecond,
			"round %d: no forked notes update", i) {
			for _, c := range ledger.Calls() {
				t.Logf("%s forked=%v err=%v", c.Task, c.Forked, c.Err)
			}
			t.FailNow()
		}
	}

	// A compaction with instructions goes to the model's summary.
	req, err := http.NewRequest(http.MethodPost, m.api.URL+"/v1/sessions/forked/compact",
		strings.NewReader(`{"wait": true, "timeout_seconds": 30, "instructions": "Keep the order of the steps."}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 1, forkedCalls(ledger.Calls(), llm.TaskCompaction), "the summary forked the agent's request")

	// Extraction runs coalesce when turns come faster than they finish:
	// at least one, in two turns (the write, then the end).
	if !assert.Eventually(t, func() bool { return forkedCalls(ledger.Calls(), llm.TaskExtraction) >= 2 }, 30*time.Second, 20*time.Millisecond,
		"the extraction forked") {
		for _, c := range ledger.Calls() {
			t.Logf("%s forked=%v err=%v", c.Task, c.Forked, c.Err)
		}
		t.FailNow()
	}
	var saved string
	require.NoError(t, pgtest.Admin(t, st).QueryRow(ctx, "SELECT body FROM memories WHERE name = 'billing-migration'").Scan(&saved))
	require.Equal(t, "One migration a day, each test written first.", saved, "the forked extraction's tool call ran")

	status, notes, err := get(m.api.URL+"/v1/sessions/forked/notes?format=markdown", key)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, string(notes), "one migration a day", "the forked update's answer is in the notes")

	// A session whose requests mark no breakpoint has nothing in the
	// cache to fork: its requests are not kept.
	_, err = client.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 1024, Messages: []sdk.MessageParam{userText("Hello.")}},
		option.WithHeader("X-Mnemos-Session", "uncached"))
	require.NoError(t, err)
	waitApplied(t, st, "uncached", 1)
	var kept []string
	rows, err := pgtest.Admin(t, st).Query(ctx, "SELECT session_id FROM agent_requests ORDER BY session_id")
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		kept = append(kept, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"forked"}, kept, "the agent requests kept")

	for _, c := range ledger.Calls() {
		if !c.Forked {
			continue
		}
		in := c.Usage.InputTokens + c.Usage.CacheReadTokens + c.Usage.CacheWriteTokens
		share := float64(c.Usage.CacheReadTokens) / float64(in)
		t.Logf("%s: %d input tokens, %d read from the cache (%.1f%%), %d written", c.Task, in, c.Usage.CacheReadTokens, 100*share, c.Usage.CacheWriteTokens)
		require.GreaterOrEqual(t, share, 0.8, "%s: cache reads of a forked call", c.Task)
	}
}

// forkedCalls counts the successful forked calls of task.
func forkedCalls(calls []llm.Call, task llm.Task) int {
	n := 0
	for _, c := range calls {
		if c.Task == task && c.Forked && c.Err == nil {
			n++
		}
	}
	return n
}
