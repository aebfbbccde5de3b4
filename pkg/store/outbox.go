package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// OutboxChannel is the Postgres NOTIFY channel that wakes outbox relays.
const OutboxChannel = "mnemos_outbox"

// OutboxEvent is an event written in a transaction, to be published after it commits.
type OutboxEvent struct {
	ID       int64
	TenantID string
	// Subject is the bus subject without any namespace: "<kind>.<tenant>.<session>".
	Subject string
	// MsgID is deterministic, so a republish after a crash is deduplicated.
	MsgID   string
	Payload []byte
	Headers map[string]string
}

// Enqueue writes an event to the outbox of this transaction and wakes the relays on commit.
func (t *Tx) Enqueue(ctx context.Context, e OutboxEvent) error {
	hdr, err := headersJSON(e)
	if err != nil {
		return fmt.Errorf("store.Enqueue: %w", err)
	}
	err = t.q.OutboxInsert(ctx, dbsqlc.OutboxInsertParams{
		TenantID: t.tenant, Subject: e.Subject, MsgID: e.MsgID, Payload: e.Payload, Headers: hdr,
	})
	if err != nil {
		return fmt.Errorf("store.Enqueue: %w", err)
	}
	return t.notifyRelays(ctx)
}

// EnqueueAll is Enqueue for many events in one statement; they are
// published in the order given.
func (t *Tx) EnqueueAll(ctx context.Context, es []OutboxEvent) error {
	if len(es) == 0 {
		return nil
	}
	p := dbsqlc.OutboxInsertManyParams{TenantID: t.tenant}
	for _, e := range es {
		hdr, err := headersJSON(e)
		if err != nil {
			return fmt.Errorf("store.EnqueueAll: %w", err)
		}
		p.Subjects = append(p.Subjects, e.Subject)
		p.MsgIds = append(p.MsgIds, e.MsgID)
		p.Payloads = append(p.Payloads, e.Payload)
		p.Headers = append(p.Headers, string(hdr))
	}
	if err := t.q.OutboxInsertMany(ctx, p); err != nil {
		return fmt.Errorf("store.EnqueueAll: %w", err)
	}
	return t.notifyRelays(ctx)
}

// headersJSON is how an outbox row keeps an event's headers.
func headersJSON(e OutboxEvent) ([]byte, error) {
	if len(e.Headers) == 0 {
		return []byte("{}"), nil
	}
	hdr, err := json.Marshal(e.Headers)
	if err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	return hdr, nil
}

// notifyRelays has the relays woken once the transaction commits.
func (t *Tx) notifyRelays(context.Context) error {
	t.enqueued = true
	return nil
}

// waker wakes the outbox relays after commits that wrote to the outbox:
// those of this process at once (the channels ListenOutbox serves), and
// every process's with a NOTIFY on the outbox channel.
//
// The NOTIFY is its own statement, after the commit, and at most one is in
// flight per process: a commit that comes while one is sent has one more
// sent after it. A transaction that notifies holds a lock every notifying
// transaction of the database takes, through its commit's flush to disk,
// so a NOTIFY inside each writing transaction made their commits go one
// at a time. A wake-up lost to a crash between the commit and the NOTIFY
// costs a relay's poll (outbox.Config.Poll): the rows are there.
//
// The NOTIFY names the store that sent it (sender), and a store's own
// LISTEN passes over its notifications: its relays were woken at the
// commit already, and woken again by the NOTIFY they ran a round that
// mostly found nothing, a claim and a commit.
type waker struct {
	sender  string // this store's name in the NOTIFYs it sends
	mu      sync.Mutex
	sending bool // a NOTIFY is on its way
	again   bool // a commit came while it was: send one more after it
	local   map[chan<- struct{}]struct{}
}

