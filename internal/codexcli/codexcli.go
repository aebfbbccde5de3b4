// Package codexcli runs the real Codex CLI (codex exec), offline, against
// a local OpenAI Responses API (usually the scripted upstream of
// internal/testkit/llmtest/responses, or Mnemos in front of it), each
// session in its own HOME and work directory.
//
// Tests find the pinned CLI through the environment variable BinEnv and
// skip, naming it, when it is unset:
//
//	s := codexcli.NewSession(t, up.URL)
//	res, err := s.Run(ctx, codexcli.Run{Prompt: "count the files"})
package codexcli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/mnemos-ai/mnemos/internal/clibin"
)

const (
	// BinEnv names the environment variable that holds the path of the
	// pinned CLI: node_modules/@openai/codex-linux-x64/vendor/
	// x86_64-unknown-linux-musl/bin/codex of an npm install of
	// @openai/codex@Version.
	BinEnv = "MNEMOS_CODEX_BIN"
	// Version is the CLI's version the tests are written against.
	Version = "0.169.0"
	// Model is the model a run asks for unless told otherwise.
	Model = "gpt-5"
	// APIKey is the key a run sends unless told otherwise; the scripted
	// upstream accepts any.
	APIKey = "sk-dummy-key-for-a-local-upstream" //nolint:gosec // a dummy, for a local fake API
	// DefaultTimeout bounds a run unless told otherwise.
	DefaultTimeout = 2 * time.Minute
)

// Bin is the CLI's path from BinEnv. It skips t when the variable is unset
// (make test-fast unsets it), and fails it when the variable names no
// executable file.
func Bin(t testing.TB) string {
	t.Helper()
	return clibin.Path(t, BinEnv, "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex of npm install @openai/codex@"+Version)
}

// Session is a HOME (with CODEX_HOME inside it) and a work directory the
// CLI runs in.
type Session struct {
	// Bin is the CLI's path.
	Bin string
	// BaseURL is the Responses API's base URL, ending in /v1.
	BaseURL string
	// APIKey is sent as OPENAI_API_KEY ("" sends the package's APIKey).
	APIKey string
	// Home is the CLI's HOME; Work the directory it runs in.
	Home, Work string
}

// NewSession is a session of the pinned CLI (Bin) against baseURL in
// directories the test removes.
func NewSession(t testing.TB, baseURL string) *Session {
	t.Helper()
	home := t.TempDir()
	s := &Session{Bin: Bin(t), BaseURL: baseURL, Home: home, Work: filepath.Join(home, "work")}
	for _, dir := range []string{s.Work, filepath.Join(home, ".codex")} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// Run is one codex exec.
type Run struct {
	Prompt string
	// Model is asked for ("" asks for the package's Model).
	Model string
	// ContextWindow and AutoCompactLimit set the CLI's window and the
	// count at which it compacts on its own (0: its defaults).
	ContextWindow, AutoCompactLimit int64
	// Timeout bounds the run (0: DefaultTimeout).
	Timeout time.Duration
}

// Result is what a run printed.
type Result struct {
	Stdout, Stderr string
}

// Run runs codex exec with r's prompt in the session's directories,
// unsandboxed and without approvals (the commands it runs are the
// script's), and returns what it printed; a non-zero exit is an error.
func (s *Session) Run(ctx context.Context, r Run) (Result, error) {
	model, key, timeout := r.Model, s.APIKey, r.Timeout
	if model == "" {
		model = Model
	}
	if key == "" {
		key = APIKey
	}
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	args := []string{"exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-m", model,
		"-c", "model_provider=mnemos",
		"-c", fmt.Sprintf(`model_providers.mnemos={name="mnemos",base_url=%q,wire_api="responses",env_key="OPENAI_API_KEY"}`, s.BaseURL)}
	if r.ContextWindow > 0 {
		args = append(args, "-c", "model_context_window="+strconv.FormatInt(r.ContextWindow, 10))
	}
	if r.AutoCompactLimit > 0 {
		args = append(args, "-c", "model_auto_compact_token_limit="+strconv.FormatInt(r.AutoCompactLimit, 10))
	}
	args = append(args, r.Prompt)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Bin, args...) //nolint:gosec // the pinned CLI the test environment names
	cmd.Dir = s.Work
	cmd.Env = []string{
		"HOME=" + s.Home, "CODEX_HOME=" + filepath.Join(s.Home, ".codex"), "OPENAI_API_KEY=" + key,
		"PATH=" + os.Getenv("PATH"), "TERM=dumb", "NO_COLOR=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	if err != nil {
		return res, fmt.Errorf("codex exec: %w\n%s", err, tail(res.Stderr, 2000))
	}
	return res, nil
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
