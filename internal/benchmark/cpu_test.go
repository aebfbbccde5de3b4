package benchmark

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAProcessStatIsReadPastItsName(t *testing.T) {
	// A command's name may hold spaces and parentheses; the times are
	// counted from the last ')'.
	fields := []string{"S", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "250", "40", "0", "0"}
	path := filepath.Join(t.TempDir(), "stat")
	if err := os.WriteFile(path, []byte("4242 (postgres: (bench) idle) "+strings.Join(fields, " ")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	name, ticks, ok := processStat(path)
	if !ok || name != "postgres: (bench) idle" || ticks != 290 {
		t.Fatalf("processStat = %q, %d, %v; want %q, 290, true", name, ticks, ok, "postgres: (bench) idle")
	}
	if _, _, ok := processStat(filepath.Join(t.TempDir(), "gone")); ok {
		t.Fatal("a stat file that is not there was read")
	}
}

// TestCPUTellsThisProcessFromOthers spends CPU in this process and in a
// child that exits before the sample, and finds each where it belongs:
// the child's under Other (a process of the machine that is not the
// system measured), this process's under Process.
func TestCPUTellsThisProcessFromOthers(t *testing.T) {
	before := sampleCPU()
	if !before.ok {
		if _, err := os.Stat("/proc/self/stat"); err == nil {
			t.Fatal("/proc is there and was not read")
		}
		return // no /proc: cpuSince reports nothing, as the report then does
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	// This process: until it has spent 300 ms of CPU since the sample.
	spin := 0
	for {
		ticks, ok := processTicks("/proc/self/stat")
		if !ok {
			t.Fatal("/proc/self/stat not read")
		}
		if ticks-before.process >= 30 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("this process did not get 300 ms of CPU in 20 s")
		}
		for i := range 1_000_000 {
			spin += i
		}
	}
	// A child: until it has spent 300 ms, then gone.
	child := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	stat := fmt.Sprintf("/proc/%d/stat", child.Process.Pid)
	for {
		if ticks, ok := processTicks(stat); ok && ticks >= 30 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the child did not get 300 ms of CPU in 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = child.Process.Kill()
	_ = child.Wait() // killed: its error says so

	c, ok := cpuSince(before)
	if !ok {
		t.Fatal("cpuSince reported nothing where /proc was read")
	}
	t.Logf("%+v (spin %d)", c, spin)
	if c.Process < 300*time.Millisecond {
		t.Errorf("Process = %v, want at least the 300 ms this process spent", c.Process)
	}
	if c.Other < 300*time.Millisecond {
		t.Errorf("Other = %v, want at least the 300 ms the child spent", c.Other)
	}
	if c.Busy < c.Process+c.Other || c.Wall <= 0 {
		t.Errorf("Busy %v is less than its parts %v + %v, or Wall %v is not positive", c.Busy, c.Process, c.Other, c.Wall)
	}
}
