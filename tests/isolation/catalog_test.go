package isolation_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// The policies every tenant table carries, as Postgres prints them.
const (
	tenantExpr = `(tenant_id = NULLIF(current_setting('mnemos.tenant_id'::text, true), ''::text))`
	noTenant   = `(NULLIF(current_setting('mnemos.tenant_id'::text, true), ''::text) IS NULL)`
)

type policy struct {
	Name       string   `json:"name"`
	Cmd        string   `json:"cmd"`
	Permissive bool     `json:"permissive"`
	Roles      []string `json:"roles"`
	Using      string   `json:"using"`
	Check      string   `json:"check"`
}

// catalogViolations reads the catalog for every table with a tenant_id
// column and reports each one that is not isolated as migration 00009
// isolates them: row-level security enabled and forced; tenant_isolation
// for every role and command, keyed by mnemos.tenant_id; owner_without_tenant
// for the owner alone; no other policy; the services' role owning nothing
// and allowed to read and write it.
func catalogViolations(t testing.TB, admin *pgxpool.Pool) (violations []string, tables []string) {
	t.Helper()
	rows, err := admin.Query(context.Background(), `
		SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner),
		       pg_has_role($1, c.relowner, 'MEMBER'),
		       has_table_privilege($1, c.oid, 'SELECT') AND has_table_privilege($1, c.oid, 'INSERT')
		         AND has_table_privilege($1, c.oid, 'UPDATE') AND has_table_privilege($1, c.oid, 'DELETE'),
		       coalesce(json_agg(json_build_object(
		           'name', p.polname, 'cmd', p.polcmd, 'permissive', p.polpermissive,
		           'roles', (SELECT array_agg(CASE WHEN r = 0 THEN 'public' ELSE pg_get_userbyid(r) END ORDER BY 1) FROM unnest(p.polroles) AS r),
		           'using', pg_get_expr(p.polqual, p.polrelid), 'check', pg_get_expr(p.polwithcheck, p.polrelid)))
		         FILTER (WHERE p.oid IS NOT NULL), '[]')
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_policy p ON p.polrelid = c.oid
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
		  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND a.attnum > 0 AND NOT a.attisdropped)
		GROUP BY c.oid ORDER BY c.relname`, store.AppRole)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var table, owner string
		var enabled, forced, appOwns, appMay bool
		var raw []byte
		require.NoError(t, rows.Scan(&table, &enabled, &forced, &owner, &appOwns, &appMay, &raw))
		tables = append(tables, table)
		var policies []policy
		require.NoError(t, json.Unmarshal(raw, &policies))
		bad := func(format string, args ...any) {
			violations = append(violations, table+": "+fmt.Sprintf(format, args...))
		}
		if !enabled {
			bad("row-level security is not enabled")
		}
		if !forced {
			bad("row-level security is not forced")
		}
		if appOwns {
			bad("%s owns it (as %s)", store.AppRole, owner)
		}
		if !appMay {
			bad("%s may not select, insert, update and delete", store.AppRole)
		}
		want := map[string]policy{
			"tenant_isolation":     {Name: "tenant_isolation", Cmd: "*", Permissive: true, Roles: []string{"public"}, Using: tenantExpr, Check: tenantExpr},
			"owner_without_tenant": {Name: "owner_without_tenant", Cmd: "*", Permissive: true, Roles: []string{owner}, Using: noTenant, Check: noTenant},
		}
		for _, p := range policies {
			w, ok := want[p.Name]
			switch {
			case !ok:
				bad("unexpected policy %+v", p)
			case !equalPolicy(p, w):
				bad("policy %s is %+v, want %+v", p.Name, p, w)
			}
			delete(want, p.Name)
		}
		for name := range want {
			bad("no policy %s", name)
		}
	}
	require.NoError(t, rows.Err())
	return violations, tables
}

func equalPolicy(a, b policy) bool {
	return a.Name == b.Name && a.Cmd == b.Cmd && a.Permissive == b.Permissive && slices.Equal(a.Roles, b.Roles) &&
		a.Using == b.Using && a.Check == b.Check
}

// TestEveryTenantTableIsIsolated reads the catalog: every table with a
// tenant_id column, whichever migration made it, is under row-level security
// with the tenant policy. A table added later without it fails here, and the
// services refuse to start on it, until mnemos_enforce_tenant_isolation()
// isolates it.
func TestEveryTenantTableIsIsolated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	admin := pgtest.Admin(t, st)

	violations, tables := catalogViolations(t, admin)
	require.Empty(t, violations)
	for _, core := range []string{"tenants", "api_keys", "sessions", "turns", "messages", "tool_results", "content_replacements",
		"outbox", "compactions", "session_notes", "context_snapshots", "llm_usage"} {
		require.Contains(t, tables, core, "the catalog lists every tenant table")
	}
	require.NoError(t, st.CheckIsolation(ctx))

	t.Run("a table added without isolation", func(t *testing.T) {
		owner, err := pgx.Connect(ctx, pgtest.OwnerURL(t, dbURL))
		require.NoError(t, err)
		defer owner.Close(ctx)
		_, err = owner.Exec(ctx, `CREATE TABLE later_things (tenant_id text NOT NULL, note text NOT NULL)`)
		require.NoError(t, err)

		violations, _ := catalogViolations(t, admin)
		require.Contains(t, violations, "later_things: row-level security is not enabled")
		require.Contains(t, violations, "later_things: no policy tenant_isolation")
		require.ErrorContains(t, st.CheckIsolation(ctx), "table later_things is not isolated", "the services refuse to start")

		var changed int
		require.NoError(t, owner.QueryRow(ctx, `SELECT mnemos_enforce_tenant_isolation()`).Scan(&changed))
		require.Equal(t, 1, changed)
		violations, _ = catalogViolations(t, admin)
		require.Empty(t, violations)
		require.NoError(t, st.CheckIsolation(ctx))
		require.NoError(t, owner.QueryRow(ctx, `SELECT mnemos_enforce_tenant_isolation()`).Scan(&changed))
		require.Zero(t, changed, "applying it again changes nothing")

		// The services can use the new table, one tenant at a time.
		require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
		inTx(t, st.Pool(), "acme", func(tx pgx.Tx) []string {
			_, err := tx.Exec(ctx, `INSERT INTO later_things VALUES ('acme', 'mine')`)
			require.NoError(t, err)
			require.Equal(t, "42501", refused(t, tx, `INSERT INTO later_things VALUES ('globex', 'theirs')`))
			return nil
		})
	})
}
