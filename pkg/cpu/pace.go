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
// A nil *Pacer paces nothing, so code that may run paced calls Pause
// without checking.
type Pacer struct {
	work, rest time.Duration
	since      time.Time // when the current stretch of work began
	rested     time.Duration
}

// NewPacer paces work in stretches of work followed by rests of rest.
func NewPacer(work, rest time.Duration) *Pacer {
	return &Pacer{work: work, rest: rest, since: time.Now()}
}

// Pause rests when the current stretch of work has lasted its Work, then
// starts the next; it returns early, with ctx's error, when ctx ends.
func (p *Pacer) Pause(ctx context.Context) error {
	if p == nil || p.rest <= 0 || time.Since(p.since) < p.work {
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
	p.since = time.Now()
	return nil
}

// Rested is the time the work spent resting.
func (p *Pacer) Rested() time.Duration {
	if p == nil {
		return 0
	}
	return p.rested
}
