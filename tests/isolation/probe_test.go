// Package isolation_test proves tenant isolation against a real Postgres and
// a real JetStream: the catalog (every table with a tenant_id column is under
// row-level security), what the services' role can see and write with and
// without a tenant, many tenants' requests interleaved over a small pool, and
// NATS credentials that keep a tenant to its own subjects.
package isolation_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// tenantTables lists every table of the schema with a tenant_id column.
func tenantTables(t testing.TB, admin *pgxpool.Pool) []string {
	t.Helper()
	rows, err := admin.Query(context.Background(), `
		SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
		  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND a.attnum > 0 AND NOT a.attisdropped)
		ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return tables
}

// probe looks at every tenant table through the services' role (app) with
// raw SQL, as a query that forgot its tenant filter would, and reports every
// row of another tenant it could see or change, and every row it could see
// or write with no tenant set. admin (which row-level security does not
// apply to) says what is there. Every change is rolled back. covered counts
// the tables holding rows of at least two of tenants.
func probe(t testing.TB, app, admin *pgxpool.Pool, tenants []string) (violations []string, covered int) {
	t.Helper()
	ctx := context.Background()
	for _, table := range tenantTables(t, admin) {
		ident := pgx.Identifier{table}.Sanitize()
		counts := map[string]int64{}
		samples := map[string][]byte{} // one row of each tenant, as JSON
		rows, err := admin.Query(ctx, fmt.Sprintf(`SELECT tenant_id, count(*), (array_agg(to_jsonb(x)))[1] FROM %s x GROUP BY tenant_id`, ident))
		require.NoError(t, err)
		for rows.Next() {
			var tenant string
			var n int64
			var sample []byte
			require.NoError(t, rows.Scan(&tenant, &n, &sample))
			counts[tenant], samples[tenant] = n, sample
		}
		require.NoError(t, rows.Err())
		present := 0
		for _, tenant := range tenants {
			if counts[tenant] > 0 {
				present++
			}
		}
		if present >= 2 {
			covered++
		}
		insert := fmt.Sprintf(`INSERT INTO %s SELECT * FROM jsonb_populate_record(NULL::%s, $1)`, ident, ident)

		// No tenant set: nothing to see, change or write.
		violations = append(violations, inTx(t, app, "", func(tx pgx.Tx) []string {
			var v []string
			if n := count(t, tx, "SELECT count(*) FROM "+ident); n > 0 {
				v = append(v, fmt.Sprintf("%s: with no tenant set, %d rows are visible", table, n))
			}
			if n := affected(t, tx, "UPDATE "+ident+" SET tenant_id = tenant_id"); n > 0 {
				v = append(v, fmt.Sprintf("%s: with no tenant set, %d rows could be updated", table, n))
			}
			if n := affected(t, tx, "DELETE FROM "+ident); n > 0 {
				v = append(v, fmt.Sprintf("%s: with no tenant set, %d rows could be deleted", table, n))
			}
			for _, tenant := range sortedKeys(samples) {
				if code := refused(t, tx, insert, samples[tenant]); code != "42501" {
					v = append(v, fmt.Sprintf("%s: with no tenant set, a row of %s was not refused by the policy (sqlstate %q)", table, tenant, code))
				}
			}
			return v
		})...)

		// Tenant A set: A's rows only, and no other tenant's row can be changed or written.
		for _, a := range tenants {
			violations = append(violations, inTx(t, app, a, func(tx pgx.Tx) []string {
				var v []string
				if n := count(t, tx, "SELECT count(*) FROM "+ident+" WHERE tenant_id <> $1", a); n > 0 {
					v = append(v, fmt.Sprintf("%s: tenant %s sees %d rows of other tenants", table, a, n))
				}
				if n := count(t, tx, "SELECT count(*) FROM "+ident); n != counts[a] {
					v = append(v, fmt.Sprintf("%s: tenant %s sees %d rows, it has %d", table, a, n, counts[a]))
				}
				if n := affected(t, tx, "UPDATE "+ident+" SET tenant_id = tenant_id WHERE tenant_id <> $1", a); n > 0 {
					v = append(v, fmt.Sprintf("%s: tenant %s could update %d rows of other tenants", table, a, n))
				}
				if n := affected(t, tx, "DELETE FROM "+ident+" WHERE tenant_id <> $1", a); n > 0 {
					v = append(v, fmt.Sprintf("%s: tenant %s could delete %d rows of other tenants", table, a, n))
				}
				for _, b := range sortedKeys(samples) {
					if b == a {
						continue
					}
					if code := refused(t, tx, insert, samples[b]); code != "42501" {
						v = append(v, fmt.Sprintf("%s: tenant %s writing a row of %s was not refused by the policy (sqlstate %q)", table, a, b, code))
					}
				}
				return v
			})...)
		}
	}
	return violations, covered
}

// inTx runs fn in a transaction of app that names tenant (none when empty),
// set the way store.InTx sets it, and rolls it back.
func inTx(t testing.TB, app *pgxpool.Pool, tenant string, fn func(pgx.Tx) []string) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := app.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()
	if tenant != "" {
		_, err := tx.Exec(ctx, "SELECT set_config('mnemos.tenant_id', $1, true)", tenant)
		require.NoError(t, err)
	}
	return fn(tx)
}

func count(t testing.TB, tx pgx.Tx, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, tx.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// affected runs a write inside a savepoint and returns how many rows it
// changed.
func affected(t testing.TB, tx pgx.Tx, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	sp, err := tx.Begin(ctx)
	require.NoError(t, err)
	tag, err := sp.Exec(ctx, sql, args...)
	require.NoError(t, err, sql)
	require.NoError(t, sp.Rollback(ctx))
	return tag.RowsAffected()
}

// refused runs a write inside a savepoint and returns the SQLSTATE it was
// refused with ("" when it went through).
func refused(t testing.TB, tx pgx.Tx, sql string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	sp, err := tx.Begin(ctx)
	require.NoError(t, err)
	_, err = sp.Exec(ctx, sql, args...)
	require.NoError(t, sp.Rollback(ctx))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	require.NoError(t, err)
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
