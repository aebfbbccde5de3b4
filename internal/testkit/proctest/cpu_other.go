//go:build !linux

package proctest

import (
	"errors"
	"time"
)

// CPUTime needs Linux's /proc.
func CPUTime(int) (time.Duration, error) {
	return 0, errors.New("proctest.CPUTime: only on Linux")
}
