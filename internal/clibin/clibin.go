// Package clibin finds the pinned command-line clients the tests run (the
// Claude Code and Codex CLIs) through the environment variables that name
// them.
package clibin

import (
	"os"
	"testing"
)

// Path is the executable env names. It skips t, saying how to get one
// (install), when the variable is unset (make test-fast unsets it), and
// fails t when it names no executable file.
func Path(t testing.TB, env, install string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin == "" {
		t.Skipf("%s is not set: point it at %s (.ci/run does)", env, install)
	}
	info, err := os.Stat(bin) //nolint:gosec // the path the test environment names
	if err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		t.Fatalf("%s=%s is not an executable file", env, bin)
	}
	return bin
}
