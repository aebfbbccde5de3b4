package cpu

import "runtime"

// Apart runs fn on an operating-system thread of its own, at the ordinary
// scheduling priority, and waits for it: heavy work a client waits on (a
// paced context render, a heavy body read and decoded). One job a thread,
// so a Pacer counts the job's work in the CPU time its thread got
// (threadCPU): on a busy machine the job rests for what it ran, not for
// the time it waited for a core. Pacing, not priority, is what leaves the
// cores to other requests: at the lowest priority such a job starves (with
// two other processes keeping both cores of a two-core machine busy, a
// render of a 30,000-message context that answers in 0.3 s when quiet took
// past 20 s at nice 19, and at nice 10 too; 0.9 s at the ordinary
// priority, tests/hostile).
//
// A panic in fn is raised again in the caller, so an HTTP handler run here
// fails as it would have in its own goroutine.
func Apart(fn func()) { onThreadOfItsOwn(false, fn) }

// Background is Apart at the lowest scheduling priority (nice 19 on
// Linux), for heavy work no client waits on (the accountant applying a
// large event): when the machine is busy the kernel serves every other
// thread first, and the work takes what they leave, however long that is.
// Where the thread's priority cannot be lowered fn runs all the same, at
// the ordinary priority.
func Background(fn func()) { onThreadOfItsOwn(true, fn) }

// onThreadOfItsOwn runs fn on a thread locked to it, lowered or not, and
// waits for it, raising fn's panic again in the caller.
func onThreadOfItsOwn(lower bool, fn func()) {
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		// Never unlocked: a goroutine that ends locked ends its thread
		// with it, so the thread's CPU time is this job's alone, and no
		// lowered thread goes back to serve other goroutines.
		runtime.LockOSThread()
		if lower {
			lowerThisThread()
		}
		defer func() { panicked = recover() }()
		fn()
	}()
	<-done
	if panicked != nil {
		panic(panicked)
	}
}