// wakeRelays wakes the relays after a commit that wrote to the outbox.
func (s *Store) wakeRelays() {
	w := &s.waker
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.local {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	if w.sending {
		w.again = true
		return
	}
	w.sending = true
	go s.notifyLoop()
}

// notifyLoop sends the NOTIFY, and again while commits came meanwhile.
func (s *Store) notifyLoop() {
	w := &s.waker
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = dbsqlc.New(s.pool).OutboxNotify(ctx, w.sender) // best effort: the relays poll too
		cancel()
		w.mu.Lock()
		if !w.again {
			w.sending = false
			w.mu.Unlock()
			return
		}
		w.again = false
		w.mu.Unlock()
	}
}

// relayBegin begins a relay's transaction, which commits without waiting
// for its flush to disk: all it writes is the deletion of rows it
// published, and a deletion lost to a crash only has those rows published
// again, under the message ids JetStream deduplicates (and consumers are
// idempotent past its window).
func relayBegin() []*pgx.QueuedQuery {
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit TO off")
	return b.QueuedQueries
}

// RelayOutbox claims up to max of the oldest outbox rows, hands them to
// publish, and deletes those publish reports as done, in one transaction
// of two round trips: BEGIN with the claim, the deletion with COMMIT.
// The rows are every tenant's: the transaction names no tenant and reaches
// them only through the owner's functions.
// Rows of a failed or partial publish stay for the next round. It returns how
// many rows were published.
func (s *Store) RelayOutbox(ctx context.Context, max int32, publish func(context.Context, []OutboxEvent) (done []int64, err error)) (int, error) {
	var n int
	err := s.run(ctx, "", relayBegin(), func(tx *Tx) error {
		rows, err := tx.q.OutboxClaim(ctx, max)
		if err != nil {
			return fmt.Errorf("store.RelayOutbox: claim: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		events := make([]OutboxEvent, 0, len(rows))
		for _, r := range rows {
			e := OutboxEvent{ID: r.ID, TenantID: r.TenantID, Subject: r.Subject, MsgID: r.MsgID, Payload: r.Payload}
			if len(r.Headers) > 2 {
				if err := json.Unmarshal(r.Headers, &e.Headers); err != nil {
					return fmt.Errorf("store.RelayOutbox: row %d headers: %w", r.ID, err)
				}
			}
			events = append(events, e)
		}
		done, pubErr := publish(ctx, events)
		if pubErr != nil && len(done) == 0 {
			return fmt.Errorf("store.RelayOutbox: publish: %w", pubErr)
		}
		if len(done) > 0 {
			err := tx.PipelineCommit(ctx, func(p *Tx) error { return p.q.OutboxDelete(ctx, done) })
			if err != nil {
				return fmt.Errorf("store.RelayOutbox: delete: %w", err)
			}
		}
		n = len(done)
		return nil
	})
	return n, err
}

// OutboxBacklog counts unpublished outbox rows of every tenant, through the
// owner's function.
func (s *Store) OutboxBacklog(ctx context.Context) (int64, error) {
	n, err := dbsqlc.New(s.pool).OutboxPending(ctx)
	if err != nil {
		return 0, fmt.Errorf("store.OutboxBacklog: %w", err)
	}
	return n, nil
}

// ListenOutbox holds a dedicated connection LISTENing on the outbox channel
// and signals wake (without blocking) on every notification, until ctx ends
// or the connection fails.
func (s *Store) ListenOutbox(ctx context.Context, wake chan<- struct{}) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store.ListenOutbox: acquire: %w", err)
	}
	defer conn.Release()
	s.waker.mu.Lock()
	s.waker.local[wake] = struct{}{}
	s.waker.mu.Unlock()
	defer func() {
		s.waker.mu.Lock()
		delete(s.waker.local, wake)
		s.waker.mu.Unlock()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+OutboxChannel); err != nil {
		return fmt.Errorf("store.ListenOutbox: listen: %w", err)
	}
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			// A connection interrupted mid-wait is not reusable for LISTEN;
			// closing it is all that is left to do, whatever that returns.
			_ = conn.Conn().PgConn().Close(context.WithoutCancel(ctx))
			return fmt.Errorf("store.ListenOutbox: %w", err)
		}
		if n.Payload == s.waker.sender {
			continue // this store's own commit, whose relays were woken at it
		}
		select {
		case wake <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}
