// Package pgtest gives each test its own Postgres database, cloned from a
// template migrated once per schema version, so tests run in parallel on a
// real server without seeing each other's rows.
//
// The databases are set up as production runs them: the template is
// migrated by OwnerRole, an ordinary role (no superuser, no BYPASSRLS) that
// owns every table and function, and tests connect as store.AppRole, so the
// whole suite runs under row-level security. AdminURL and Admin give a test
// the server's administrator on its database (a superuser, which row-level
// security does not apply to) for what the services may not do. The two
// roles log in with their names as passwords; pgtest creates them on the
// test server when missing, which needs the configured URL to be a superuser.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/mnemos-ai/mnemos/internal/testkit/testenv"
	"github.com/mnemos-ai/mnemos/migrations"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// LocalURL is the machine's own server, the last place tests look.
const LocalURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Missing is what a test run says when no Postgres can be reached.
const Missing = "no Postgres for the tests: set " + testenv.DatabaseURLVar +
	", or start one with `docker compose up -d postgres`, or install and start the Debian packages " +
	"(`apt-get install -y postgresql && pg_ctlcluster --skip-systemctl-redirect 15 main start`)"

// OwnerRole owns the test databases' schema: it runs the migrations.
const OwnerRole = "mnemos_owner"

type server struct {
	adminURL string
	template string
	err      error
}

var shared = sync.OnceValue(func() server {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := adminURL(ctx)
	if err != nil {
		return server{err: err}
	}
	tpl, err := ensureTemplate(ctx, admin)
	return server{adminURL: admin, template: tpl, err: err}
})

// URL creates a fresh, migrated database for t and returns the URL the
// services use for it: store.AppRole's. The database is dropped when t ends.
// A test run without Postgres fails here.
func URL(t testing.TB) string {
	t.Helper()
	srv := shared()
	if srv.err != nil {
		t.Fatalf("pgtest: %v", srv.err)
	}
	ctx := context.Background()
	name := "mnemos_test_" + randomHex(6)
	conn, err := pgx.Connect(ctx, srv.adminURL)
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(ctx)
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s OWNER %s", name, srv.template, OwnerRole))
		var pgErr *pgconn.PgError
		// 55006: the template is briefly in use by a concurrent clone.
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || attempt == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, srv.adminURL)
		if err != nil {
			t.Errorf("pgtest: connect for drop: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop %s: %v", name, err)
		}
	})
	return withDatabase(asRole(srv.adminURL, store.AppRole), name)
}

// AdminURL is the URL of the server's administrator on the database of
// dbURL (a URL from URL): a superuser, to which row-level security does not
// apply.
func AdminURL(t testing.TB, dbURL string) string {
	t.Helper()
	srv := shared()
	if srv.err != nil {
		t.Fatalf("pgtest: %v", srv.err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return withDatabase(srv.adminURL, strings.TrimPrefix(u.Path, "/"))
}

// OwnerURL is the URL of OwnerRole, the owner of the schema, on the
// database of dbURL (a URL from URL).
func OwnerURL(t testing.TB, dbURL string) string {
	t.Helper()
	return asRole(AdminURL(t, dbURL), OwnerRole)
}

// Admin is a pool as the server's administrator on st's database, closed
// when t ends: for setting up or inspecting rows as no service may. A test
// gets one pool per store however often it asks (a test that polls asks
// every few milliseconds), of at most 4 connections: the server's are
// shared by every test package running.
func Admin(t testing.TB, st *store.Store) *pgxpool.Pool {
	t.Helper()
	key := adminKey{t, st}
	admins.Lock()
	defer admins.Unlock()
	if pool, ok := admins.pools[key]; ok {
		return pool
	}
	srv := shared()
	if srv.err != nil {
		t.Fatalf("pgtest: %v", srv.err)
	}
	var name string
	if err := st.Pool().QueryRow(context.Background(), "SELECT current_database()").Scan(&name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg, err := pgxpool.ParseConfig(withDatabase(srv.adminURL, name))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	admins.pools[key] = pool
	t.Cleanup(func() {
		admins.Lock()
		delete(admins.pools, key)
		admins.Unlock()
		pool.Close()
	})
	return pool
}

// adminKey names the administrator's pool of a test on a store.
type adminKey struct {
	t  testing.TB
	st *store.Store
}

// admins are the administrator's pools open, by test and store.
var admins = struct {
	sync.Mutex
	pools map[adminKey]*pgxpool.Pool
}{pools: map[adminKey]*pgxpool.Pool{}}

// New opens a store on a fresh database for t, closed when t ends.
func New(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{URL: URL(t), MaxConns: 16})
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}

func adminURL(ctx context.Context) (string, error) {
	if u := os.Getenv(testenv.DatabaseURLVar); u != "" {
		if err := ping(ctx, u); err != nil {
			return "", fmt.Errorf("%s=%s does not answer (start that server, or unset the variable to use a container or the local server): %w", testenv.DatabaseURLVar, store.Redact(u), err)
		}
		return u, nil
	}
	if testenv.DockerAvailable() {
		c, err := tcpostgres.Run(ctx, "postgres:16-alpine", tcpostgres.BasicWaitStrategies())
		if err != nil {
			return "", fmt.Errorf("start a Postgres container: %w", err)
		}
		// The container lives as long as the test process; the reaper removes it.
		return c.ConnectionString(ctx, "sslmode=disable")
	}
	if err := ping(ctx, LocalURL); err != nil {
		return "", fmt.Errorf("%s (tried %s: %w)", Missing, LocalURL, err)
	}
	return LocalURL, nil
}

// ensureTemplate creates the roles, and the template database for the
// current migrations, once per server, under an advisory lock so parallel
// test binaries agree.
func ensureTemplate(ctx context.Context, admin string) (string, error) {
	name := "mnemos_tpl_" + migrationsHash()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7402198311)"); err != nil {
		return "", fmt.Errorf("lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7402198311)") //nolint:errcheck // closing the connection unlocks too
	for _, role := range []string{store.AppRole, OwnerRole} {
		if err := store.EnsureLoginRole(ctx, admin, asRole(admin, role), ""); err != nil {
			return "", fmt.Errorf("role %s: %w", role, err)
		}
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building+" OWNER "+OwnerRole); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	if err := store.Migrate(ctx, withDatabase(asRole(admin, OwnerRole), building), nil); err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	// Renamed only once complete, so a crash never leaves a half-built template.
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		return "", fmt.Errorf("rename template: %w", err)
	}
	return name, nil
}

func migrationsHash() string {
	h := sha256.New()
	h.Write([]byte("owner " + OwnerRole + "\n"))
	entries, _ := fs.ReadDir(migrations.FS, ".")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(migrations.FS, n)
		h.Write([]byte(n))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func ping(ctx context.Context, u string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return store.Ping(ctx, u)
}

func withDatabase(u, name string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	parsed.Path = "/" + name
	return parsed.String()
}

// asRole is u with the role's name as user and as password.
func asRole(u, role string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	parsed.User = url.UserPassword(role, role)
	return parsed.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
