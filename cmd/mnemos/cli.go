package main

import (
	"flag"
	"fmt"
	"io"
)

// commandFlags is the flag set of `mnemos <name>`: -h prints its usage, the
// synopsis and what the command does, then its flags when it has any.
func commandFlags(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("mnemos "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: mnemos %s\n\n%s\n", synopsis, about)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(stderr, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseArgs parses args and refuses more than maxArgs arguments left.
func parseArgs(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > maxArgs {
		fs.Usage()
		return fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(maxArgs))
	}
	return nil
}
