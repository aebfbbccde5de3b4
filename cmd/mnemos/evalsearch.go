package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/searcheval"
)

var evalUsage = [][2]string{{"eval search [flags] FILE.json", "measure search on labelled conversations beside a plain BM25 (docs/eval.md)"}}

// runEval dispatches `mnemos eval <what>`; search is the only evaluation.
func runEval(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "search" {
		fmt.Fprintln(stderr, "Usage: mnemos eval search [flags] FILE.json")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return flag.ErrHelp
		}
		return errors.New("eval: the one evaluation is search")
	}
	return runEvalSearch(ctx, args[1:], getenv, stdout, stderr)
}

// runEvalSearch sends an evaluation file's conversations to a running
// Mnemos, asks its questions, and prints recall and MRR beside BM25's.
func runEvalSearch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := commandFlags("eval search", "eval search [flags] FILE.json",
		"Sends every turn of FILE's conversations to a running Mnemos as a round, in a fresh scope per conversation,\n"+
			"asks each question of the scope's search and of a plain BM25 over the same turns, and prints recall of any\n"+
			"and of all evidence at 5 and 10 hits and the mean reciprocal rank of both. FILE is this repository's format or\n"+
			"LoCoMo's (docs/eval.md).", stderr)
	url := fs.String("url", "http://localhost:8080", "Mnemos to evaluate")
	apiKey := fs.String("api-key", getenv("MNEMOS_API_KEY"), "API key for --url (default $MNEMOS_API_KEY)")
	asJSON := fs.Bool("json", false, "print the report as JSON, every question's ranks and hits included")
	behind := fs.Bool("behind", false, "after the table, list the questions where Mnemos ranks the evidence below BM25")
	wait := fs.Duration("wait", 5*time.Minute, "how long to wait for the server to apply every turn")
	settle := fs.Duration("settle", 0, "once every turn is applied, wait this long more before asking: for what the server indexes in the background (embeddings)")
	runID := fs.String("run", "", "name of the run's scopes and sessions (default eval-<time>-<random>); must be fresh")
	if err := parseArgs(fs, args, 1); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("eval search takes one evaluation file")
	}
	if *apiKey == "" {
		return errors.New("eval search needs --api-key (or MNEMOS_API_KEY)")
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	ds, shape, skipped, err := searcheval.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	fmt.Fprintf(stderr, "%s: %s format, %d conversations, %d turns, %d questions, %d skipped\n",
		fs.Arg(0), shape, len(ds.Conversations), ds.Turns(), ds.Questions(), len(skipped))
	if *runID == "" {
		*runID = freshRunID()
	}
	opts := searcheval.Options{RunID: *runID, Wait: *wait, Progress: stderr}
	if *settle > 0 {
		opts.Ready = func(ctx context.Context) error { return sleep(ctx, *settle) }
	}
	rep, err := searcheval.Run(ctx, ds, searcheval.NewAPIServer(*url, *apiKey), opts)
	if err != nil {
		return err
	}
	rep.Skipped = append(rep.Skipped, skipped...)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	if err := rep.PrintTable(stdout); err != nil {
		return err
	}
	if *behind {
		fmt.Fprintln(stdout)
		rep.PrintBehind(stdout)
	}
	return nil
}

// freshRunID names a run by the time and a random suffix, so no two runs
// share a scope.
func freshRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "eval-" + strconv.FormatInt(time.Now().Unix(), 36) + "-" + hex.EncodeToString(b[:])
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
