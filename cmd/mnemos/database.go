package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// isolationHelp says how the two database roles are meant to be set up.
const isolationHelp = `The services must connect as a role that owns no table and cannot bypass row-level security:
  MNEMOS_DATABASE_URL          the services' role: ` + store.AppRole + ` (or a login role that is a member of it)
  MNEMOS_MIGRATE_DATABASE_URL  the schema's owner, which runs the migrations
'mnemos migrate' creates ` + store.AppRole + ` and its grants, and gives the role of MNEMOS_DATABASE_URL login
with the URL's password. See README.md, Tenant isolation.`

// databases are a process's two Postgres connections: the schema's owner,
// which migrates, and the services' role, which row-level security confines
// to one tenant per transaction.
type databases struct {
	owner string // empty when the process has no owner's URL
	app   string
}

// resolveDatabases works out both URLs from the configuration: with neither
// configured, the local server at local (its database created when missing)
// migrated by its administrator, with the services connecting as
// store.AppRole; with only the owner's, the services' role is store.AppRole
// on the same database.
func resolveDatabases(ctx context.Context, cfg Config, local string) (databases, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	dbs := databases{owner: cfg.MigrateDatabaseURL, app: cfg.DatabaseURL}
	switch {
	case dbs.owner == "" && dbs.app == "":
		if err := store.EnsureDatabase(cctx, local); err != nil {
			return dbs, fmt.Errorf(`no Postgres: MNEMOS_DATABASE_URL is not set and the local server (%s) does not answer: %w
Start one of:
  docker compose up -d postgres
  apt-get install -y postgresql && pg_ctlcluster --skip-systemctl-redirect 15 main start
or set MNEMOS_MIGRATE_DATABASE_URL=postgres://OWNER:PASSWORD@HOST:5432/mnemos (migrations)
   and MNEMOS_DATABASE_URL=postgres://%s:PASSWORD@HOST:5432/mnemos (the services)`, store.Redact(local), err, store.AppRole)
		}
		dbs.owner = local
	case dbs.owner != "":
		if err := store.Ping(cctx, dbs.owner); err != nil {
			return dbs, fmt.Errorf("MNEMOS_MIGRATE_DATABASE_URL=%s does not answer: %w", store.Redact(dbs.owner), err)
		}
	}
	if dbs.app == "" {
		u, err := url.Parse(dbs.owner)
		if err != nil {
			return dbs, fmt.Errorf("MNEMOS_MIGRATE_DATABASE_URL: %w", err)
		}
		u.User = url.User(store.AppRole)
		dbs.app = u.String()
	}
	if sameUser(dbs.owner, dbs.app) {
		return dbs, fmt.Errorf("MNEMOS_DATABASE_URL and MNEMOS_MIGRATE_DATABASE_URL name the same role\n%s", isolationHelp)
	}
	return dbs, nil
}

// migrateSchema brings the schema up to date as its owner and makes the
// services' role able to log in.
func migrateSchema(ctx context.Context, dbs databases, log *slog.Logger) error {
	if dbs.owner == "" {
		return errors.New("migrating needs MNEMOS_MIGRATE_DATABASE_URL, the schema owner's URL (MNEMOS_DATABASE_URL is the services' role, which may not migrate)")
	}
	if err := store.Migrate(ctx, dbs.owner, log); err != nil {
		return err
	}
	if err := store.EnsureLoginRole(ctx, dbs.owner, dbs.app, store.AppRole); err != nil {
		return fmt.Errorf("%w\n(set MNEMOS_DATABASE_URL with the services' role and its password)\n%s", err, isolationHelp)
	}
	return nil
}

// openServicesStore opens the services' pool and refuses a role that
// row-level security does not confine to one tenant per transaction.
func openServicesStore(ctx context.Context, dbs databases, maxConns int32, tracer pgx.QueryTracer) (*store.Store, error) {
	st, err := store.Open(ctx, store.Config{URL: dbs.app, MaxConns: maxConns, Tracer: tracer})
	if err != nil {
		return nil, fmt.Errorf("the services' database role (MNEMOS_DATABASE_URL): %w", err)
	}
	if err := st.CheckIsolation(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("refusing to serve: %w\n%s", err, isolationHelp)
	}
	return st, nil
}

func sameUser(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil || ua.User == nil || ub.User == nil {
		return false
	}
	return ua.User.Username() == ub.User.Username() && ua.Host == ub.Host
}

// userOf is the role a URL connects as.
func userOf(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil || u.User == nil {
		return ""
	}
	return u.User.Username()
}
