package cpu

import (
	"context"
	"time"
)

// Pacer spreads heavy work over time. One heavy slot (Heavy) keeps a
// second large job from starting, but the one running still takes a whole
// core in Mnemos and, while it reads, another in the Postgres backend that
// feeds it: on a small machine every other tenant's requests then wait for
// a core. A paced job rests Rest after each Work of running, between the
// steps it is made of (a page of rows, a batch of messages encoded), so it
// takes about Work/(Work+Rest) of the cores it would take and every other
// request finds one free. The job takes longer by as much; it is one
// request of a large session, which was going to take long anyway.
//
// A stretch of work is counted in the CPU time the job's thread got, where
// that can be read (Apart's and Background's threads, on Linux), not in
// the time that passed: on a busy machine a job waits for a core between slices, and
// counted by the clock it would rest five times as long as it waited too.
// The first stretch is counted by the clock: a pacer is made before its
// job reaches its thread, whose CPU time is read from the first rest on.
//
// A nil *Pacer paces nothing, so code that may run paced calls Pause
// without checking.
type Pacer struct {
	work, rest time.Duration
	since      time.Time     // when the current stretch of work began
	ranSince   time.Duration // the thread's CPU time then (threadCPU); -1 before the first rest
	rested     time.Duration
}

// NewPacer paces work in stretches of work followed by rests of rest.
func NewPacer(work, rest time.Duration) *Pacer {
	return &Pacer{work: work, rest: rest, since: time.Now(), ranSince: -1}
}

// worked is how long the current stretch has run: the CPU time its thread
// got since it began, or the time that passed when that is not known (the
// first stretch, a system without the clock) or makes no sense (the
// goroutine moved to another thread).
func (p *Pacer) worked() time.Duration {
	passed := time.Since(p.since)
	if p.ranSince < 0 {
		return passed
	}
	ran := threadCPU() - p.ranSince
	if ran < 0 || ran > passed {
		return passed
	}
	return ran
}

// Pause rests when the current stretch of work has run its Work, then
// starts the next; it returns early, with ctx's error, when ctx ends.
func (p *Pacer) Pause(ctx context.Context) error {
	if p == nil || p.rest <= 0 || p.worked() < p.work {
		return nil
	}
	t := time.NewTimer(p.rest)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	p.rested += p.rest
	p.since, p.ranSince = time.Now(), threadCPU()
	return nil
}

// Rested is the time the work spent resting.
func (p *Pacer) Rested() time.Duration {
	if p == nil {
		return 0
	}
	return p.rested
}
