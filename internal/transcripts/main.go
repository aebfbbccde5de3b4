// Command transcripts makes the sample Claude Code transcripts of
// testdata/claude-code: it runs the real Claude Code CLI, offline, against a
// scripted Anthropic upstream served here, one or more times per transcript
// (one run per user turn), and copies the transcript the CLI wrote.
//
//	go run ./internal/transcripts -claude PATH/TO/claude.exe [-out testdata/claude-code] [-only NAME]
//
// testdata/claude-code/make.sh installs the CLI and runs this; its README
// says what each transcript holds.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// model is the model every run asks for.
const model = "claude-sonnet-4-5"

// apiKey is the key the CLI sends; the upstream accepts any.
const apiKey = "dummy-key-for-the-scripted-upstream" //nolint:gosec // a dummy: the scripted upstream checks no key

func main() {
	claude := flag.String("claude", "", "path of the Claude Code CLI (node_modules/@anthropic-ai/claude-code/bin/claude.exe)")
	out := flag.String("out", "testdata/claude-code", "directory to write the transcripts to")
	only := flag.String("only", "", "make only this transcript (short, tool_heavy, subagent, long)")
	keep := flag.Bool("keep", false, "keep each run's temporary directory, with the calls the upstream received")
	flag.Parse()
	if *claude == "" {
		log.Fatal("-claude is required")
	}
	if err := makeAll(*claude, *out, *only, *keep); err != nil {
		log.Fatal(err)
	}
}

func makeAll(claude, out, only string, keep bool) error {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	up := newUpstream("")
	srv := &http.Server{Handler: up, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends when the server is closed
	defer func() { _ = srv.Close() }()
	url := "http://" + ln.Addr().String()
	made := 0
	for _, t := range transcripts() {
		if only != "" && t.name != only {
			continue
		}
		made++
		if err := makeOne(claude, url, out, keep, up, t); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	if made == 0 {
		return fmt.Errorf("no transcript is called %q", only)
	}
	return nil
}

// transcript is how one sample transcript is made: the files its work
// directory starts with, and its runs of the CLI in order.
type transcript struct {
	name  string
	setup func(work string) error
	runs  func(work string) []run
	// sub answers the calls of a sub-agent, by round; subMarker is a
	// phrase of the prompt the main agent gives it.
	sub       func(work string) []reply
	subMarker string
	// tools are the tools the runs allow.
	tools []string
}

// run is one invocation of the CLI: one user turn.
type run struct {
	prompt string
	// cont continues the transcript's session (--continue).
	cont bool
	// main answers the main agent's calls of this turn, by round.
	main []reply
	// summary, for a /compact run, answers the call that asks for the
	// conversation's summary.
	summary string
}

func makeOne(claude, url, out string, keep bool, up *upstream, t transcript) error {
	tmp, err := os.MkdirTemp("", "cc-"+t.name+"-")
	if err != nil {
		return err
	}
	if !keep {
		defer func() { _ = os.RemoveAll(tmp) }()
	}
	home, work, calls := filepath.Join(tmp, "home"), filepath.Join(tmp, "work"), filepath.Join(tmp, "calls")
	for _, d := range []string{home, work, calls} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return err
		}
	}
	if keep {
		up.mu.Lock()
		up.logDir = calls
		up.mu.Unlock()
		log.Printf("%s: calls kept in %s", t.name, calls)
	}
	if t.setup != nil {
		if err := t.setup(work); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
	}
	var sub []reply
	if t.sub != nil {
		sub = t.sub(work)
	}
	for i, r := range t.runs(work) {
		up.play(&scriptPlayer{run: r, sub: sub, subMarker: t.subMarker})
		args := []string{"-p", r.prompt, "--model", model, "--allowedTools", strings.Join(t.tools, ",")}
		if r.cont {
			args = append(args, "--continue")
		}
		log.Printf("%s: run %d: claude %s", t.name, i+1, strings.Join(quoteAll(args), " "))
		if err := runCLI(claude, url, home, work, args); err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		if errs := up.failures(); len(errs) > 0 {
			return fmt.Errorf("run %d: the upstream was called off script: %s", i+1, strings.Join(errs, "; "))
		}
	}
	up.play(nil)
	return collect(home, out, t.name)
}

func runCLI(claude, url, home, work string, args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, claude, args...) //nolint:gosec // the CLI the caller names, with the script's arguments
	cmd.Dir = work
	// A clean environment: nothing of the caller's reaches the CLI or its
	// transcript but a PATH for the Bash tool.
	cmd.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"LANG=C.UTF-8",
		"SHELL=/bin/bash",
		"TERM=dumb",
		"ANTHROPIC_BASE_URL=" + url,
		"ANTHROPIC_API_KEY=" + apiKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	}
	cmd.Stdin = nil
	var output strings.Builder
	cmd.Stdout = io.MultiWriter(&output, prefixed("  | "))
	cmd.Stderr = io.MultiWriter(&output, prefixed("  ! "))
	return cmd.Run()
}

// collect copies the session's transcript out of the run's HOME, and the
// sub-agents' transcripts, which the CLI writes apart, into
// out/NAME/subagents/ as it lays them out under the session's directory.
func collect(home, out, name string) error {
	files, err := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return fmt.Errorf("want one session transcript, found %d: %v", len(files), files)
	}
	if err := copyFile(files[0], filepath.Join(out, name+".jsonl")); err != nil {
		return err
	}
	subDir := filepath.Join(out, name)
	if err := os.RemoveAll(subDir); err != nil {
		return err
	}
	subs, err := filepath.Glob(filepath.Join(strings.TrimSuffix(files[0], ".jsonl"), "subagents", "agent-*"))
	if err != nil {
		return err
	}
	for _, f := range subs {
		if err := copyFile(f, filepath.Join(subDir, "subagents", filepath.Base(f))); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src) //nolint:gosec // a transcript the CLI wrote in the run's HOME
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
		return err
	}
	log.Printf("%s (%d bytes) -> %s", src, len(data), dst)
	return os.WriteFile(dst, data, 0o644) //nolint:gosec // a sample transcript, meant to be read
}

// scriptPlayer answers the calls of one run from its script.
type scriptPlayer struct {
	run       run
	sub       []reply
	subMarker string
}

func (p *scriptPlayer) reply(req *request) (reply, error) {
	if len(req.Messages) == 0 {
		return reply{}, errors.New("a call without messages")
	}
	first := req.Messages[0].text()
	lastMsg := req.Messages[len(req.Messages)-1]
	round := req.round()
	switch {
	case p.run.summary != "" && strings.Contains(lastMsg.text(), "summary"):
		return final(p.run.summary), nil
	case p.subMarker != "" && strings.Contains(first, p.subMarker):
		if round >= len(p.sub) {
			return reply{}, fmt.Errorf("sub-agent round %d: the script has %d", round, len(p.sub))
		}
		return p.sub[round], nil
	case !slices.Contains(req.toolNames(), "Read"):
		return reply{}, fmt.Errorf("a call without the Read tool (tools %v): %.200q", req.toolNames(), lastMsg.text())
	}
	if round >= len(p.run.main) {
		return reply{}, fmt.Errorf("main round %d: the script has %d", round, len(p.run.main))
	}
	return p.run.main[round], nil
}

func quoteAll(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \"'$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return out
}

type prefixWriter struct{ prefix string }

func prefixed(p string) io.Writer { return prefixWriter{p} }

func (w prefixWriter) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			fmt.Fprint(os.Stderr, w.prefix+line)
		}
	}
	return len(b), nil
}
