// Package store is Mnemos's Postgres layer: the connection pool, migrations,
// transactions scoped to one tenant, and the typed reads and writes the
// services need. sqlc's row types stay inside this package.
package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/mnemos-ai/mnemos/migrations"
	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// ErrNotFound is returned when a row asked for by key does not exist (or
// belongs to another tenant, which is the same thing to the caller).
var ErrNotFound = errors.New("not found")

// ErrUnknownTenant is returned when a write names a tenant that was never created.
var ErrUnknownTenant = errors.New("unknown tenant")

// Store is the pool shared by every service of one process.
type Store struct {
	pool  *pgxpool.Pool
	waker waker // wakes the outbox relays after a transaction that wrote to the outbox
}

// Config says where Postgres is and how large the pool may grow.
type Config struct {
	URL      string
	MaxConns int32
	// Tracer, when set, traces every query (pgx's QueryTracer).
	Tracer pgx.QueryTracer
}

// Open connects and pings.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("store.Open: parse url: %w", err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	if cfg.Tracer != nil {
		pcfg.ConnConfig.Tracer = cfg.Tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("store.Open: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store.Open: ping %s: %w", Redact(cfg.URL), err)
	}
	return &Store{pool: pool, waker: waker{sender: rand.Text(), local: map[chan<- struct{}]struct{}{}}}, nil
}

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Pool exposes the pool for benchmarks and health checks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Ping checks that a connection can be had and answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Migrate brings the schema at url up to date with the embedded migrations.
// Concurrent migrators serialize on a Postgres advisory lock.
func Migrate(ctx context.Context, url string, log *slog.Logger) error {
	db, err := openSQL(url)
	if err != nil {
		return err
	}
	defer db.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("store.Migrate: locker: %w", err)
	}
	opts := []goose.ProviderOption{goose.WithSessionLocker(locker)}
	if log != nil {
		opts = append(opts, goose.WithSlog(log))
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS, opts...)
	if err != nil {
		return fmt.Errorf("store.Migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store.Migrate: up: %w", err)
	}
	return nil
}

// Ping connects to url once and closes the connection.
func Ping(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// EnsureDatabase creates the database named in url when it does not exist,
// connecting to the server's "postgres" database to do so.
func EnsureDatabase(ctx context.Context, dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return fmt.Errorf("store.EnsureDatabase: parse url: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return fmt.Errorf("store.EnsureDatabase: url names no database")
	}
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("store.EnsureDatabase: connect: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("store.EnsureDatabase: %w", err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // created concurrently
		return nil
	}
	if err != nil {
		return fmt.Errorf("store.EnsureDatabase: create %s: %w", name, err)
	}
	return nil
}

// Redact hides the password in a connection URL for logs.
func Redact(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "(unparseable url)"
	}
	return u.Redacted()
}

// InTx runs fn in one transaction scoped to tenant. The tenant is set
// right after BEGIN, for the transaction alone, so it never leaks to another
// use of the pooled connection; both go in front of the transaction's first
// round trip. The commit error is returned, never lost.
//
// InTx is the one door to tenant-owned rows: row-level security (migration
// 00009) shows a transaction only the rows of the tenant it names, and a
// transaction that names none sees and writes nothing. Work across tenants
// does not go through InTx but through the owner's narrow SECURITY DEFINER
// functions (RelayOutbox, LookupAPIKey, StalledSessions,
// StaleNotesClaims), each returning only what its caller needs, after which
// every tenant's part is handled in a transaction of that tenant.
func (s *Store) InTx(ctx context.Context, tenant string, fn func(*Tx) error) (err error) {
	if tenant == "" {
		return errors.New("store.InTx: no tenant")
	}
	return s.run(ctx, tenant, beginStatements(tenant, 0), fn)
}

// InTxWaiting is InTx with every lock wait of the transaction bounded by
// wait (lock_timeout, set with BEGIN): a statement that would wait longer
// fails, and the transaction is over. For a transaction that should rather
// give up than queue behind another (a batch of turns). Its statements run
// on the generic plans of their prepared statements (batchPlans, begin.go).
func (s *Store) InTxWaiting(ctx context.Context, tenant string, wait time.Duration, fn func(*Tx) error) error {
	if tenant == "" {
		return errors.New("store.InTx: no tenant")
	}
	return s.run(ctx, tenant, beginStatements(tenant, max(wait, time.Millisecond)), fn)
}

// run runs fn in one transaction begun by begin, sent with the
// transaction's first round trip (begin.go).
func (s *Store) run(ctx context.Context, tenant string, begin []*pgx.QueuedQuery, fn func(*Tx) error) (err error) {
	// The transaction is driven on a pooled connection rather than through
	// pgx.Tx, so that its BEGIN can travel with its first statements and its
	// COMMIT with its last writes (PipelineCommit). A connection given back
	// inside a transaction (a panic in fn) is closed by the pool, never
	// reused.
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store.InTx: begin: %w", err)
	}
	defer c.Release()
	t := &Tx{conn: c, tenant: tenant, begin: begin}
	t.q = dbsqlc.New(txConn{t})
	defer func() {
		if err != nil {
			rollback(ctx, c) // the original error is what matters
		}
	}()
	if err = fn(t); err != nil {
		return err
	}
	if t.begun && !t.committed {
		tag, cerr := c.Exec(ctx, "COMMIT")
		if cerr = cmp.Or(cerr, committed(tag)); cerr != nil {
			return fmt.Errorf("store.InTx: commit: %w", cerr)
		}
	}
	if t.enqueued {
		s.wakeRelays()
	}
	return nil
}

