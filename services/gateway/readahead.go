package gateway

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/mnemos-ai/mnemos/pkg/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// aheadRead is readContextAhead's one round trip: the session's row, what
// the gateway's context cache lacks of its context (sessionctx.Ahead) and
// its last context snapshot.
type aheadRead struct {
	tenant, id string
	reads      *store.Reads
	row        *store.Future[store.Session]
	ahead      *sessionctx.Ahead
	snap       *store.Future[store.ContextSnapshot]
	err        error         // the round trip's, once done is closed
	done       chan struct{} // closed once the read is answered
	taken      atomic.Bool   // a render has used it (takeEarlyRead)
}

// queueAheadRead queues the session's aheadRead, unsent; nil when the
// gateway caches nothing of its context (the read could not be enough:
// readContext reads in a transaction then).
func (g *Gateway) queueAheadRead(ctx context.Context, tenant, id string) *aheadRead {
	reads := store.NewReads(tenant)
	row := store.Queue(reads, func(tx *store.Tx) (store.Session, error) { return tx.Session(ctx, id) })
	ahead := g.contexts.Ahead(ctx, reads, tenant, id) // after the row (see Ahead)
	if ahead == nil {
		return nil
	}
	snap := store.Queue(reads, func(tx *store.Tx) (store.ContextSnapshot, error) { return tx.ContextSnapshot(ctx, id) })
	return &aheadRead{tenant: tenant, id: id, reads: reads, row: row, ahead: ahead, snap: snap, done: make(chan struct{})}
}

// send sends the read and waits for its answer.
func (a *aheadRead) send(ctx context.Context, s *store.Store) {
	defer close(a.done)
	defer func() {
		// Sent early, off the handler (readEarly): a panic here would end
		// the process with every request in flight.
		if p := recover(); p != nil {
			a.err = fmt.Errorf("reading the context of session %s: panic: %v", a.id, p)
		}
	}()
	a.err = s.Read(ctx, a.reads)
}

// wait waits for the read's answer; nothing for a nil read.
func (a *aheadRead) wait() {
	if a != nil {
		<-a.done
	}
}

// readEarly sends the aheadRead of a proxied request's session as soon as
// the request is admitted, while its body is still being read and checked:
// the round trip to Postgres then overlaps that work instead of following
// it. The render takes it with takeEarlyRead; what it reads is what a read
// sent later would have found, short of what committed in between, which
// the client's own messages cover (clientTail) as for any round sent
// before the one before is applied. nil when there is nothing to send
// early.
func (g *Gateway) readEarly(ctx context.Context, tenant, id string) *aheadRead {
	a := g.queueAheadRead(ctx, tenant, id)
	if a != nil {
		go a.send(ctx, g.store)
	}
	return a
}

type earlyReadKey struct{}

// withEarlyRead is ctx carrying a read sent early (readEarly), for the
// render of that request.
func withEarlyRead(ctx context.Context, a *aheadRead) context.Context {
	if a == nil {
		return ctx
	}
	return context.WithValue(ctx, earlyReadKey{}, a)
}

// takeEarlyRead is the early read ctx carries for the session, answered,
// once: a render that reads again (after a micro-compaction, a compaction
// or a cut) reads what it changed. nil when there is none to take.
func takeEarlyRead(ctx context.Context, tenant, id string) *aheadRead {
	a, _ := ctx.Value(earlyReadKey{}).(*aheadRead)
	if a == nil || a.tenant != tenant || a.id != id || !a.taken.CompareAndSwap(false, true) {
		return nil
	}
	a.wait()
	return a
}
