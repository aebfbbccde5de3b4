// Command mnemos is the one Mnemos binary. `mnemos -target=all` runs every
// service in one process; `mnemos -target=<name>` runs one, so each scales on
// its own. Its other commands (migrate, replay, tenant, healthcheck, bench,
// config, version, demo) are listed in commands.
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
	"text/tabwriter"
)

// command is one of mnemos's commands: `mnemos <name> args...`.
type command struct {
	name string
	// usage are its lines of mnemos's usage: what follows "mnemos ", and
	// what it does.
	usage [][2]string
	run   func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error
}

// commands are mnemos's commands besides serving, in the usage's order.
var commands = []command{
	{name: "migrate", usage: [][2]string{{"migrate", "bring the Postgres schema up to date"}},
		run: func(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) error {
			return runMigrate(ctx, args, getenv, stderr)
		}},
	{name: "replay", usage: [][2]string{{"replay [flags] FILE.jsonl", "replay a Claude Code transcript"}},
		run: func(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
			return runReplay(ctx, args, stdout, stderr)
		}},
	{name: "eval", usage: evalUsage, run: runEval},
	{name: "tenant", usage: tenantUsage, run: runTenant},
	{name: "key", usage: keyUsage, run: runKey},
	{name: "operator-key", usage: operatorKeyUsage, run: runOperatorKey},
	{name: "export", usage: exportUsage, run: runExport},
	{name: "import", usage: importUsage, run: runImport},
	{name: "healthcheck", usage: [][2]string{{"healthcheck [URL]", "exit 0 when this machine's mnemos is ready (container health checks)"}},
		run: func(ctx context.Context, args []string, getenv func(string) string, _, stderr io.Writer) error {
			return runHealthcheck(ctx, args, getenv, stderr)
		}},
	{name: "bench", usage: [][2]string{{"bench [flags]", "measure ingest, context assembly and the Messages API proxy on this machine"},
		{"bench render [-update PAGE] FILE.json", "print the tables of a run stored with bench --json"}},
		run: func(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
			return runBench(ctx, args, stdout, stderr)
		}},
	{name: "config", usage: [][2]string{{"config [-target=NAME]", "print the effective configuration, secrets masked"}},
		run: func(_ context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
			return runConfig(args, getenv, stdout, stderr)
		}},
	{name: "demo", usage: [][2]string{{"demo [flags]", "the README's tour against a running server (make demo)"}}, run: runDemo},
	{name: "version", usage: [][2]string{{"version", "print the version, the revision it was built from and the Go version"}},
		run: func(_ context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
			return runVersion(args, stdout, stderr)
		}},
}

// printUsage writes mnemos's usage: serving, then every command.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage:")
	tw := tabwriter.NewWriter(w, 0, 0, 4, ' ', 0)
	fmt.Fprintf(tw, "  mnemos [-target=TARGET]\trun the services\n")
	for _, c := range commands {
		for _, line := range c.usage {
			fmt.Fprintf(tw, "  mnemos %s\t%s\n", line[0], line[1])
		}
	}
	_ = tw.Flush() // the terminal's: nothing to do if it fails
	fmt.Fprintf(w, `
TARGET is %s (every service in one process, the default) or one service: %s.
mnemos COMMAND -h prints a command's flags. Configuration comes from environment variables:
mnemos config shows them, docs/configuration.md explains them.
`, TargetAll, orList(targetNames()[1:]))
}

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
		if args[0] == "--version" || args[0] == "-version" {
			args[0] = "version"
		}
		for _, c := range commands {
			if c.name == args[0] {
				return c.run(ctx, args[1:], getenv, stdout, stderr)
			}
		}
	}
	fs := flag.NewFlagSet("mnemos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(stderr) }
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
