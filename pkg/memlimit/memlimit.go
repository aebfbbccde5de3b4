// Package memlimit sets the Go runtime's soft memory limit from the
// container's memory limit.
//
// The Go runtime does not know a container's limit: its heap grows until the
// kernel kills the process, with garbage collection paced as if memory were
// unbounded. With a soft limit a little under the container's, the runtime
// collects harder as the heap nears it, and a burst is more likely to end in
// slower requests than in an OOM kill.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// EnvVar is the Go runtime's own variable; when it is set, it wins.
const EnvVar = "GOMEMLIMIT"

// Ratio is the share of the container's limit given to the Go runtime: the
// rest is for what the runtime does not count (stacks of threads in cgo,
// the kernel's page cache charged to the container, fragmentation).
const Ratio = 0.9

// The files the limit is read from, relative to the file system root: cgroup
// v2 first, then v1.
const (
	CgroupV2File = "sys/fs/cgroup/memory.max"
	CgroupV1File = "sys/fs/cgroup/memory/memory.limit_in_bytes"
)

// unlimited is the value from which a limit means none: cgroup v1 writes
// "no limit" as the largest page-aligned int64 (9223372036854771712), and no
// machine has 4 EiB of memory.
const unlimited = int64(1) << 62

// Limit is a container's memory limit as read from one of the files.
type Limit struct {
	Bytes int64  // 0: no limit
	File  string // the file that gave it, relative to the root
}

// Read reads the container's memory limit from the cgroup files under root
// ("/" in production). A missing file, "max" or an absurdly large value
// mean no limit (Bytes 0); a file that says something else is an error.
func Read(root string) (Limit, error) {
	for _, name := range []string{CgroupV2File, CgroupV1File} {
		raw, err := os.ReadFile(filepath.Join(root, name)) //nolint:gosec // root is "/" or a test's directory; name is one of two constants
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Limit{}, fmt.Errorf("memlimit.Read: %w", err)
		}
		v := strings.TrimSpace(string(raw))
		if v == "max" {
			return Limit{File: name}, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return Limit{}, fmt.Errorf("memlimit.Read: %s: %q is not a number of bytes or max", name, v)
		}
		if n >= unlimited {
			return Limit{File: name}, nil
		}
		return Limit{Bytes: n, File: name}, nil
	}
	return Limit{}, nil
}

// Result is what Apply did.
type Result struct {
	Container Limit
	// Set is the soft limit Apply gave the runtime; 0: it set none.
	Set int64
	// FromEnv: GOMEMLIMIT was set, so Apply left the runtime's limit alone.
	FromEnv bool
}

// Apply sets the runtime's soft memory limit to Ratio of the container's
// limit read under root, unless GOMEMLIMIT is set in the environment
// (getenv) or there is no limit.
func Apply(root string, getenv func(string) string) (Result, error) {
	if getenv(EnvVar) != "" {
		return Result{FromEnv: true}, nil
	}
	limit, err := Read(root)
	if err != nil {
		return Result{}, err
	}
	res := Result{Container: limit}
	if limit.Bytes == 0 {
		return res, nil
	}
	res.Set = SoftLimit(limit.Bytes)
	debug.SetMemoryLimit(res.Set)
	return res, nil
}

// SoftLimit is Ratio of a container's limit, in bytes.
func SoftLimit(container int64) int64 {
	return int64(math.Floor(float64(container) * Ratio))
}
