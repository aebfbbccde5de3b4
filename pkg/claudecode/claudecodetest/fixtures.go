// Package claudecodetest finds the real Claude Code transcripts that tests of
// the importer and of token accounting run against.
package claudecodetest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// EnvDir names the fixtures directory explicitly.
const EnvDir = "MNEMOS_FIXTURES_DIR"

// relDir is where the fixtures live beside the repository (…/shared next to …/main).
const relDir = "shared/fixtures/claude-code"

// Names are the fixture transcripts every test covers.
var Names = []string{"short.jsonl", "tool_heavy.jsonl", "subagent.jsonl"}

// Dir returns the directory of the Claude Code fixtures: $MNEMOS_FIXTURES_DIR,
// else the first shared/fixtures/claude-code found walking up from the working
// directory (a test's package directory). It fails the test, saying where it
// looked, when there is none: the fixtures are never optional.
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
	var looked []string
	for dir := wd; ; {
		candidate := filepath.Join(dir, relDir)
		looked = append(looked, candidate)
		if hasFixtures(candidate) {
			return candidate
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	t.Fatalf("Claude Code fixtures not found: %s is unset and none of these holds %s:\n  %s",
		EnvDir, strings.Join(Names, ", "), strings.Join(looked, "\n  "))
	return ""
}

// Path returns the path of one fixture.
func Path(t testing.TB, name string) string {
	t.Helper()
	return filepath.Join(Dir(t), name)
}

func hasFixtures(dir string) bool {
	for _, n := range Names {
		if st, err := os.Stat(filepath.Join(dir, n)); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}
