package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/benchmark"
)

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
