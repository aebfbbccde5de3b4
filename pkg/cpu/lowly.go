package cpu

// Background runs fn on an operating-system thread of its own at the lowest
// scheduling priority (nice 19 on Linux), and waits for it. Heavy work runs
// there: the kernel then gives a core to every other thread that wants one
// (another tenant's request in this process, the Postgres backend answering
// it, the client reading it) before the heavy work, which takes only what
// is left. A heavy slot (Heavy) bounds how many such jobs run; Background
// decides who waits when the machine is busy. Where the thread's priority
// cannot be lowered fn runs all the same, at the ordinary priority.
//
// A panic in fn is raised again in the caller, so an HTTP handler run here
// fails as it would have in its own goroutine.
func Background(fn func()) {
	done := make(chan struct{})
	var panicked any
	go func() {
		defer close(done)
		lowerThisThread()
		defer func() { panicked = recover() }()
		fn()
	}()
	<-done
	if panicked != nil {
		panic(panicked)
	}
}