// committed checks a COMMIT's tag: Postgres answers the COMMIT of a
// transaction that had failed with ROLLBACK, and no error.
func committed(tag pgconn.CommandTag) error {
	if tag.String() == "ROLLBACK" {
		return errors.New("the transaction had failed and was rolled back")
	}
	return nil
}

// rollback ends the transaction open on c, if any. A connection that cannot
// roll back is closed, so the pool never hands out one left in a transaction.
func rollback(ctx context.Context, c *pgxpool.Conn) {
	pc := c.Conn().PgConn()
	if pc.IsClosed() || pc.TxStatus() == 'I' {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil {
		_ = c.Conn().Close(ctx)
	}
}

// Tx is one tenant's transaction.
type Tx struct {
	conn      *pgxpool.Conn // the transaction's connection (nil for the reads of Reads)
	q         *dbsqlc.Queries
	db        dbsqlc.DBTX // what q sends to, for the reads of Reads (conn is nil)
	tenant    string
	begin     []*pgx.QueuedQuery // what begins the transaction, sent with its first round trip
	begun     bool               // begin was sent
	enqueued  bool               // the transaction wrote to the outbox: the relays are woken once it commits
	committed bool               // PipelineCommit sent the COMMIT: nothing more can run in the transaction
}

// Tenant is the tenant this transaction is scoped to.
func (t *Tx) Tenant() string { return t.tenant }

// Pipeline runs fn with a Tx whose writes are queued instead of sent, then
// sends them all in one round trip and returns the first error. fn may only
// write: a read inside it fails.
func (t *Tx) Pipeline(ctx context.Context, fn func(*Tx) error) error {
	if t.conn == nil {
		return errNotInTx
	}
	q, err := t.queued(fn)
	if err != nil || q.batch.Len() == 0 {
		return err
	}
	b, _ := t.withBegin(&q.batch)
	if err := t.conn.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("store.Pipeline: %w", err)
	}
	return nil
}

// PipelineCommit is Pipeline with the transaction's COMMIT sent last in the
// same round trip: a transaction whose last step is its writes commits
// without waiting for them first. It must be the transaction's last step;
// anything run in the transaction after it fails.
func (t *Tx) PipelineCommit(ctx context.Context, fn func(*Tx) error) error {
	if t.conn == nil {
		return errNotInTx
	}
	q, err := t.queued(fn)
	if err != nil {
		return err
	}
	q.batch.Queue("COMMIT")
	b, _ := t.withBegin(&q.batch)
	br := t.conn.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	for range b.Len() {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err = cmp.Or(err, committed(tag)); err != nil {
		return fmt.Errorf("store.PipelineCommit: %w", err)
	}
	t.committed = true
	t.q = dbsqlc.New(committedDB{})
	return nil
}

// queued runs fn with a Tx whose writes are queued instead of sent, and
// returns the queue.
func (t *Tx) queued(fn func(*Tx) error) (*queue, error) {
	if t.committed {
		return nil, errCommitted
	}
	q := &queue{}
	inner := &Tx{q: dbsqlc.New(q), tenant: t.tenant} // no connection: it only queues
	if err := fn(inner); err != nil {
		return nil, err
	}
	if q.err != nil {
		return nil, q.err
	}
	t.enqueued = t.enqueued || inner.enqueued
	return q, nil
}

var (
	errCommitted = errors.New("store: the transaction was committed by PipelineCommit")
	errNotInTx   = errors.New("store: not in a transaction (a pipeline's Tx only queues writes)")
)

// committedDB is what a Tx sends to once PipelineCommit has committed it:
// every statement fails rather than running outside the transaction.
type committedDB struct{}

func (committedDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errCommitted
}

func (committedDB) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errCommitted
}

func (committedDB) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{errCommitted} }

// queue is a dbsqlc.DBTX that collects statements into a batch.
type queue struct {
	batch pgx.Batch
	err   error
}

func (q *queue) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q.batch.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (q *queue) Query(context.Context, string, ...any) (pgx.Rows, error) {
	q.err = errors.New("store.Pipeline: a read cannot be pipelined")
	return nil, q.err
}

func (q *queue) QueryRow(context.Context, string, ...any) pgx.Row {
	q.err = errors.New("store.Pipeline: a read cannot be pipelined")
	return errRow{q.err}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// HashAPIKey is how API keys are stored and looked up.
func HashAPIKey(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

func openSQL(dbURL string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("store: parse url: %w", err)
	}
	return stdlib.OpenDB(*cfg), nil
}
