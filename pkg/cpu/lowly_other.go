//go:build !linux

package cpu

// lowerThisThread does nothing where a thread's priority is not its own.
func lowerThisThread() {}
