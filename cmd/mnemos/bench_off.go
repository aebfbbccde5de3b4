//go:build !bench

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// errNoBench is the answer of a binary built without the bench: the bench
// drives a scripted model upstream, a test helper the product does not
// ship.
var errNoBench = errors.New("this binary is built without the bench: build or run it with -tags bench (make bench)")

// runBench, in a binary built without the bench tag, says how to get one.
func runBench(_ context.Context, args []string, _, stderr io.Writer) error {
	fmt.Fprintln(stderr, "Usage: mnemos bench [flags] | mnemos bench render [-update PAGE] FILE.json")
	fmt.Fprintln(stderr, "  (in a binary built with -tags bench: go run -tags bench ./cmd/mnemos bench, or make bench)")
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			return nil
		}
	}
	return errNoBench
}
