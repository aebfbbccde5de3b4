//go:build !linux

package cpu

import "time"

// lowerThisThread does nothing where a thread's priority is not its own.
func lowerThisThread() {}

// threadCPU is -1: where a thread's CPU time is not read, a pacer counts
// its work by the clock.
func threadCPU() time.Duration { return -1 }
