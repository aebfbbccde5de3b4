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
	"github.com/mnemos-ai/mnemos/pkg/llm/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/pkg/pgtest"
)

// The long session: the model reads reports, one per call, each about
// 11,000 tokens (under the 50,000 characters from which Mnemos offloads a
// tool result, so only compaction keeps the session under its window):
// past the sonnet window's auto-compact threshold of about 167,000 tokens
// before the last.
const (
	reports      = 17
	reportLines  = 600
	claudeMDText = "Reports live in reports/. Never delete one."
	finalAnswer  = "Every report is read; region 7 needs attention first."
)

// report is the text of report n: a marker line, then lines of figures.
func report(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "report R%d-MARKER\n", n)
	for i := range reportLines {
		fmt.Fprintf(&b, "line %04d region %02d sales %6d returns %4d notes q%d-%d\n", i, (i+n)%12, (i*97+n*13)%100000, (i*7)%1000, n, i)
	}
	return b.String()
}

var marker = regexp.MustCompile(`R(\d+)-MARKER`)

// readReports scripts the model: read report 1, then after each report's
// result the next, then answer. It decides from the last message only, so
// it answers the same whether the history before it was compacted or not.
func readReports(work string) upstream.Script {
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
		if next > reports {
			return upstream.Final(finalAnswer), nil
		}
		return upstream.Say(upstream.ToolUse("Read", map[string]any{"file_path": filepath.Join(work, fmt.Sprintf("reports/r%02d.txt", next))})), nil
	}
}

// runCLI runs one -p turn of the real CLI against baseURL in a session
// whose work directory holds the reports and a CLAUDE.md.
func runCLI(t *testing.T, s *claudecli.Session, cont bool) claudecli.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := s.Run(ctx, claudecli.Run{Prompt: "Read every report under reports/ and tell me which region needs attention first.", Continue: cont, Timeout: 2 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.Contains(t, res.Stdout, finalAnswer)
	return res
}

func newCLISession(t *testing.T, baseURL string) *claudecli.Session {
	t.Helper()
	s := claudecli.NewSession(t, baseURL)
	for n := 1; n <= reports; n++ {
		require.NoError(t, s.WriteFile(fmt.Sprintf("reports/r%02d.txt", n), report(n)))
	}
	require.NoError(t, s.WriteClaudeMD("# Project\n\n"+claudeMDText+"\n"))
	return s
}

// TestClaudeCodeThroughMnemos runs the real Claude Code CLI on a session
// that grows past 200,000 tokens in one turn, once straight against the
// upstream and once through Mnemos, and compares them: through Mnemos no
// request reaches the auto-compact threshold, Mnemos compacted server-side,
// every upstream call is one recorded turn, CLAUDE.md stays at the front of
// the context, and a second process with --continue carries on the same
// Mnemos session.
func TestClaudeCodeThroughMnemos(t *testing.T) {
	claudecli.Bin(t) // skips, naming the variable, when the CLI is not installed
	t.Parallel()

	straightUp := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens})
	straight := newCLISession(t, straightUp.URL)
	straightUp.SetScript(readReports(straight.Work))
	runCLI(t, straight, false)

	up := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens})
	m := startMnemos(t, up.URL, claudecli.APIKey)
	through := newCLISession(t, m.api.URL)
	up.SetScript(readReports(through.Work))
	runCLI(t, through, false)

	calls := up.Messages()
	require.NotEmpty(t, calls)
	session := calls[0].Header.Get("X-Claude-Code-Session-Id")
	require.NotEmpty(t, session)
	sess := waitApplied(t, m.store, session, int64(len(calls)))
	require.EqualValues(t, len(calls), sess.AppliedSeq, "one recorded turn per upstream call")

	var status struct {
		Tokens struct {
			AutoCompact int64 `json:"autocompact_threshold"`
		} `json:"tokens"`
	}
	getJSON(t, m.api.URL+"/v1/sessions/"+session, claudecli.APIKey, &status)
	threshold := status.Tokens.AutoCompact
	require.Positive(t, threshold)
	var largestStraight, largest int64
	for _, c := range straightUp.Messages() {
		largestStraight = max(largestStraight, c.Usage.InputSide())
	}
	for _, c := range calls {
		largest = max(largest, c.Usage.InputSide())
	}
	require.Greater(t, largestStraight, threshold, "straight, the session grows past the threshold")
	require.Less(t, largest, threshold, "through Mnemos, no request reaches the auto-compact threshold")

	// The funnel's steps that ran: micro-compaction (old tool results
	// cleared) and compactions.
	var compactions, cleared int
	admin := pgtest.Admin(t, m.store)
	require.NoError(t, admin.QueryRow(context.Background(),
		"SELECT count(*) FROM compactions WHERE session_id = $1 AND status = 'completed'", session).Scan(&compactions))
	require.NoError(t, admin.QueryRow(context.Background(),
		"SELECT count(*) FROM content_replacements WHERE session_id = $1 AND kind = 'microcompact'", session).Scan(&cleared))
	for i, c := range calls {
		t.Logf("call %d: %d messages, input %d (read %d, written %d, plain %d)", i+1, len(c.Request.Messages),
			c.Usage.InputSide(), c.Usage.CacheReadInputTokens, c.Usage.CacheCreationInputTokens, c.Usage.InputTokens)
	}
	t.Logf("through Mnemos: %d compactions, %d tool results micro-compacted", compactions, cleared)
	require.Positive(t, compactions+cleared, "Mnemos compacted the session server-side")

	lastReq := calls[len(calls)-1].Request
	require.Contains(t, lastReq.Messages[0].Text(), claudeMDText, "CLAUDE.md is still at the front of the last request")

	sumStraight, sumThrough := upstream.Sum(straightUp.Messages()), upstream.Sum(calls)
	t.Logf("straight: %d calls, largest %d tokens, input %d, cache read share %.3f, priced input %.0f",
		len(straightUp.Messages()), largestStraight, sumStraight.InputSide(), upstream.ReadShare(sumStraight), upstream.PricedInput(sumStraight))
	t.Logf("through Mnemos: %d calls, largest %d tokens (threshold %d), input %d, cache read share %.3f, priced input %.0f (%.2f of straight)",
		len(calls), largest, threshold, sumThrough.InputSide(), upstream.ReadShare(sumThrough), upstream.PricedInput(sumThrough),
		upstream.PricedInput(sumThrough)/upstream.PricedInput(sumStraight))

	require.GreaterOrEqual(t, upstream.ReadShare(sumThrough), 0.9*upstream.ReadShare(sumStraight),
		"through Mnemos the cache reads at least 0.9 of the straight run's share")
	require.Less(t, upstream.PricedInput(sumThrough), upstream.PricedInput(sumStraight),
		"the long session costs less through Mnemos")

	// A second process continues the conversation: the same Mnemos session.
	before := len(calls)
	runCLI(t, through, true)
	calls = up.Messages()
	require.Greater(t, len(calls), before)
	for _, c := range calls[before:] {
		require.Equal(t, session, c.Header.Get("X-Claude-Code-Session-Id"), "--continue keeps the session")
	}
	sess = waitApplied(t, m.store, session, int64(len(calls)))
	require.EqualValues(t, len(calls), sess.AppliedSeq, "the continued turn's calls are recorded in the same session")
}
