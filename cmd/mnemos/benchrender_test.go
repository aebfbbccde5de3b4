//go:build bench

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
)

// TestPerformancePageIsRendered: the results of docs/performance.md are
// what `mnemos bench render` makes of the run stored beside it, the run
// names the commit it measured, and -update writes the same page.
func TestPerformancePageIsRendered(t *testing.T) {
	t.Parallel()
	stored := filepath.Join(repoRoot, "docs", "performance.json")
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "performance.md"))
	require.NoError(t, err)
	page := string(raw)
	begin, end, err := generatedSpan(page, performanceBegin)
	require.NoError(t, err, "docs/performance.md")

	var tables bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"bench", "render", stored}, env(nil), &tables, io.Discard))
	require.Equal(t, tables.String(), page[begin:end],
		"docs/performance.md's results are not the render of docs/performance.json: run `mnemos bench render -update docs/performance.md docs/performance.json`")
	require.Regexp(t, regexp.MustCompile(`; commit [0-9a-f]{40}\.\n`), tables.String(), "the run names the commit it measured, with no uncommitted changes")

	stale := filepath.Join(t.TempDir(), "performance.md")
	require.NoError(t, os.WriteFile(stale, []byte(page[:begin]+"| typed by hand |\n"+page[end:]), 0o600))
	require.NoError(t, run(context.Background(), []string{"bench", "render", "-update", stale, stored}, env(nil), io.Discard, io.Discard))
	updated, err := os.ReadFile(stale)
	require.NoError(t, err)
	require.Equal(t, page, string(updated), "-update writes the tables between the markers and leaves the rest")
}

func TestBenchRenderRefusesWhatItCannotRender(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notReport := filepath.Join(dir, "other.json")
	require.NoError(t, os.WriteFile(notReport, []byte(`{"rows": []}`), 0o600))
	unmarked := filepath.Join(dir, "page.md")
	require.NoError(t, os.WriteFile(unmarked, []byte("# A page\n"), 0o600))
	var js bytes.Buffer
	require.NoError(t, benchmark.Report{Machine: benchmark.Machine{CPUs: 2, Commit: "0123abcd"}}.JSON(&js))
	stored := filepath.Join(dir, "run.json")
	require.NoError(t, os.WriteFile(stored, js.Bytes(), 0o600))

	render := func(args ...string) error {
		return run(context.Background(), append([]string{"bench", "render"}, args...), env(nil), io.Discard, io.Discard)
	}
	var tables bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"bench", "render", stored}, env(nil), &tables, io.Discard))
	require.Contains(t, tables.String(), "Machine: 2 CPUs (")
	require.Contains(t, tables.String(), "; commit 0123abcd.\n")
	require.ErrorContains(t, render(), "want the JSON file of a run")
	require.Error(t, render(filepath.Join(dir, "absent.json")))
	require.ErrorContains(t, render(notReport), "other.json")
	require.ErrorContains(t, render("-update", unmarked, stored), "between the lines")
	page, err := os.ReadFile(unmarked)
	require.NoError(t, err)
	require.Equal(t, "# A page\n", string(page), "a page without the markers is left as it was")
}
