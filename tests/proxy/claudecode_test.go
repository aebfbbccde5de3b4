package proxy_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/claudecli"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// reading is a session of the CLI in which the scripted model reads
// reports, one per call, then answers.
type reading struct {
	reports int // how many reports the work directory holds
	lines   int // the lines of each
}

var (
	// longReading reads reports of about 10,000 tokens each (under the
	// 50,000 characters from which Mnemos offloads a tool result, so only
	// compaction keeps the session under its window): past the sonnet
	// window's auto-compact threshold of about 167,000 tokens before the
	// last.
	longReading = reading{reports: 17, lines: 600}
	// shortReading reads three reports of about 1,600 tokens: the session
	// stays far below every threshold, so Mnemos has nothing to take out.
	shortReading = reading{reports: 3, lines: 100}
)

const (
	claudeMDText  = "Reports live in reports/. Never delete one."
	readingPrompt = "Read every report under reports/ and tell me which region needs attention first."
	finalAnswer   = "Every report is read; region 7 needs attention first."
	// project is the memory scope the tests name (X-Mnemos-Project).
	project = "quarterly-reports"
)

// projectHeader makes the CLI name project as its memory scope on every
// request (X-Mnemos-Project).
const projectHeader = "ANTHROPIC_CUSTOM_HEADERS=X-Mnemos-Project: " + project

// report is the text of report n: a marker line, then lines of figures.
func (rd reading) report(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "report R%d-MARKER\n", n)
	for i := range rd.lines {
		fmt.Fprintf(&b, "line %04d region %02d sales %6d returns %4d notes q%d-%d\n", i, (i+n)%12, (i*97+n*13)%100000, (i*7)%1000, n, i)
	}
	return b.String()
}

var marker = regexp.MustCompile(`R(\d+)-MARKER`)

// script scripts the model: read report 1, then after each report's
// result the next, then answer. It decides from the last message only, so
// it answers the same whether the history before it was compacted or not.
func (rd reading) script(work string) upstream.Script {
	return func(r *upstream.Request) (upstream.Reply, error) {
		last := r.Last()
		next := 1
		if last.IsToolResult() {
			m := marker.FindAllSubmatch(last.Content, -1)
			if len(m) == 0 {
				return upstream.Reply{}, fmt.Errorf("a tool result without a report: %.200q", last.Content)
			}
			n, _ := strconv.Atoi(string(m[len(m)-1][1]))
			next = n + 1
		}
		if next > rd.reports {
			return upstream.Final(finalAnswer), nil
		}
		return upstream.Say(upstream.ToolUse("Read", map[string]any{"file_path": filepath.Join(work, fmt.Sprintf("reports/r%02d.txt", next))})), nil
	}
}

// newSession is a CLI session against baseURL whose work directory holds
// the reports and a CLAUDE.md.
func (rd reading) newSession(t *testing.T, baseURL string) *claudecli.Session {
	t.Helper()
	s := claudecli.NewSession(t, baseURL)
	for n := 1; n <= rd.reports; n++ {
		require.NoError(t, s.WriteFile(fmt.Sprintf("reports/r%02d.txt", n), rd.report(n)))
	}
	require.NoError(t, s.WriteClaudeMD("# Project\n\n"+claudeMDText+"\n"))
	return s
}

// modelLatency is how long the scripted model takes to answer a call.
const modelLatency = 300 * time.Millisecond

// comparison is one reading run twice, each against its own upstream that
// models the prompt cache: straight, and through Mnemos.
type comparison struct {
	straight *upstream.Upstream
	up       *upstream.Upstream // behind Mnemos
	m        *mnemos
	through  *claudecli.Session
	session  string // the Claude Code session through Mnemos
}

