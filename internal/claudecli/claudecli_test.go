package claudecli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/claudecli"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
)

// inventory is a large file the test has the model read: lines of made-up
// stock records, with a marker line that names the file.
func inventory(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# warehouse %d, marker W%d-END-OF-HEADER\n", n, n)
	for i := range 600 {
		fmt.Fprintf(&b, "item %05d bin %c%02d count %4d reorder-at %3d supplier S%03d\n",
			i, 'A'+rune((i+n)%26), (i*7+n)%100, (i*37+n*11)%5000, (i*13)%400, (i*3+n)%250)
	}
	return b.String()
}

// TestReadsGrowOneTurnAgainstTheCache runs the real CLI, one -p turn, in
// which the scripted model reads six large files one call after the other,
// then answers. Each call sends the whole conversation so far; the prompt
// cache should serve what the previous call wrote.
func TestReadsGrowOneTurnAgainstTheCache(t *testing.T) {
	t.Parallel()
	const files = 6
	const answer = "All six warehouses list 600 items each; none is below its reorder level by more than the others."
	up := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens})
	s := claudecli.NewSession(t, up.URL)
	for n := 1; n <= files; n++ {
		require.NoError(t, s.WriteFile(fmt.Sprintf("stock/warehouse-%d.txt", n), inventory(n)))
	}
	require.NoError(t, s.WriteClaudeMD("# Project\n\nStock lists live in stock/, one file per warehouse.\n"))
	up.SetScript(func(r *upstream.Request) (upstream.Reply, error) {
		if !slices.Contains(r.ToolNames(), "Read") {
			return upstream.Reply{}, fmt.Errorf("a call without the Read tool: %.200q", r.Last().Text())
		}
		round := r.Round()
		switch {
		case round == 0:
			return upstream.Say(upstream.Text("I'll go through the warehouses one by one."),
				upstream.ToolUse("Read", map[string]any{"file_path": filepath.Join(s.Work, "stock/warehouse-1.txt")})), nil
		case round < files:
			return upstream.Say(upstream.ToolUse("Read", map[string]any{
				"file_path": filepath.Join(s.Work, fmt.Sprintf("stock/warehouse-%d.txt", round+1))})), nil
		case round == files:
			return upstream.Final(answer), nil
		}
		return upstream.Reply{}, fmt.Errorf("round %d: the script has %d", round, files+1)
	})

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := s.Run(ctx, claudecli.Run{Prompt: "Go through every stock list and tell me which warehouse needs restocking first.", Timeout: 60 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	require.Contains(t, res.Stdout, answer)
	require.FileExists(t, res.Transcript)
	t.Logf("the CLI took %v", res.Elapsed.Round(time.Millisecond))

	calls := up.Messages()
	for i, c := range up.Calls() {
		require.NoError(t, c.Err, "call %d", i+1)
		require.Equal(t, 200, c.Status, "call %d: %s %s", i+1, c.Method, c.Path)
	}
	require.Len(t, calls, files+1, "one call per read, and the answer")
	for i, c := range calls {
		require.NotEmpty(t, c.Header.Get("X-Claude-Code-Session-Id"), "call %d", i+1)
		require.True(t, c.Request.SystemCacheControl(), "call %d: the system prompt is marked for the cache", i+1)
		require.True(t, c.Request.Last().CacheControl(), "call %d: the last message is marked for the cache", i+1)
		require.NotEmpty(t, c.Request.ContextManagement, "call %d: context_management is sent", i+1)
		require.Equal(t, claudecli.Model, c.Request.Model)
		t.Logf("call %d: %d messages, read %d, written %d, plain %d", i+1, len(c.Request.Messages),
			c.Usage.CacheReadInputTokens, c.Usage.CacheCreationInputTokens, c.Usage.InputTokens)
	}
	last := calls[len(calls)-1].Request
	for n := 1; n <= files; n++ {
		require.Contains(t, allContent(last), fmt.Sprintf("W%d-END-OF-HEADER", n),
			"the last call carries warehouse %d's file", n)
	}
	sum := up.Usage()
	t.Logf("%d calls; input %d tokens: read %d, written %d, plain %d; cache read share %.3f; priced input %.0f (%.3f of unpriced)",
		len(calls), sum.InputSide(), sum.CacheReadInputTokens, sum.CacheCreationInputTokens, sum.InputTokens,
		upstream.ReadShare(sum), upstream.PricedInput(sum), upstream.PricedInput(sum)/float64(sum.InputSide()))
	require.Zero(t, calls[0].Usage.CacheReadInputTokens, "the first call finds nothing cached")
	for i, c := range calls[1:] {
		require.GreaterOrEqual(t, c.Usage.CacheReadInputTokens, calls[i].Usage.CacheReadInputTokens+calls[i].Usage.CacheCreationInputTokens,
			"call %d reads all that call %d read and wrote", i+2, i+1)
	}
	require.Greater(t, upstream.ReadShare(sum), 0.5, "most of a growing turn is read from the cache")
	require.Contains(t, allContent(calls[0].Request), "Stock lists live in stock/", "CLAUDE.md is in the context")

	// A second turn carries on the conversation: same session, and its one
	// call reads everything the first turn wrote.
	up.SetScript(func(*upstream.Request) (upstream.Reply, error) { return upstream.Final("Warehouse 3."), nil })
	res2, err := s.Run(ctx, claudecli.Run{Prompt: "So which one first?", Continue: true, Timeout: 60 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 0, res2.ExitCode, "stderr: %s", res2.Stderr)
	require.Contains(t, res2.Stdout, "Warehouse 3.")
	require.Equal(t, res.Transcript, res2.Transcript, "--continue writes on in the same transcript")
	more := up.Messages()[len(calls):]
	require.Len(t, more, 1)
	require.Equal(t, calls[0].Header.Get("X-Claude-Code-Session-Id"), more[0].Header.Get("X-Claude-Code-Session-Id"))
	prev := calls[len(calls)-1].Usage
	require.GreaterOrEqual(t, more[0].Usage.CacheReadInputTokens, prev.CacheReadInputTokens+prev.CacheCreationInputTokens)
}

// allContent is every message's content, as sent.
func allContent(r *upstream.Request) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.Write(m.Content)
	}
	return b.String()
}

func TestTheCLIIsThePinnedVersion(t *testing.T) {
	t.Parallel()
	bin := claudecli.Bin(t)
	require.FileExists(t, bin)
	out, err := (&claudecli.Session{Bin: bin, Home: t.TempDir(), Work: t.TempDir()}).Run(context.Background(),
		claudecli.Run{Prompt: "unused", Args: []string{"--version"}, Timeout: 30 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 0, out.ExitCode)
	require.Contains(t, out.Stdout, claudecli.Version, "the CLI is the pinned version")
}

// TestInstallersPinTheVersion: CI and the maker of the sample transcripts
// install the version the tests are written against.
func TestInstallersPinTheVersion(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"../../.ci/run", "../../testdata/claude-code/make.sh"} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.Regexp(t, `(?m)^(claude_code_)?version=`+regexp.QuoteMeta(claudecli.Version)+`\b`, string(data), f)
	}
}
