//go:build !linux

package limits

// lowerThisThread does nothing where a thread's priority is not its own.
func lowerThisThread() {}