// compare runs the reading's turn straight, then through Mnemos as
// docs/messages-api.md sets it up (base URL and key, nothing else): the
// same client, Mnemos's only difference.
func (rd reading) compare(t *testing.T) comparison {
	t.Helper()
	var c comparison
	// The model takes its time, as a real one does: the accountant applies
	// a round before the next one comes, both ways.
	c.straight = upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens, Latency: modelLatency})
	straight := rd.newSession(t, c.straight.URL)
	c.straight.SetScript(rd.script(straight.Work))
	runCLI(t, straight, claudecli.Run{Prompt: readingPrompt}, finalAnswer)

	c.up = upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens, Latency: modelLatency})
	c.m = startMnemos(t, c.up.URL, claudecli.APIKey)
	c.through = rd.newSession(t, c.m.api.URL)
	c.up.SetScript(rd.script(c.through.Work))
	runCLI(t, c.through, claudecli.Run{Prompt: readingPrompt}, finalAnswer)

	calls := c.up.Messages()
	require.NotEmpty(t, calls)
	c.session = calls[0].Header.Get("X-Claude-Code-Session-Id")
	require.NotEmpty(t, c.session)
	sess := waitApplied(t, c.m.store, c.session, int64(len(calls)))
	require.EqualValues(t, len(calls), sess.AppliedSeq, "one recorded turn per upstream call")
	return c
}

// runCLI runs one -p turn of the real CLI and requires it to end well with
// answer.
func runCLI(t *testing.T, s *claudecli.Session, r claudecli.Run, answer string) claudecli.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r.Timeout = 2 * time.Minute
	res, err := s.Run(ctx, r)
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.Contains(t, res.Stdout, answer)
	return res
}

// cost is what a run's calls sent up and what that input is priced at.
type cost struct {
	calls   int
	largest int64 // the largest request's input, in tokens
	sum     upstream.Usage
}

// costOf is the cost of calls.
func costOf(calls []upstream.Call) cost {
	c := cost{calls: len(calls), sum: upstream.Sum(calls)}
	for _, call := range calls {
		c.largest = max(c.largest, call.Usage.InputSide())
	}
	return c
}

func (c cost) share() float64  { return upstream.ReadShare(c.sum) }
func (c cost) priced() float64 { return upstream.PricedInput(c.sum) }

func (c cost) String() string {
	return fmt.Sprintf("%d calls, largest %d tokens, input %d, cache read share %.3f, priced input %.0f",
		c.calls, c.largest, c.sum.InputSide(), c.share(), c.priced())
}

// logCalls logs each call's input and how the cache served it.
func logCalls(t *testing.T, calls []upstream.Call) {
	t.Helper()
	for i, c := range calls {
		t.Logf("call %d: %d messages, input %d (read %d, written %d, plain %d)", i+1, len(c.Request.Messages),
			c.Usage.InputSide(), c.Usage.CacheReadInputTokens, c.Usage.CacheCreationInputTokens, c.Usage.InputTokens)
	}
}

// autoCompactThreshold is the session's auto-compact threshold as Mnemos
// reports it.
func (c comparison) autoCompactThreshold(t *testing.T) int64 {
	t.Helper()
	return thresholds(t, c.m.api.URL, claudecli.APIKey, c.session).AutoCompact
}

// funnel counts the session's completed compactions and the tool results
// micro-compaction cleared.
func (c comparison) funnel(t *testing.T) (compactions, cleared int) {
	t.Helper()
	admin := pgtest.Admin(t, c.m.store)
	require.NoError(t, admin.QueryRow(context.Background(),
		"SELECT count(*) FROM compactions WHERE session_id = $1 AND status = 'completed'", c.session).Scan(&compactions))
	require.NoError(t, admin.QueryRow(context.Background(),
		"SELECT count(*) FROM content_replacements WHERE session_id = $1 AND kind = 'microcompact'", c.session).Scan(&cleared))
	return compactions, cleared
}

