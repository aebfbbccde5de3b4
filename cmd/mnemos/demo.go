package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/mnemos-ai/mnemos/pkg/demo"
)

// runDemo tours a running Mnemos as the README does (make demo).
func runDemo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mnemos demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	key := getenv("MNEMOS_API_KEY")
	if key == "" {
		key = getenv("MNEMOS_DEV_API_KEY")
	}
	if key == "" || key == "off" {
		key = defaultDevAPIKey
	}
	url := fs.String("url", "http://127.0.0.1:8080", "the Mnemos to tour (make run serves it)")
	apiKey := fs.String("api-key", key, "API key (default $MNEMOS_API_KEY, else the development key of make run)")
	transcripts := fs.String("transcripts", "testdata/claude-code", "directory of the sample transcripts")
	runID := fs.String("run", "", "suffix of this run's session ids and scope (default: random, so the demo can run again)")
	timeout := fs.Duration("step-timeout", 0, "how long one step may wait for the services (default 3m)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: mnemos demo [flags]\n\nThe README's five-minute tour against a running server: replay a session, watch one compact,\nremember a fact, recall it in a later session, dream.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errors.New("demo takes no arguments")
	}
	_, err := demo.Run(ctx, demo.Config{URL: *url, APIKey: *apiKey, Transcripts: *transcripts, Run: *runID, StepTimeout: *timeout}, stdout)
	return err
}
