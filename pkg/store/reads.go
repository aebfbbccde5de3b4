package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// Reads are reads of one tenant that do not depend on each other, sent
// together in one round trip by Store.Read instead of one transaction's
// round trip each (BEGIN, every statement, COMMIT).
//
// A read is queued as a function of a Tx (Queue), which runs twice: first
// with a Tx that queues its statements instead of sending them, then, once
// the batch's results are in, with a Tx that hands each statement its
// result. So it must make the same statements both times: it may not
// decide on what it read, only return it. Store.Read reports a read that
// does not.
//
// The statements run in one implicit transaction, as a transaction of
// InTx's would: READ COMMITTED, each statement seeing what was committed
// before it, the tenant set for them alone (row-level security).
type Reads struct {
	tenant string
	batch  pgx.Batch
	reads  []queuedRead
	sent   bool
}

// queuedRead is one queued function, and how many statements it queued.
type queuedRead struct {
	statements []string
	replay     func(*Tx)
}

// NewReads starts reads of tenant. Their first statement sets the tenant;
// sent inside a transaction (Tx.Read), whose BEGIN set it, it is left out.
func NewReads(tenant string) *Reads {
	r := &Reads{tenant: tenant}
	r.batch.Queue("SELECT set_config('mnemos.tenant_id', $1, true)", tenant)
	return r
}

// Future is what a queued read returns, once Store.Read has sent it.
type Future[T any] struct {
	value T
	err   error
	done  bool
}

// Get is the read's result. Before Store.Read sent it, it is an error.
func (f *Future[T]) Get() (T, error) {
	if !f.done {
		var zero T
		return zero, errors.New("store: a queued read was not sent")
	}
	return f.value, f.err
}

// Queue queues read in r: its statements go with the others when
// Store.Read sends r, and its result is the Future's.
func Queue[T any](r *Reads, read func(*Tx) (T, error)) *Future[T] {
	f := &Future[T]{}
	if r.sent {
		f.done, f.err = true, errors.New("store: a read queued after its batch was sent")
		return f
	}
	q := &readQueue{batch: &r.batch}
	_, _ = read(&Tx{q: dbsqlc.New(q), db: q, tenant: r.tenant}) // only its statements count now
	r.reads = append(r.reads, queuedRead{statements: q.statements, replay: func(tx *Tx) {
		f.value, f.err = read(tx)
		f.done = true
	}})
	return f
}

// Read sends r's statements in one round trip and completes their Futures.
// Its error is the batch's (the connection, the tenant); a statement's own
// error is its Future's.
func (s *Store) Read(ctx context.Context, r *Reads) error {
	if r.tenant == "" {
		return errors.New("store.Read: no tenant")
	}
	return send(ctx, s.pool, r, nil, false)
}

// Read sends r's statements in one round trip inside this transaction, and
// completes their Futures, as Store.Read does. Here a queued function may
// also write what it returns (LockFreeSessions creates and locks rows): its
// statements commit or roll back with the transaction, and after a
// statement's error the transaction's later statements fail too, so the
// first error of the Futures, in the order queued, is the one that counts.
func (t *Tx) Read(ctx context.Context, r *Reads) error {
	if r.tenant != t.tenant {
		return fmt.Errorf("store.Tx.Read: reads of tenant %q in a transaction of %q", r.tenant, t.tenant)
	}
	switch {
	case r.tenant == "":
		return errors.New("store.Tx.Read: no tenant")
	case t.committed:
		return errCommitted
	case t.conn == nil:
		return errNotInTx
	}
	return send(ctx, t.conn, r, t.takeBegin(), true)
}

// send sends r on conn (the pool, or a transaction) and completes its
// Futures. begin, when there is any, is the transaction's BEGIN, sent in
// front of r. In a transaction (inTx) the tenant was set by its BEGIN,
// now or before, and r's own setting of it is left out.
func send(ctx context.Context, conn interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, r *Reads, begin []*pgx.QueuedQuery, inTx bool) error {
	if r.sent {
		return errors.New("store.Read: the reads were sent already")
	}
	r.sent = true
	b := &r.batch
	if inTx {
		b = &pgx.Batch{QueuedQueries: r.batch.QueuedQueries[1:]}
	}
	br := conn.SendBatch(ctx, prefixed(begin, b))
	err := execBegin(br, len(begin))
	switch {
	case err != nil:
		err = fmt.Errorf("store.Read: %w", err)
	case inTx:
	default:
		if _, err = br.Exec(); err != nil {
			err = fmt.Errorf("store.Read: setting the tenant: %w", err)
		}
	}
	for i, q := range r.reads {
		if err != nil {
			q.replay(&Tx{q: dbsqlc.New(failing{err}), db: failing{err}, tenant: r.tenant})
			continue
		}
		rr := &readResults{br: br, left: q.statements}
		q.replay(&Tx{q: dbsqlc.New(rr), db: rr, tenant: r.tenant})
		switch {
		case rr.err != nil:
			err = fmt.Errorf("store.Read: read %d: %w", i, rr.err)
		case len(rr.left) > 0:
			err = fmt.Errorf("store.Read: read %d made fewer statements than it queued", i)
		}
	}
	if cerr := br.Close(); cerr != nil && err == nil {
		var pgErr *pgconn.PgError
		if !errors.As(cerr, &pgErr) { // a statement's error is its read's
			err = fmt.Errorf("store.Read: %w", cerr)
		}
	}
	return err
}

// errQueued is what a read's statements answer while they are queued.
var errQueued = errors.New("store: queued, not sent yet")

// readQueue is a dbsqlc.DBTX that queues statements into a batch.
type readQueue struct {
	batch      *pgx.Batch
	statements []string
}

func (q *readQueue) queue(sql string, args []any) {
	q.batch.Queue(sql, args...)
	q.statements = append(q.statements, sql)
}

func (q *readQueue) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.queue(sql, args)
	return pgconn.CommandTag{}, nil
}

func (q *readQueue) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	q.queue(sql, args)
	return nil, errQueued
}

func (q *readQueue) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	q.queue(sql, args)
	return errRow{errQueued}
}

// readResults is a dbsqlc.DBTX that answers a read's statements, in order,
// from the batch's results.
type readResults struct {
	br   pgx.BatchResults
	left []string // the statements queued and not yet answered
	err  error
}

// next reports whether sql is the next statement queued.
func (r *readResults) next(sql string) bool {
	switch {
	case r.err != nil:
	case len(r.left) == 0:
		r.err = errors.New("it made more statements than it queued")
	case r.left[0] != sql:
		r.err = errors.New("it made other statements than it queued")
	default:
		r.left = r.left[1:]
		return true
	}
	return false
}

func (r *readResults) Exec(_ context.Context, sql string, _ ...any) (pgconn.CommandTag, error) {
	if !r.next(sql) {
		return pgconn.CommandTag{}, r.err
	}
	return r.br.Exec()
}

func (r *readResults) Query(_ context.Context, sql string, _ ...any) (pgx.Rows, error) {
	if !r.next(sql) {
		return nil, r.err
	}
	return r.br.Query()
}

func (r *readResults) QueryRow(_ context.Context, sql string, _ ...any) pgx.Row {
	if !r.next(sql) {
		return errRow{r.err}
	}
	return r.br.QueryRow()
}

// failing is a dbsqlc.DBTX whose every statement fails with err: the reads
// of a batch that could not be sent.
type failing struct{ err error }

func (f failing) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, f.err
}
func (f failing) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, f.err }
func (f failing) QueryRow(context.Context, string, ...any) pgx.Row        { return errRow(f) }
