package benchmark

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestTheMachineLineSaysHowTheCollectorRan(t *testing.T) {
	// Not parallel: the collector's settings are the process's.
	gogc, limit := debug.SetGCPercent(250), debug.SetMemoryLimit(300<<20)
	t.Cleanup(func() { debug.SetGCPercent(gogc); debug.SetMemoryLimit(limit) })
	if got, want := collector(), "GOGC=250 GOMEMLIMIT=300MiB"; got != want {
		t.Fatalf("collector() = %q, want %q", got, want)
	}
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(math.MaxInt64)
	if got, want := collector(), "GOGC=off GOMEMLIMIT=off"; got != want {
		t.Fatalf("with neither: collector() = %q, want %q", got, want)
	}
}
