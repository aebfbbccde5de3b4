package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// runConfig prints the effective configuration: each variable the target
// reads, its value (secrets masked) and where it came from. A value the
// configuration refuses is shown as given, and the refusals are returned
// after the table.
func runConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mnemos config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", TargetAll, "show the variables of this target ("+strings.Join(targetNames(), ", ")+")")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: mnemos config [-target=NAME]\n\nPrints each environment variable the target reads, its value (secrets masked) and\nwhether it came from the environment or is the default.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("config: unexpected argument %q", fs.Arg(0))
	}
	cfg, readings, err := readConfig(*target, getenv)
	if readings == nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VARIABLE\tVALUE\tFROM")
	for _, r := range readings {
		if r.concerns(*target) {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.env, r.shown(&cfg), r.source())
		}
	}
	if ferr := tw.Flush(); ferr != nil {
		return errors.Join(ferr, err)
	}
	return err
}

// concerns reports whether the variable matters to target.
func (v *configVar) concerns(target string) bool {
	return target == TargetAll || v.targets == nil || slices.Contains(v.targets, target)
}

// shown is the value as `mnemos config` prints it: what the configuration
// made of it (as given when it was refused), secrets masked, and the words
// of the default for a default that is no value.
func (r reading) shown(cfg *Config) string {
	v := r.raw
	if r.show != nil && r.err == nil {
		v = r.show(cfg)
	}
	switch {
	case v == "" && r.from == "" && r.defDoc != "":
		return "(" + strings.ReplaceAll(r.defDoc, "`", "") + ")"
	case r.secret && v != devKeyOff: // "off" is MNEMOS_DEV_API_KEY's word for none
		return maskSecret(v)
	}
	return v
}

// source is where a value came from.
func (r reading) source() string {
	from := "default"
	switch {
	case r.from == r.env:
		from = "environment"
	case r.from != "":
		from = "environment (" + r.from + ")"
	}
	if r.err != nil {
		from += ", refused"
	}
	return from
}

// maskSecret hides a secret: the passwords of URLs, else all but the first
// characters.
func maskSecret(v string) string {
	switch {
	case v == "":
		return ""
	case strings.Contains(v, "://"):
		return redactURL(v)
	}
	return mask(v)
}
