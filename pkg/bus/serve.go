package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultDrain is how long a stopping service may take to finish the
// messages it holds and its background work, unless Service.Drain says
// otherwise.
const DefaultDrain = 60 * time.Second

// Consumer is one durable consumer of a service: what it reads, and what
// handles each message.
type Consumer struct {
	Spec    ConsumerSpec
	Handler Handler
}

// Service is what Serve runs for one target: its consumers, and background
// loops beside them (sweeps, scans).
type Service struct {
	// Name is the target, for errors.
	Name      string
	Consumers []Consumer
	// Loops run until the context they are given ends; work they started
	// may go on within the drain.
	Loops []func(ctx context.Context)
	// Stopping, if set, is called once when the service's context ends,
	// before its consumers stop: the service starts no new work.
	Stopping func()
	// Wait, if set, waits for work the service runs outside its handlers
	// and loops (a dream started by a scan) once they have stopped; it
	// must return when its ctx ends.
	Wait func(ctx context.Context)
	// Drain bounds the whole shutdown: consumers drained, loops returned,
	// Wait returned. Default DefaultDrain.
	Drain time.Duration
}

// Serve runs svc until ctx ends: it starts every consumer (Run) and loop,
// then, when ctx ends, calls Stopping, stops the consumers (each finishes
// the messages it holds), waits for the loops and for Wait, all within one
// Drain. It returns the first error of starting or stopping.
func (b *Bus) Serve(ctx context.Context, svc Service) error {
	drain := svc.Drain
	if drain <= 0 {
		drain = DefaultDrain
	}
	var runners []*Runner
	for _, c := range svc.Consumers {
		r, err := b.Run(ctx, c.Spec, c.Handler)
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
			defer cancel()
			for _, r := range runners {
				_ = r.Stop(stopCtx) //nolint:errcheck // the start failure is the error to report
			}
			return fmt.Errorf("%s: %w", svc.Name, err)
		}
		runners = append(runners, r)
	}
	var loops sync.WaitGroup
	for _, loop := range svc.Loops {
		loops.Go(func() { loop(ctx) })
	}

	<-ctx.Done()
	if svc.Stopping != nil {
		svc.Stopping()
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	errs := make([]error, len(runners))
	var stops sync.WaitGroup
	for i, r := range runners {
		stops.Go(func() { errs[i] = r.Stop(stopCtx) })
	}
	stops.Wait()
	looped := make(chan struct{})
	go func() { loops.Wait(); close(looped) }()
	select {
	case <-looped:
	case <-stopCtx.Done():
		errs = append(errs, fmt.Errorf("background work still running after %s", drain))
	}
	if svc.Wait != nil {
		svc.Wait(stopCtx)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: stop: %w", svc.Name, err)
	}
	return nil
}
