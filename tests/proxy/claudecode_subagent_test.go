package proxy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/internal/claudecli"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// subagentTask is in the prompt the main agent gives its subagent: the
// scripted model tells the subagent's calls by it.
const subagentTask = "Audit every module note under notes/ and report each one's owner"

const (
	subagentNotes  = 8
	subagentReport = "All 8 module notes are read; every module has an owner."
	subagentAnswer = "The audit is done: the subagent read all 8 notes."
)

// note is the text of module note n: a marker line and a few lines.
func note(n int) string {
	return fmt.Sprintf("note N%d-MARKER\nmodule %d owner: team-%d\nstatus: stable\n", n, n, n%3)
}

// subagentScript scripts both agents: the main agent hands the audit to a
// general-purpose subagent (the Agent tool) and answers from its report;
// the subagent, whose conversation starts with its task, reads the notes
// one call at a time, each after the one before it, then reports. It
// decides from the request alone: a subagent's call that held another
// conversation (the main agent's first messages in place of its task)
// would be answered as the main agent's, and the run would not end well.
func subagentScript(work string) upstream.Script {
	return func(r *upstream.Request) (upstream.Reply, error) {
		if len(r.Messages) == 0 {
			return upstream.Final("nothing asked"), nil
		}
		if strings.Contains(r.Messages[0].Text(), subagentTask) {
			read := 0
			for _, m := range r.Messages {
				if m.IsToolResult() && strings.Contains(string(m.Content), fmt.Sprintf("N%d-MARKER", read+1)) {
					read++
				}
			}
			if read >= subagentNotes {
				return upstream.Final(subagentReport), nil
			}
			return upstream.Say(upstream.ToolUse("Read", map[string]any{"file_path": filepath.Join(work, fmt.Sprintf("notes/n%d.md", read+1))})), nil
		}
		if last := r.Last(); last.IsToolResult() {
			if strings.Contains(string(last.Content), subagentReport) {
				return upstream.Final(subagentAnswer), nil
			}
			return upstream.Reply{}, fmt.Errorf("the main agent got a tool result that is not the report: %.200q", last.Content)
		}
		return upstream.Say(upstream.Text("I'll have an agent do the audit."), upstream.ToolUse("Agent", map[string]any{
			"description":       "Audit module notes",
			"prompt":            subagentTask + ", one note at a time.",
			"subagent_type":     "general-purpose",
			"run_in_background": false,
		})), nil
	}
}

// TestClaudeCodeSubagentKeepsItsOwnConversation runs the real CLI through
// Mnemos: its main agent starts a subagent (the Agent tool) that reads 8
// files, each call under the main session's id. Every call of the
// subagent reaches the upstream with the subagent's own task first and
// every read before it; the subagent completes its reads; the main agent's
// thread holds none of the subagent's messages; the session lists both
// agents with their counts.
func TestClaudeCodeSubagentKeepsItsOwnConversation(t *testing.T) {
	t.Parallel()
	claudecli.Bin(t) // skips, naming the variable, when the CLI is not installed
	up := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens})
	m := startMnemos(t, up.URL, claudecli.APIKey)
	s := claudecli.NewSession(t, m.api.URL)
	for n := 1; n <= subagentNotes; n++ {
		require.NoError(t, s.WriteFile(fmt.Sprintf("notes/n%d.md", n), note(n)))
	}
	up.SetScript(subagentScript(s.Work))
	runCLI(t, s, claudecli.Run{Prompt: "Audit the module notes. Use an agent.", Tools: []string{"Read", "Bash", "Agent"}}, subagentAnswer)

	calls := up.Messages()
	var sub, main []upstream.Call
	for _, c := range calls {
		require.NotNil(t, c.Request)
		switch first := c.Request.Messages[0].Text(); {
		case strings.Contains(first, subagentTask):
			sub = append(sub, c)
		case strings.Contains(first, "Audit the module notes"):
			main = append(main, c)
		}
	}
	require.Len(t, sub, subagentNotes+1, "the subagent's calls: one read each, then its report")
	require.Len(t, main, 2, "the main agent's calls: the Agent call, then the answer")
	for i, c := range sub {
		reads := 0
		for _, msg := range c.Request.Messages {
			require.NotContains(t, msg.Text(), "Audit the module notes. Use an agent.", "subagent call %d holds the main agent's prompt", i+1)
			if msg.IsToolResult() {
				reads++
				require.Contains(t, string(msg.Content), "N"+strconv.Itoa(reads)+"-MARKER", "subagent call %d: its reads in order", i+1)
			}
		}
		require.Equal(t, i, reads, "subagent call %d holds every read before it", i+1)
	}
	session := calls[0].Header.Get("X-Claude-Code-Session-Id")
	require.NotEmpty(t, session)
	for _, c := range calls {
		require.Equal(t, session, c.Header.Get("X-Claude-Code-Session-Id"), "every call names the main session")
	}

	// The session's threads: the main agent's and the subagent's, each with
	// its own messages.
	state := awaitJSON(t, m.api.URL+"/v1/sessions/"+session, claudecli.APIKey, func(s api.Session) bool {
		return len(s.Agents) >= 2
	})
	var mainThread, subThread *api.AgentThread
	for i, a := range state.Agents {
		switch a.Kind {
		case "main":
			mainThread = &state.Agents[i]
		case "agent":
			subThread = &state.Agents[i]
		}
	}
	require.NotNil(t, mainThread, "agents: %+v", state.Agents)
	require.NotNil(t, subThread, "agents: %+v", state.Agents)
	require.Equal(t, session, mainThread.Thread, "the main agent's thread is the session itself")
	require.EqualValues(t, 4, mainThread.Messages, "prompt, Agent call, its result, answer")
	require.EqualValues(t, 2*(subagentNotes+1), subThread.Messages, "task, 8 reads and their results, report")
	require.True(t, strings.HasPrefix(subThread.AgentID, "agent-"), subThread.AgentID)

	waitApplied(t, m.store, session, 2)
	waitApplied(t, m.store, subThread.Thread, int64(len(sub)))
	var leaked int
	require.NoError(t, pgtest.Admin(t, m.store).QueryRow(context.Background(),
		"SELECT count(*) FROM messages WHERE session_id = $1 AND (content::text LIKE '%-MARKER%' OR content::text LIKE '%notes/n_.md%')",
		session).Scan(&leaked))
	require.Zero(t, leaked, "the main agent's thread holds none of the subagent's reads")
	require.Zero(t, m.metrics.Sum("mnemos.proxy.requests", "outcome", "branched"), "no call looked like a rewind")
	require.EqualValues(t, 1, m.metrics.Sum("mnemos.proxy.requests", "outcome", "new_agent"), "the subagent's first call")
}

