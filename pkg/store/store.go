// Package store is Mnemos's Postgres layer: the connection pool, migrations,
// transactions scoped to one tenant, and the typed reads and writes the
// services need. sqlc's row types stay inside this package.
package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

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

// Store is the pool shared by every service of one process.
type Store struct {
	pool *pgxpool.Pool
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
	return &Store{pool: pool}, nil
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

// InTx runs fn in one transaction scoped to tenant. The tenant is set as the
// transaction's first statement, so it never leaks to another use of the
// pooled connection. The commit error is returned, never lost.
func (s *Store) InTx(ctx context.Context, tenant string, fn func(*Tx) error) (err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store.InTx: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx)) // the original error is what matters
		}
	}()
	if _, err = tx.Exec(ctx, "SELECT set_config('mnemos.tenant_id', $1, true)", tenant); err != nil {
		return fmt.Errorf("store.InTx: set tenant: %w", err)
	}
	if err = fn(&Tx{tx: tx, q: dbsqlc.New(tx), tenant: tenant}); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("store.InTx: commit: %w", err)
	}
	return nil
}

// Tx is one tenant's transaction.
type Tx struct {
	tx     pgx.Tx
	q      *dbsqlc.Queries
	tenant string
}

// Tenant is the tenant this transaction is scoped to.
func (t *Tx) Tenant() string { return t.tenant }

// Savepoint runs fn inside a savepoint: if fn fails, what it wrote is undone
// and the transaction carries on.
func (t *Tx) Savepoint(ctx context.Context, fn func(*Tx) error) error {
	sp, err := t.tx.Begin(ctx)
	if err != nil {
		return fmt.Errorf("store.Savepoint: %w", err)
	}
	if err := fn(&Tx{tx: sp, q: dbsqlc.New(sp), tenant: t.tenant}); err != nil {
		if rbErr := sp.Rollback(ctx); rbErr != nil {
			return errors.Join(err, fmt.Errorf("store.Savepoint: rollback: %w", rbErr))
		}
		return err
	}
	if err := sp.Commit(ctx); err != nil {
		return fmt.Errorf("store.Savepoint: release: %w", err)
	}
	return nil
}

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
