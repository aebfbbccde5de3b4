package proxy

import "sync"

// roundRecords runs the proxy's round records (recordRound) after the
// client has its answer, off the request: a streamed answer ends when its
// handler returns, and a client's next request on the same connection is
// read only then, so a record made inside the handler would be part of the
// client's wait. The records of one session run one after another, in the
// order their answers came; Drain waits for all of them.
type roundRecords struct {
	mu      sync.Mutex
	last    map[string]chan struct{} // session → closed when its latest record has run
	drained bool
	wg      sync.WaitGroup
}

// run runs record after the records queued before it for the same
// session, in the background; once Drain began, in the caller.
func (q *roundRecords) run(session string, record func()) {
	q.mu.Lock()
	prev := q.last[session]
	if q.drained {
		q.mu.Unlock()
		if prev != nil {
			<-prev
		}
		record()
		return
	}
	mine := make(chan struct{})
	if q.last == nil {
		q.last = map[string]chan struct{}{}
	}
	q.last[session] = mine
	q.wg.Add(1)
	q.mu.Unlock()
	go func() {
		defer q.wg.Done()
		if prev != nil {
			<-prev
		}
		record()
		q.mu.Lock()
		if q.last[session] == mine {
			delete(q.last, session)
		}
		q.mu.Unlock()
		close(mine)
	}()
}

// drain makes later records run in their callers and waits for the
// queued ones.
func (q *roundRecords) drain() {
	q.mu.Lock()
	q.drained = true
	q.mu.Unlock()
	q.wg.Wait()
}

// Drain waits until every round the proxy answered is recorded; a round
// answered after it began is recorded before its handler returns. Call it
// once the HTTP server has shut down, before the store closes.
func (h *Handler) Drain() { h.records.drain() }