// TestClaudeCodeContinueFollowsItsThread runs the real CLI twice through
// Mnemos, the second time with --continue: the history it reads back from
// disk continues the main agent's thread (no branch, no new agent), whose
// stored conversation then holds both turns.
func TestClaudeCodeContinueFollowsItsThread(t *testing.T) {
	t.Parallel()
	claudecli.Bin(t) // skips, naming the variable, when the CLI is not installed
	up := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens})
	up.SetScript(func(r *upstream.Request) (upstream.Reply, error) {
		return upstream.Final(fmt.Sprintf("Answer %d.", len(r.Messages))), nil
	})
	m := startMnemos(t, up.URL, claudecli.APIKey)
	s := claudecli.NewSession(t, m.api.URL)
	runCLI(t, s, claudecli.Run{Prompt: "Name a prime number."}, "Answer 1.")
	runCLI(t, s, claudecli.Run{Prompt: "And another one?", Continue: true}, "Answer 3.")

	calls := up.Messages()
	last := calls[len(calls)-1]
	session := last.Header.Get("X-Claude-Code-Session-Id")
	require.Len(t, last.Request.Messages, 3, "the continued turn carries the first")
	require.Equal(t, calls[0].Header.Get("X-Claude-Code-Session-Id"), session, "--continue keeps the session id")
	state := awaitJSON(t, m.api.URL+"/v1/sessions/"+session, claudecli.APIKey, func(s api.Session) bool {
		return len(s.Agents) == 1 && s.Agents[0].Messages == 4
	})
	require.Equal(t, "main", state.Agents[0].Kind)
	require.Zero(t, m.metrics.Sum("mnemos.proxy.requests", "outcome", "branched"))
	require.Zero(t, m.metrics.Sum("mnemos.proxy.requests", "outcome", "new_agent"))
}

// TestClaudeCodeCompactStartsANewEpoch runs the real CLI through Mnemos:
// a turn, then /compact (the CLI asks the upstream for a summary of the
// conversation), then a turn that goes on from the CLI's own summary. That
// last request reaches the upstream as the CLI sent it, summary first, and
// is a new epoch of the main agent (client_compacted), not a branch of the
// history it replaced.
func TestClaudeCodeCompactStartsANewEpoch(t *testing.T) {
	t.Parallel()
	claudecli.Bin(t) // skips, naming the variable, when the CLI is not installed
	const summary = "<summary>\n1. The user asked for prime numbers; 2 and 3 were given.\n</summary>"
	up := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens})
	up.SetScript(func(r *upstream.Request) (upstream.Reply, error) {
		if strings.Contains(r.Last().Text(), "summary") && !strings.Contains(r.Messages[0].Text(), clientSummaryStart) {
			return upstream.Final(summary), nil
		}
		return upstream.Final(fmt.Sprintf("Answer %d.", len(r.Messages))), nil
	})
	m := startMnemos(t, up.URL, claudecli.APIKey)
	s := claudecli.NewSession(t, m.api.URL)
	runCLI(t, s, claudecli.Run{Prompt: "Name a prime number."}, "Answer 1.")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := s.Run(ctx, claudecli.Run{Prompt: "/compact", Continue: true, Timeout: 2 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	runCLI(t, s, claudecli.Run{Prompt: "And another one?", Continue: true}, "Answer ")

	calls := up.Messages()
	last := calls[len(calls)-1]
	require.Contains(t, last.Request.Messages[0].Text(), clientSummaryStart, "the last turn goes on from the CLI's summary")
	require.NotContains(t, last.Request.Messages[0].Text(), "Answer 1.", "none of the replaced history went up")
	session := last.Header.Get("X-Claude-Code-Session-Id")
	state := awaitJSON(t, m.api.URL+"/v1/sessions/"+session, claudecli.APIKey, func(s api.Session) bool {
		for _, a := range s.Agents {
			if a.Kind == "client_compacted" && a.Live {
				return true
			}
		}
		return false
	})
	t.Logf("agents: %+v", state.Agents)
	require.EqualValues(t, 1, m.metrics.Sum("mnemos.proxy.requests", "outcome", "client_compacted"))
	require.Zero(t, m.metrics.Sum("mnemos.proxy.requests", "outcome", "branched"))
}

// clientSummaryStart starts the first message of a conversation Claude
// Code compacted itself.
const clientSummaryStart = "This session is being continued from a previous conversation"
