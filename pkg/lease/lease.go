// Package lease holds a lease row in Postgres while a piece of work runs:
// it renews the row every so often and cancels the work when another
// worker has taken the row over. The compactor, the session-memory service
// and pkg/singlerun hold their leases this way; each keeps its own row and
// its own renewal statement.
package lease

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// ErrLost is what Hold returns when the lease was taken over and the
// holder named no error of its own.
var ErrLost = errors.New("lease: lost to another worker")

// Holder says how to keep one lease.
type Holder struct {
	// Every is how often the lease is renewed: a third of its length, so
	// that two renewals may fail before it runs out.
	Every time.Duration
	// Renew extends the lease. store.ErrNotFound means the lease is no
	// longer this worker's; any other error is logged and retried at the
	// next tick.
	Renew func(ctx context.Context) error
	// Progress, when not nil, is called before each renewal (a bus
	// message's InProgress, so its ack wait follows the lease).
	Progress func() error
	// Lost is returned when the lease was lost (ErrLost when nil).
	Lost error
	// Log receives the failures of Renew and Progress, with Attrs
	// (slog.Default when nil).
	Log   *slog.Logger
	Attrs []any
}

// Hold runs work while keeping the lease. When the lease is lost, work's
// context is cancelled and Hold returns h.Lost, unless work failed of
// something other than that cancellation first; otherwise it returns what
// work returned.
func Hold(ctx context.Context, h Holder, work func(ctx context.Context) error) error {
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	kept := make(chan error, 1)
	go func() { kept <- h.keep(workCtx, cancel) }()
	err := work(workCtx)
	cancel()
	if lost := <-kept; lost != nil && (err == nil || errors.Is(err, context.Canceled)) {
		return lost
	}
	return err
}

// keep renews the lease until ctx ends, and cancels the work when the
// lease is lost.
func (h Holder) keep(ctx context.Context, cancel func()) error {
	log := h.Log
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(h.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if h.Progress != nil {
			if err := h.Progress(); err != nil {
				log.Warn("could not report progress to the bus", h.attrs("err", err)...)
			}
		}
		err := h.Renew(ctx)
		if errors.Is(err, store.ErrNotFound) {
			cancel()
			if h.Lost != nil {
				return h.Lost
			}
			return ErrLost
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("could not renew a lease; retrying", h.attrs("err", err)...)
		}
	}
}

// attrs are h.Attrs followed by more, in a slice of their own.
func (h Holder) attrs(more ...any) []any {
	return append(append([]any(nil), h.Attrs...), more...)
}
