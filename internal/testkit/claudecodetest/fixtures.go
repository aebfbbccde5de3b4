// Package claudecodetest finds the sample Claude Code transcripts that tests
// of the importer and of token accounting run against, and writes synthetic
// ones.
package claudecodetest

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// EnvDir names the transcripts' directory explicitly, instead of the
// repository's testdata/claude-code.
const EnvDir = "MNEMOS_FIXTURES_DIR"

// relDir is where the transcripts live in the repository, from its root.
const relDir = "testdata/claude-code"

// Names are the transcripts every test covers (testdata/claude-code/README.md
// says what each holds).
var Names = []string{"short.jsonl", "tool_heavy.jsonl", "subagent.jsonl", "long.jsonl"}

// Dir returns the directory of the transcripts: $MNEMOS_FIXTURES_DIR, else
// testdata/claude-code in the module's root (the first directory holding a
// go.mod, walking up from the working directory, a test's package
// directory). It fails the test, saying where it looked, when the
// transcripts are not there: they are never optional.
func Dir(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv(EnvDir); dir != "" {
		if !hasFixtures(dir) {
			t.Fatalf("%s=%s does not hold %s", EnvDir, dir, strings.Join(Names, ", "))
		}
		return dir
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("os.Getwd: %v", err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			candidate := filepath.Join(dir, relDir)
			if !hasFixtures(candidate) {
				t.Fatalf("Claude Code transcripts not found: %s does not hold %s (%s is unset)",
					candidate, strings.Join(Names, ", "), EnvDir)
			}
			return candidate
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("Claude Code transcripts not found: no go.mod above %s, and %s is unset", wd, EnvDir)
		}
		dir = parent
	}
}

// Path returns the path of one transcript.
func Path(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(Dir(t), name)
}

// SubagentPaths returns the transcripts of the sub-agents of the session in
// name, sorted: the CLI writes them apart from the session's, as
// <session>/subagents/agent-<id>.jsonl, and they are kept in that layout.
func SubagentPaths(t testing.TB, name string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(Dir(t), strings.TrimSuffix(name, ".jsonl"), "subagents", "agent-*.jsonl"))
	if err != nil {
		t.Fatalf("claudecodetest: %v", err)
	}
	sort.Strings(paths)
	return paths
}

func hasFixtures(dir string) bool {
	for _, n := range Names {
		if st, err := os.Stat(filepath.Join(dir, n)); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}
