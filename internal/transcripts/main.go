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
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/internal/claudecli"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
)

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
	up := upstream.New(upstream.Config{Seed: 17, EventDelay: 15 * time.Millisecond, MinCacheTokens: upstream.SonnetMinCacheTokens})
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

func makeOne(claude, url, out string, keep bool, up *upstream.Upstream, t transcript) error {
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
	cli := &claudecli.Session{Bin: claude, BaseURL: url, Home: home, Work: work, Output: prefixed("  | ")}
	seen := len(up.Calls())
	for i, r := range t.runs(work) {
		up.SetScript((&scriptPlayer{run: r, sub: sub, subMarker: t.subMarker}).reply)
		run := claudecli.Run{Prompt: r.prompt, Tools: t.tools, Continue: r.cont, Timeout: 5 * time.Minute}
		log.Printf("%s: run %d: claude -p %q", t.name, i+1, r.prompt)
		res, err := cli.Run(context.Background(), run)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("claude exited with %d", res.ExitCode)
		}
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		all := up.Calls()
		if keep {
			if err := logCalls(calls, seen+1, all[seen:]); err != nil {
				return err
			}
		}
		if errs := failures(all[seen:]); len(errs) > 0 {
			return fmt.Errorf("run %d: the upstream was called off script: %s", i+1, strings.Join(errs, "; "))
		}
		seen = len(all)
	}
	up.SetScript(nil)
	return collect(home, out, t.name)
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
	first := req.Messages[0].Text()
	lastMsg := req.Last()
	round := req.Round()
	switch {
	case p.run.summary != "" && strings.Contains(lastMsg.Text(), "summary"):
		return final(p.run.summary), nil
	case p.subMarker != "" && strings.Contains(first, p.subMarker):
		if round >= len(p.sub) {
			return reply{}, fmt.Errorf("sub-agent round %d: the script has %d", round, len(p.sub))
		}
		return p.sub[round], nil
	case !slices.Contains(req.ToolNames(), "Read"):
		return reply{}, fmt.Errorf("a call without the Read tool (tools %v): %.200q", req.ToolNames(), lastMsg.Text())
	}
	if round >= len(p.run.main) {
		return reply{}, fmt.Errorf("main round %d: the script has %d", round, len(p.run.main))
	}
	return p.run.main[round], nil
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
