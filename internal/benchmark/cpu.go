package benchmark

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU is where a machine's CPU time went over a measured phase: this
// process (the system measured and its load), the local Postgres server's
// processes, the kernel's interrupt work (the loopback network's among
// it), time the hypervisor gave to other machines (steal), and everything
// else: the machine's other processes. A load average taken before a phase
// does not show a job of the machine that starts during it; a helper
// process that takes a core for half a second in the middle of the
// sustained phase does show, under Other.
type CPU struct {
	// Wall is the phase's length; Busy the machine's CPU time over it, of
	// every core, steal included, and the rest its parts.
	Wall, Busy, Process, Postgres, Interrupts, Steal, Other time.Duration
}

// cpuSample is the machine's, this process's and Postgres's CPU time so
// far, in clock ticks; ok is false where /proc cannot be read.
type cpuSample struct {
	at                                         time.Time
	busy, interrupts, steal, process, postgres int64
	ok                                         bool
}

// clockTicks is the unit of /proc's CPU times: USER_HZ, 100 on Linux.
const clockTicks = 100

func sampleCPU() cpuSample {
	s := cpuSample{at: time.Now()}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return s
	}
	// user nice system idle iowait irq softirq steal (guest times are
	// counted in user already)
	for i, v := range f[1:9] {
		n, _ := strconv.ParseInt(v, 10, 64)
		switch i {
		case 3, 4: // idle, iowait
			continue
		case 5, 6:
			s.interrupts += n
		case 7:
			s.steal += n
		}
		s.busy += n
	}
	self, ok := processTicks("/proc/self/stat")
	if !ok {
		return s
	}
	s.process = self
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		if name, ticks, ok := processStat(p); ok && strings.HasPrefix(name, "postgres") {
			s.postgres += ticks
		}
	}
	s.ok = true
	return s
}

// processTicks is a process's user and system time from its stat file.
func processTicks(path string) (int64, bool) {
	_, ticks, ok := processStat(path)
	return ticks, ok
}

// processStat reads a /proc/<pid>/stat: the command's name and its user
// and system time in clock ticks. The name is in parentheses and may hold
// spaces; the fields after it are counted from its closing one.
func processStat(path string) (string, int64, bool) {
	data, err := os.ReadFile(path) //nolint:gosec // a /proc stat file
	if err != nil {
		return "", 0, false
	}
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	f := strings.Fields(string(data[end+1:]))
	if len(f) < 13 { // state … utime stime are fields 1 to 13 after the name
		return "", 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return string(data[open+1 : end]), utime + stime, true
}

// cpuSince is where the CPU went from before to now; ok is false where
// /proc cannot be read. A Postgres backend that exits in between takes
// its time out of Postgres's sum: it is counted under Other.
func cpuSince(before cpuSample) (CPU, bool) {
	after := sampleCPU()
	if !before.ok || !after.ok {
		return CPU{}, false
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / clockTicks }
	c := CPU{
		Wall:       after.at.Sub(before.at),
		Busy:       tick(after.busy - before.busy),
		Process:    tick(after.process - before.process),
		Postgres:   tick(max(after.postgres-before.postgres, 0)),
		Interrupts: tick(after.interrupts - before.interrupts),
		Steal:      tick(after.steal - before.steal),
	}
	c.Other = max(c.Busy-c.Process-c.Postgres-c.Interrupts-c.Steal, 0)
	return c, true
}
