// Package claudecli runs the real Claude Code CLI, offline, against a
// local Anthropic API (usually the scripted upstream of
// internal/testkit/llmtest/upstream, or a proxy in front of it), each session in its
// own HOME and work directory.
//
// Tests find the pinned CLI through the environment variable BinEnv and
// skip, naming it, when it is unset:
//
//	s := claudecli.NewSession(t, up.URL)
//	res, err := s.Run(ctx, claudecli.Run{Prompt: "What is in notes.md?"})
package claudecli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mnemos-ai/mnemos/internal/clibin"
)

const (
	// BinEnv names the environment variable that holds the path of the
	// pinned CLI: node_modules/@anthropic-ai/claude-code/bin/claude.exe of
	// an npm install of @anthropic-ai/claude-code@Version.
	BinEnv = "MNEMOS_CLAUDE_CODE_BIN"
	// Version is the CLI's version the tests are written against.
	Version = "2.1.328"
	// Model is the model a run asks for unless told otherwise.
	Model = "claude-sonnet-4-5"
	// APIKey is the key a run sends unless told otherwise; the scripted
	// upstream accepts any.
	APIKey = "sk-ant-dummy-key-for-a-local-upstream" //nolint:gosec // a dummy, for a local fake API
	// DefaultTimeout bounds a run unless told otherwise.
	DefaultTimeout = 2 * time.Minute
)

// DefaultTools are the tools a run allows unless told otherwise.
var DefaultTools = []string{"Read", "Bash"}

// Bin is the CLI's path from BinEnv. It skips t when the variable is unset
// (make test-fast unsets it), and fails it when the variable names no
// executable file.
func Bin(t testing.TB) string {
	t.Helper()
	return clibin.Path(t, BinEnv, "node_modules/@anthropic-ai/claude-code/bin/claude.exe of npm install @anthropic-ai/claude-code@"+Version)
}

// Session is a HOME and a work directory the CLI runs in, one run after
// the other; a run with Continue carries on the previous run's
// conversation.
type Session struct {
	// Bin is the CLI's path.
	Bin string
	// BaseURL is the Anthropic API the CLI calls (ANTHROPIC_BASE_URL).
	BaseURL string
	// APIKey is sent as ANTHROPIC_API_KEY ("" sends the package's APIKey).
	APIKey string
	// Home is the CLI's HOME, where it keeps its settings and transcripts.
	Home string
	// Work is the directory it runs in.
	Work string
	// Env is added to every run's environment (NAME=value).
	Env []string
	// Output, when set, receives the runs' stdout and stderr as they come.
	Output io.Writer
}

// NewSession is a Session of the CLI named by BinEnv (skipping t when
// unset) against baseURL, in fresh directories removed when t ends.
func NewSession(t testing.TB, baseURL string) *Session {
	t.Helper()
	bin := Bin(t)
	root := t.TempDir()
	s := &Session{Bin: bin, BaseURL: baseURL, Home: filepath.Join(root, "home"), Work: filepath.Join(root, "work")}
	for _, d := range []string{s.Home, s.Work} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// WriteFile writes content to name, a path under the work directory,
// making its directories.
func (s *Session) WriteFile(name, content string) error {
	path := filepath.Join(s.Work, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o600)
}

// WriteFiles writes each file (name to content) under the work directory.
func (s *Session) WriteFiles(files map[string]string) error {
	for name, content := range files {
		if err := s.WriteFile(name, content); err != nil {
			return err
		}
	}
	return nil
}

// WriteClaudeMD writes the project's instructions, CLAUDE.md in the work
// directory, which the CLI puts in its context.
func (s *Session) WriteClaudeMD(content string) error { return s.WriteFile("CLAUDE.md", content) }

// Run is one invocation of the CLI: one user turn, in print mode (-p).
type Run struct {
	Prompt string
	// Model is asked for with --model ("" asks for the package's Model).
	Model string
	// Tools are allowed with --allowedTools (nil allows DefaultTools).
	Tools []string
	// Continue carries on the session's last conversation (--continue).
	Continue bool
	// MCPConfig, when set, is passed to --mcp-config: a file's path or
	// the JSON itself.
	MCPConfig string
	// Args are added after the others.
	Args []string
	// Env is added to the environment (NAME=value), after the session's.
	Env []string
	// Timeout bounds the run (0: DefaultTimeout).
	Timeout time.Duration
}

// Result is how a run ended.
type Result struct {
	// ExitCode is the CLI's exit status.
	ExitCode int
	Stdout   string
	Stderr   string
	// Transcript is the path of the session transcript the CLI wrote last
	// under HOME/.claude/projects/ ("" when it wrote none).
	Transcript string
	// Elapsed is how long the run took.
	Elapsed time.Duration
}

// Args are the CLI's arguments for r.
func (r Run) args() []string {
	model, tools := r.Model, r.Tools
	if model == "" {
		model = Model
	}
	if tools == nil {
		tools = DefaultTools
	}
	args := []string{"-p", r.Prompt, "--model", model, "--allowedTools", strings.Join(tools, ",")}
	if r.Continue {
		args = append(args, "--continue")
	}
	if r.MCPConfig != "" {
		args = append(args, "--mcp-config", r.MCPConfig)
	}
	return append(args, r.Args...)
}

// Env is the environment of a run: nothing of the caller's but what the
// CLI needs (a PATH for the Bash tool), the API's address and key, and no
// traffic but the API calls.
func (s *Session) env(r Run) []string {
	key := s.APIKey
	if key == "" {
		key = APIKey
	}
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + s.Home,
		"LANG=C.UTF-8",
		"SHELL=/bin/bash",
		"TERM=dumb",
		"ANTHROPIC_BASE_URL=" + s.BaseURL,
		"ANTHROPIC_API_KEY=" + key,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	}
	env = append(env, s.Env...)
	return append(env, r.Env...)
}

// Run runs the CLI once and waits for it. A CLI that exits non-zero is a
// Result with its ExitCode, not an error; an error is a CLI that could not
// start or outlived its timeout.
func (s *Session) Run(ctx context.Context, r Run) (Result, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Bin, r.args()...) //nolint:gosec // the CLI the caller names, with the caller's arguments
	cmd.Dir = s.Work
	cmd.Env = s.env(r)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if s.Output != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&stdout, s.Output), io.MultiWriter(&stderr, s.Output)
	}
	start := time.Now()
	err := cmd.Run()
	// ExitCode is -1 when the CLI did not start.
	res := Result{ExitCode: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String(), Elapsed: time.Since(start)}
	res.Transcript, _ = s.lastTranscript() // none found is ""
	if ctx.Err() != nil {
		return res, fmt.Errorf("claude -p %.60q: no end within %v; stderr: %s", r.Prompt, timeout, res.Stderr)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return res, fmt.Errorf("claude: %w", err)
	}
	return res, nil
}

// Transcripts are the session transcripts under HOME/.claude/projects/,
// one per conversation (sub-agents' transcripts are not among them).
func (s *Session) Transcripts() ([]string, error) {
	return filepath.Glob(filepath.Join(s.Home, ".claude", "projects", "*", "*.jsonl"))
}

// lastTranscript is the session transcript written last.
func (s *Session) lastTranscript() (string, error) {
	files, err := s.Transcripts()
	if err != nil {
		return "", err
	}
	last, when := "", time.Time{}
	for _, f := range files {
		info, err := os.Stat(f)
		if err == nil && info.ModTime().After(when) {
			last, when = f, info.ModTime()
		}
	}
	return last, nil
}
