// Command mnemos is the one Mnemos binary. `mnemos -target=all` runs every
// service in one process; `mnemos -target=<name>` runs one, so each scales on
// its own. `mnemos migrate`, `mnemos replay`, `mnemos tenant` and `mnemos
// bench` are its other commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `Usage:
  mnemos [-target=all|gateway|token-accounting|compactor|session-memory|extractor|dreamer]
  mnemos migrate                      bring the Postgres schema up to date
  mnemos replay [flags] FILE.jsonl    replay a Claude Code transcript (mnemos replay -h)
  mnemos tenant create ID             create a tenant and print a new API key
  mnemos healthcheck [URL]            exit 0 when this machine's mnemos is ready (container health checks)
  mnemos bench [flags]                measure ingest and context assembly on this machine (mnemos bench -h)
  mnemos config [-target=NAME]        print the effective configuration, secrets masked

Configuration comes from MNEMOS_* environment variables: mnemos config shows them,
docs/configuration.md explains them.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "mnemos:", err)
		os.Exit(1)
	}
}

// run dispatches to a command; it is main without the process around it.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "migrate":
			return runMigrate(ctx, args[1:], getenv, stderr)
		case "replay":
			return runReplay(ctx, args[1:], stdout, stderr)
		case "tenant":
			return runTenant(ctx, args[1:], getenv, stdout, stderr)
		case "healthcheck":
			return runHealthcheck(ctx, args[1:], getenv, stderr)
		case "bench":
			return runBench(ctx, args[1:], stdout, stderr)
		case "config":
			return runConfig(args[1:], getenv, stdout, stderr)
		}
	}
	fs := flag.NewFlagSet("mnemos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	target := fs.String("target", TargetAll, "what to run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := configFromEnv(*target, getenv)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, stdout)
}
