package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/replay"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// runReplay reads a transcript and either accounts it in-process (--dry-run)
// or sends its turn events to a running Mnemos.
func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mnemos replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "claude-code", "transcript format (only claude-code)")
	dryRun := fs.Bool("dry-run", false, "account in-process and print one JSON line per record; no server")
	url := fs.String("url", "http://localhost:8080", "Mnemos to send the turn events to")
	apiKey := fs.String("api-key", os.Getenv("MNEMOS_API_KEY"), "API key for --url (default $MNEMOS_API_KEY)")
	session := fs.String("session", "", "session id to use instead of the transcript's sessionId")
	window := fs.Int64("window", 0, "context window in tokens, overriding the model table")
	maxOutput := fs.Int64("max-output", 0, "max output tokens, overriding the model table")
	repeat := fs.Int("repeat", 1, "replay the transcript this many times into one session (fresh ids, usage carried on): a long session from a short transcript")
	untilCompact := fs.Bool("until-compact", false, "stop at the transcript's first compaction (its /compact): repeated, the session then grows past the threshold without the client's compaction bringing it down first")
	scope := map[string]string{}
	fs.Func("scope", "memory scope of the session, kind=id (kinds user, project, local, agent); repeat it or comma-separate: -scope project=repo-x,user=u-42. Without one nothing is extracted, recalled or dreamed", func(v string) error {
		return replay.AddScope(scope, v)
	})
	measure := fs.Bool("measure", false, "replay round by round, asking preflight before each, and print the prediction error beside Claude Code's heuristic (a fresh session unless --session)")
	agent := fs.String("agent", "", "agent type of the session: its agent:TYPE memory scope (as -scope agent=TYPE); the events stay the main agent's, so extraction runs")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: mnemos replay [flags] FILE.jsonl")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("replay takes exactly one transcript file")
	}
	if *format != "claude-code" {
		return fmt.Errorf("unknown --format %q: only claude-code is supported", *format)
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	records, err := claudecode.Parse(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	if *repeat < 1 || *repeat > 1000 {
		return fmt.Errorf("--repeat %d: want 1 to 1000", *repeat)
	}
	if *measure && (*repeat > 1 || *dryRun) {
		// Repeat carries each copy's usage on past the window: no request
		// ever had it, so there is nothing real to predict.
		return errors.New("--measure replays the transcript as recorded: no --repeat or --dry-run")
	}
	if *agent != "" {
		if err := replay.AddScope(scope, "agent="+*agent); err != nil {
			return fmt.Errorf("-agent: %w", err)
		}
	}
	if *untilCompact {
		records = replay.UntilCompaction(records)
	}
	records = replay.Repeat(records, *repeat)
	opts := replay.Options{Window: *window, MaxOutput: *maxOutput, Session: *session}
	if len(scope) > 0 {
		opts.MemoryScope = scope
	}
	if *dryRun {
		return replay.DryRun(stdout, records, opts)
	}
	if *apiKey == "" {
		return errors.New("sending needs --api-key (or MNEMOS_API_KEY); use --dry-run to account without a server")
	}
	events := replay.Events(records, opts)
	if *measure {
		return runMeasure(ctx, stdout, fs.Arg(0), data, events, *session == "", replay.SendOptions{URL: *url, APIKey: *apiKey})
	}
	stats, err := replay.Send(ctx, events, replay.SendOptions{URL: *url, APIKey: *apiKey})
	fmt.Fprintln(stderr, sentLine(stats, len(events), *url))
	if err != nil {
		return err
	}
	return printSessions(ctx, stdout, events, opts.MemoryScope, replay.SendOptions{URL: *url, APIKey: *apiKey})
}

// printSessions says which sessions a replay sent, with what memory scope
// and how far the server has accounted each now (the accountant applies
// the last events a moment after the gateway took them), and how to look
// at the first (the main agent's) next.
func printSessions(ctx context.Context, w io.Writer, events []turn.Event, scope map[string]string, opts replay.SendOptions) error {
	sent := replay.Sessions(events)
	if len(sent) == 0 {
		fmt.Fprintln(w, "the transcript holds no API round: no session was sent")
		return nil
	}
	states, err := replay.ReadSessions(ctx, events, opts)
	var scopes []string
	for _, sc := range memory.ScopesOf(scope) {
		scopes = append(scopes, sc.String())
	}
	for _, s := range sent {
		fmt.Fprintf(w, "session %s: %d turn events of agent %s", s.ID, s.Events, s.Agent)
		if len(scopes) > 0 {
			fmt.Fprintf(w, ", memory scope %s", strings.Join(scopes, " "))
		}
		read := "; not accounted yet"
		for _, st := range states {
			if st.SessionID == s.ID {
				read = fmt.Sprintf("; applied through seq %d, %d tokens (%s), %d automatic compactions asked", st.AppliedSeq, st.Tokens.Count, st.Tokens.State, st.CompactRequests)
				if st.ThrashHeld > 0 {
					read += fmt.Sprintf(", %d held back by the thrash guard", st.ThrashHeld)
				}
			}
		}
		fmt.Fprintln(w, read)
	}
	base := strings.TrimRight(opts.URL, "/") + "/v1/sessions/" + sent[0].ID
	auth := `-H "Authorization: Bearer $MNEMOS_API_KEY"`
	fmt.Fprintf(w, "next: curl -s %s %s | jq .tokens\n", auth, base)
	fmt.Fprintf(w, "      curl -s %s %s/context | jq '{context_tokens, compaction}'\n", auth, base)
	if len(scopes) == 0 {
		fmt.Fprintln(w, "no memory scope: nothing of this session is extracted, recalled or dreamed; replay with -scope project=<id> for that")
	}
	return err
}

// runMeasure replays events with preflight before each round (see
// replay.Measure). The events carry what the transcript's request records
// hold (the messages as sent, the system prompt and tools) when it has them.
// Without --session each run gets a fresh session, so runs do not meet.
func runMeasure(ctx context.Context, w io.Writer, name string, data []byte, events []turn.Event, fresh bool, opts replay.SendOptions) error {
	log, err := replay.ReadRequestLog(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(log.Requests) > 0 {
		if events, err = replay.WithRequests(events, log); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	} else {
		fmt.Fprintln(w, "the transcript records no requests: measured on its messages, without system prompt or tools")
	}
	if fresh {
		suffix := "-m" + strconv.FormatInt(time.Now().UnixNano(), 36)
		for i := range events {
			events[i].SessionID += suffix
			events[i].EventID += suffix
		}
	}
	rounds, err := replay.Measure(ctx, events, replay.MeasureOptions{SendOptions: opts})
	if perr := replay.PrintMeasured(w, filepath.Base(name), rounds); perr != nil && err == nil {
		err = perr
	}
	return err
}

// sentLine says what a replay sent: how many of the events the server
// accepted, and how many of those it had accepted before (a duplicate
// publishes nothing, so a session that lost them stays without them).
func sentLine(stats replay.SendStats, events int, url string) string {
	dups := ""
	if stats.Duplicates > 0 {
		dups = fmt.Sprintf(", %d duplicates of events already accepted", stats.Duplicates)
	}
	return fmt.Sprintf("sent %d of %d turn events to %s%s (%d retries)", stats.Sent, events, url, dups, stats.Retries)
}