// TestClaudeCodeThroughMnemos runs the real Claude Code CLI on a session
// that grows past 200,000 tokens in one turn, once straight against the
// upstream and once through Mnemos, and compares them: through Mnemos no
// request reaches the auto-compact threshold, Mnemos compacted server-side,
// every upstream call is one recorded turn, CLAUDE.md stays at the front of
// the context, and it costs less. A second process with --continue carries
// on the same Mnemos session and asks for something to be remembered: the
// session has notes, and the project's memory holds what was asked.
func TestClaudeCodeThroughMnemos(t *testing.T) {
	claudecli.Bin(t) // skips, naming the variable, when the CLI is not installed
	t.Parallel()

	c := longReading.compare(t)
	calls := c.up.Messages()
	threshold := c.autoCompactThreshold(t)
	straight, through := costOf(c.straight.Messages()), costOf(calls)
	require.Greater(t, straight.largest, threshold, "straight, the session grows past the threshold")
	require.Less(t, through.largest, threshold, "through Mnemos, no request reaches the auto-compact threshold")

	// The funnel's steps that ran: micro-compaction (old tool results
	// cleared) and compactions.
	compactions, cleared := c.funnel(t)
	logCalls(t, calls)
	t.Logf("through Mnemos: %d compactions, %d tool results micro-compacted", compactions, cleared)
	require.Positive(t, compactions+cleared, "Mnemos compacted the session server-side")

	lastReq := calls[len(calls)-1].Request
	require.Contains(t, lastReq.Messages[0].Text(), claudeMDText, "CLAUDE.md is still at the front of the last request")

	t.Logf("straight: %v", straight)
	t.Logf("through Mnemos: %v (threshold %d); priced input %.3f of straight", through, threshold, through.priced()/straight.priced())
	require.LessOrEqual(t, through.priced()/straight.priced(), 0.9, "the long session costs at most 0.9 of straight through Mnemos")

	// A second process continues the conversation: the same Mnemos
	// session. Now naming the project as its memory scope (left out of the
	// comparison: a scope brings its memory section, whose tokens are a
	// feature's, not Mnemos's overhead), the user asks for a fact to be
	// kept, which the extractor saves to the project's memory.
	const remember = "Remember that region 7's figures go to the finance team before anyone else sees them."
	const noted = "Noted: region 7's figures go to finance first."
	c.up.SetScript(func(*upstream.Request) (upstream.Reply, error) { return upstream.Final(noted), nil })
	before := len(calls)
	runCLI(t, c.through, claudecli.Run{Prompt: remember, Continue: true, Env: []string{projectHeader}}, noted)
	calls = c.up.Messages()
	require.Greater(t, len(calls), before)
	for _, call := range calls[before:] {
		require.Equal(t, c.session, call.Header.Get("X-Claude-Code-Session-Id"), "--continue keeps the session")
	}
	sess := waitApplied(t, c.m.store, c.session, int64(len(calls)))
	require.EqualValues(t, len(calls), sess.AppliedSeq, "the continued turn's calls are recorded in the same session")

	// The session-memory service wrote notes that list every report read.
	lastReport := filepath.Join(c.through.Work, fmt.Sprintf("reports/r%02d.txt", longReading.reports))
	awaitJSON(t, c.m.api.URL+"/v1/sessions/"+c.session+"/notes", claudecli.APIKey,
		func(n struct{ Content string }) bool { return strings.Contains(n.Content, lastReport) })
	type memories struct {
		Memories []struct{ Name string }
	}
	scope := c.m.api.URL + "/v1/scopes/project:" + project + "/memories"
	list := awaitJSON(t, scope, claudecli.APIKey, func(l memories) bool { return len(l.Memories) > 0 })
	require.Len(t, list.Memories, 1, "one memory: the fact the user asked to keep")
	var saved struct{ Markdown string }
	getJSON(t, scope+"/"+list.Memories[0].Name, claudecli.APIKey, &saved)
	require.Contains(t, saved.Markdown, "finance team before anyone else sees them", "the memory holds the fact as the user put it")
}

// TestClaudeCodeShortSessionThroughMnemos runs the real CLI on a session
// far below the auto-compact threshold, straight and through Mnemos: with
// nothing to take out, Mnemos must not cost anything — the cache reads as
// much, and the input is priced no higher.
func TestClaudeCodeShortSessionThroughMnemos(t *testing.T) {
	claudecli.Bin(t) // skips, naming the variable, when the CLI is not installed
	t.Parallel()

	c := shortReading.compare(t)
	calls := c.up.Messages()
	threshold := c.autoCompactThreshold(t)
	straight, through := costOf(c.straight.Messages()), costOf(calls)
	require.Less(t, straight.largest, threshold, "the session never reaches the threshold")
	require.Equal(t, straight.calls, through.calls, "through Mnemos the model makes the same calls")

	compactions, cleared := c.funnel(t)
	logCalls(t, calls)
	t.Logf("through Mnemos: %d compactions, %d tool results micro-compacted", compactions, cleared)
	t.Logf("straight: %v", straight)
	t.Logf("through Mnemos: %v (threshold %d); priced input %.3f of straight", through, threshold, through.priced()/straight.priced())
	require.GreaterOrEqual(t, through.share(), 0.9*straight.share(),
		"through Mnemos the cache reads at least 0.9 of the straight run's share")
	require.LessOrEqual(t, through.priced()/straight.priced(), 1.0, "the short session costs no more through Mnemos")
}
