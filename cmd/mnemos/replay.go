package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/mnemos-ai/mnemos/pkg/claudecode"
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
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	records, err := claudecode.Parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	if *repeat < 1 || *repeat > 1000 {
		return fmt.Errorf("--repeat %d: want 1 to 1000", *repeat)
	}
	records = replay.Repeat(records, *repeat)
	opts := replay.Options{Window: *window, MaxOutput: *maxOutput, Session: *session}
	if *dryRun {
		return replay.DryRun(stdout, records, opts)
	}
	if *apiKey == "" {
		return errors.New("sending needs --api-key (or MNEMOS_API_KEY); use --dry-run to account without a server")
	}
	events := replay.Events(records, opts)
	stats, err := replay.Send(ctx, events, replay.SendOptions{URL: *url, APIKey: *apiKey})
	fmt.Fprintf(stderr, "sent %d of %d turn events to %s (%d retries)\n", stats.Sent, len(events), *url, stats.Retries)
	if err != nil {
		return err
	}
	return printSessions(ctx, stderr, events, replay.SendOptions{URL: *url, APIKey: *apiKey})
}

// printSessions prints the state of the sessions replayed, as the server
// has it now.
func printSessions(ctx context.Context, w io.Writer, events []turn.Event, opts replay.SendOptions) error {
	sessions, err := replay.ReadSessions(ctx, events, opts)
	for _, s := range sessions {
		fmt.Fprintf(w, "session %s: applied through seq %d, %d tokens (%s)\n", s.SessionID, s.AppliedSeq, s.Tokens.Count, s.Tokens.State)
	}
	return err
}
