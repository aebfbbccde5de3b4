package proctest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// CPUTime is the CPU time (user and system) process pid has used so far,
// from /proc/<pid>/stat; its threads are included, its children are not.
// The resolution is 10 ms.
func CPUTime(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("proctest: CPU time of %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after its closing parenthesis start with field 3 (state).
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("proctest: CPU time of %d: unreadable stat %q", pid, stat)
	}
	fields := bytes.Fields(stat[end+1:])
	const utime, stime = 14 - 3, 15 - 3 // fields 14 and 15, counted from field 3
	if len(fields) <= stime {
		return 0, fmt.Errorf("proctest: CPU time of %d: short stat %q", pid, stat)
	}
	var ticks int64
	for _, f := range [][]byte{fields[utime], fields[stime]} {
		n, err := strconv.ParseInt(string(f), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proctest: CPU time of %d: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
