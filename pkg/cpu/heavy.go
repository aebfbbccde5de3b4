// Package cpu shares a small machine's cores between tenants: slots for
// CPU-heavy work (Heavy), a pacer that spreads one heavy job over time
// (Pacer), and threads of their own for it (Apart, Background).
package cpu

import (
	"context"
	"time"
)

// Heavy is a process's slots for CPU-heavy work: a large context rendered,
// a large turn decoded at the gateway or applied by the accountant. On a
// small machine two such jobs at once leave no core for anyone else, so
// every tenant's small requests would wait behind one tenant's large ones;
// with the work through one gate, a core stays free. A nil Heavy bounds
// nothing.
type Heavy chan struct{}

// NewHeavy makes n slots; n ≤ 0 makes none (no bound).
func NewHeavy(n int) Heavy {
	if n <= 0 {
		return nil
	}
	return make(Heavy, n)
}

// Hold waits for a slot until ctx ends, calling progress every interval
// while it waits (a bus handler keeps its message in progress), and returns
// the function that gives the slot back.
func (h Heavy) Hold(ctx context.Context, interval time.Duration, progress func() error) (release func(), err error) {
	if h == nil {
		return func() {}, nil
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case h <- struct{}{}:
			return func() { <-h }, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
			if progress != nil {
				if err := progress(); err != nil {
					return nil, err
				}
			}
		}
	}
}
