package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A transaction's BEGIN is not sent on its own. It waits for the
// transaction's first round trip and goes in front of it, in the same batch:
// its first statement, its first Read or its first Pipeline. A transaction
// that sends nothing sends no BEGIN and no COMMIT.

// beginStatements are what begins a transaction of tenant: BEGIN and the
// tenant's setting (row-level security), and, when wait is above zero (a
// batch's transaction, InTxWaiting), the bound on its lock waits and its
// plans (batchPlans), set in the same statement.
func beginStatements(tenant string, wait time.Duration) []*pgx.QueuedQuery {
	var b pgx.Batch
	b.Queue("BEGIN")
	if wait <= 0 {
		b.Queue("SELECT set_config('mnemos.tenant_id', $1, true)", tenant)
		return b.QueuedQueries
	}
	b.Queue(`SELECT set_config('mnemos.tenant_id', $1, true), set_config('lock_timeout', $2, true),
		set_config('plan_cache_mode', 'force_generic_plan', true)`, tenant, strconv.FormatInt(max(wait.Milliseconds(), 1), 10))
	return b.QueuedQueries
}

// batchPlans: a batch's statements take arrays, one element for each of the
// batch's sessions, messages or tool results, whose lengths vary from one
// batch to the next. Postgres plans a prepared statement again at each call
// for as long as the plan it makes for the call's own arrays looks cheaper
// than its generic plan, and for an array of one or a few elements it always
// does: at low load, when a batch holds one event or a few, the lock of its
// sessions, the reads of their hashes and offload decisions and the update
// of their rows were planned anew every time, about a seventh of Postgres's
// CPU in a round through the Messages API proxy (`mnemos bench`,
// docs/performance.md). Their generic plans are the same lookups by index
// (TestBatchPlansAreIndexLookups), so a batch's transaction runs on them:
// plan_cache_mode, for the transaction alone.

// takeBegin returns the statements that begin the transaction if they were
// not sent yet, and counts them as sent: the caller puts them in front of
// its batch.
func (t *Tx) takeBegin() []*pgx.QueuedQuery {
	if t.begun {
		return nil
	}
	t.begun = true
	return t.begin
}

// withBegin is b with the transaction's BEGIN in front, if it was not sent
// yet, and how many statements that put there.
func (t *Tx) withBegin(b *pgx.Batch) (*pgx.Batch, int) {
	begin := t.takeBegin()
	return prefixed(begin, b), len(begin)
}

// prefixed is b with begin in front of its statements; b itself when begin
// is empty.
func prefixed(begin []*pgx.QueuedQuery, b *pgx.Batch) *pgx.Batch {
	if len(begin) == 0 {
		return b
	}
	return &pgx.Batch{QueuedQueries: append(slices.Clip(begin), b.QueuedQueries...)}
}

// execBegin reads the results of a batch's first n statements, its BEGIN.
func execBegin(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	return nil
}

// txConn is what a Tx's statements are sent to: its connection, with the
// transaction's BEGIN in front of the first of them.
type txConn struct{ t *Tx }

// first sends the transaction's BEGIN and sql together, and returns the
// batch's results from sql on. It returns nil when the BEGIN was sent.
func (c txConn) first(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b, n := c.t.withBegin(&pgx.Batch{})
	if n == 0 {
		return nil, nil
	}
	b.Queue(sql, args...)
	br := c.t.conn.SendBatch(ctx, b)
	if err := execBegin(br, n); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

func (c txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := c.first(ctx, sql, args)
	switch {
	case err != nil:
		return pgconn.CommandTag{}, err
	case br == nil:
		return c.t.conn.Exec(ctx, sql, args...)
	}
	tag, err := br.Exec()
	return tag, cmp.Or(err, br.Close())
}

func (c txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := c.first(ctx, sql, args)
	switch {
	case err != nil:
		return nil, err
	case br == nil:
		return c.t.conn.Query(ctx, sql, args...)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, cmp.Or(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (c txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := c.first(ctx, sql, args)
	switch {
	case err != nil:
		return errRow{err}
	case br == nil:
		return c.t.conn.QueryRow(ctx, sql, args...)
	}
	return batchRow{row: br.QueryRow(), br: br}
}

// batchRows are the rows of a batch's last statement: closing them closes
// the batch, whose error they report.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err, r.br = r.br.Close(), nil
	}
}

func (r *batchRows) Err() error { return cmp.Or(r.Rows.Err(), r.err) }

// batchRow is the row of a batch's last statement: scanning it closes the
// batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	return cmp.Or(err, r.br.Close())
}
