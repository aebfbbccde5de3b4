package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/internal/claudecli"
	"github.com/mnemos-ai/mnemos/internal/testkit/archivetest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// TestClaudeCodeReadsAnExport: an export extracted into the memory
// directory of a project, as Claude Code keeps it
// (HOME/.claude/projects/<cwd, '/' as '-'>/memory/), is read by the real
// CLI: its first request to the model carries the exported MEMORY.md.
// That directory, imported back, gives the same memories and index.
func TestClaudeCodeReadsAnExport(t *testing.T) {
	t.Parallel()
	s := claudecli.NewSession(t, "") // skips when MNEMOS_CLAUDE_CODE_BIN is unset
	h := setup(t)
	const from, back = "project:repo-x", "project:repo-x-back"
	h.putMemory(t, "key-acme", from, memory.Document{Name: "testing-style", Description: "Integration tests hit a real Postgres, never mocks",
		Type: memory.TypeFeedback, Body: "Run them with make test-fast.\n\nWhy: a mocked test hid a broken migration (marker ZEBRA-7731)."})
	h.putMemory(t, "key-acme", from, memory.Document{Name: "release-train", Description: "Releases leave on Thursdays at 14:00 UTC",
		Type: memory.TypeProject, Body: "Freeze on Wednesday evening."})
	const index = "- [Testing style](testing-style.md) — real Postgres, never mocks (ZEBRA-7731)\n- [Release train](release-train.md) — Thursdays 14:00 UTC\n"
	status, _, body := h.raw(t, "PUT", "/v1/scopes/"+from+"/index", "key-acme", "text/markdown", []byte(index))
	require.Equal(t, http.StatusOK, status, string(body))

	status, _, tgz := h.raw(t, "GET", "/v1/scopes/"+from+"/export", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(tgz))
	names, files := archivetest.Files(t, tgz)
	project := regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(s.Work, "-")
	root := filepath.Join(s.Home, ".claude", "projects", project)
	for _, n := range names {
		if n == "memory/" {
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Join(root, "memory"), 0o750))
		require.NoError(t, os.WriteFile(filepath.Join(root, filepath.FromSlash(n)), []byte(files[n]), 0o600))
	}
	require.Equal(t, index, files["memory/MEMORY.md"])

	up := upstream.Start(t, upstream.Config{})
	s.BaseURL = up.URL
	up.SetScript(func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Final("Tests hit a real Postgres."), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := s.Run(ctx, claudecli.Run{Prompt: "How do we test here?", Timeout: 90 * time.Second})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, "stderr: %s", res.Stderr)
	calls := up.Messages()
	require.NotEmpty(t, calls)
	first := calls[0].Request
	require.NotNil(t, first, "the first call parses")
	var user string
	for _, m := range first.Messages {
		if m.Role == "user" {
			user = m.Text()
			break
		}
	}
	t.Logf("the CLI took %v", res.Elapsed.Round(time.Millisecond))
	var carrying []string
	for _, block := range regexp.MustCompile(`(?s)<system-reminder>.*?</system-reminder>`).FindAllString(user, -1) {
		if strings.Contains(block, "ZEBRA-7731") {
			carrying = append(carrying, block)
		}
	}
	require.Len(t, carrying, 1, "one <system-reminder> of the first user message carries the index: %.2000q", user)
	require.Contains(t, carrying[0], strings.TrimSuffix(index, "\n"), "the exported MEMORY.md, whole")

	// The directory, as Claude Code keeps it, imported back.
	var entries []archivetest.Entry
	dir := filepath.Join(root, "memory")
	list, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range list {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		entries = append(entries, archivetest.Entry{Name: e.Name(), Body: string(raw)})
	}
	status, _, body = h.raw(t, "POST", "/v1/scopes/"+back+"/import", "key-acme", "application/gzip", archivetest.Tgz(t, entries...))
	require.Equal(t, http.StatusOK, status, string(body))
	var imported api.ScopeImport
	require.NoError(t, json.Unmarshal(body, &imported))
	require.Equal(t, []string{"release-train", "testing-style"}, imported.Created)
	require.Equal(t, "archive", imported.IndexFrom)
	require.Equal(t, index, h.indexContent(t, "key-acme", back))
	for _, n := range []string{"release-train", "testing-style"} {
		require.Equal(t, h.memoryMarkdown(t, "key-acme", from, n), h.memoryMarkdown(t, "key-acme", back, n))
	}
}
