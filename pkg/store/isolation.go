package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// AppRole is the role the services' privileges are granted to (migration
// 00009): the services connect as it, or as a login role that is a member
// of it. It owns nothing and row-level security confines it to the tenant
// its transaction names.
const AppRole = "mnemos_app"

// sweepBatch bounds how many sessions one cross-tenant sweep lists.
const sweepBatch = 100

// CheckIsolation returns an error unless row-level security confines the
// pool's role to the tenant of each transaction: the role is no superuser and
// has no BYPASSRLS (nor is a member of a role that is or has), owns no table
// of the schema (an owner may drop the policies), and every table with a
// tenant_id column has row-level security enabled and forced, the
// tenant_isolation policy, and no other permissive policy that applies to the
// role. The services call it before they serve.
func (s *Store) CheckIsolation(ctx context.Context) error {
	q := dbsqlc.New(s.pool)
	role, err := q.IsolationRole(ctx)
	if err != nil {
		return fmt.Errorf("store.CheckIsolation: role: %w", err)
	}
	fail := func(problems []string) error {
		return fmt.Errorf("store.CheckIsolation: role %q is not confined to one tenant per transaction: %s", role.Role, strings.Join(problems, "; "))
	}
	if role.Superuser { // everything else follows from it
		return fail([]string{"it is a superuser, to which row-level security never applies"})
	}
	var problems []string
	if role.Bypassrls {
		problems = append(problems, "it has BYPASSRLS")
	}
	if role.PrivilegedMemberships != "" {
		problems = append(problems, "it is a member of "+role.PrivilegedMemberships+", which escape row-level security")
	}
	owned, err := q.IsolationOwnedTables(ctx)
	if err != nil {
		return fmt.Errorf("store.CheckIsolation: owned tables: %w", err)
	}
	if len(owned) > 0 {
		problems = append(problems, "it owns tables, so it could drop their policies: "+strings.Join(owned, ", "))
	}
	tables, err := q.IsolationTenantTables(ctx)
	if err != nil {
		return fmt.Errorf("store.CheckIsolation: tenant tables: %w", err)
	}
	for _, t := range tables {
		var missing []string
		if !t.Enabled {
			missing = append(missing, "row-level security is not enabled")
		}
		if !t.Forced {
			missing = append(missing, "row-level security is not forced")
		}
		if !t.Isolated {
			missing = append(missing, "it has no tenant_isolation policy")
		}
		if t.WideningPolicies != "" && len(owned) == 0 { // an owner's own policy is reported as ownership
			missing = append(missing, "the policies "+t.WideningPolicies+" widen what this role sees")
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("table %s is not isolated: %s", t.TableName, strings.Join(missing, ", ")))
		}
	}
	if len(problems) > 0 {
		return fail(problems)
	}
	return nil
}

// EnsureLoginRole makes the role named in roleURL able to connect with that
// URL and, when memberOf is another role, a member of it. Connected with
// adminURL (a role allowed to manage roles: the migrating owner with
// CREATEROLE, or a superuser), it creates the role (LOGIN, with the URL's
// password) when missing, gives it LOGIN when it has none, sets the URL's
// password when connecting with it is refused, and grants the membership
// when missing. Each step runs only when needed, so a role an operator
// manages is left as it is.
func EnsureLoginRole(ctx context.Context, adminURL, roleURL, memberOf string) error {
	u, err := url.Parse(roleURL)
	if err != nil || u.User == nil || u.User.Username() == "" {
		return fmt.Errorf("store.EnsureLoginRole: %s names no user", Redact(roleURL))
	}
	name := u.User.Username()
	password, hasPassword := u.User.Password()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("store.EnsureLoginRole: connect %s: %w", Redact(adminURL), err)
	}
	defer conn.Close(ctx)

	ident := pgx.Identifier{name}.Sanitize()
	withPassword := ""
	if hasPassword {
		withPassword = " PASSWORD " + quoteLiteral(password)
	}
	var exists, canLogin, member bool
	err = conn.QueryRow(ctx, `SELECT true, rolcanlogin, CASE WHEN $2::name = '' THEN false ELSE pg_has_role(oid, $2::name, 'MEMBER') END
		FROM pg_roles WHERE rolname = $1::name`, name, memberOf).Scan(&exists, &canLogin, &member)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("store.EnsureLoginRole: look up %q: %w", name, err)
	}
	switch {
	case !exists:
		_, err = conn.Exec(ctx, "CREATE ROLE "+ident+" LOGIN"+withPassword)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42710" { // created concurrently
			_, err = conn.Exec(ctx, "ALTER ROLE "+ident+" LOGIN"+withPassword)
		}
	case !canLogin:
		_, err = conn.Exec(ctx, "ALTER ROLE "+ident+" LOGIN"+withPassword)
	}
	if err != nil {
		return fmt.Errorf("store.EnsureLoginRole: role %q: %w", name, err)
	}
	if memberOf != "" && memberOf != name && !member {
		if _, err := conn.Exec(ctx, "GRANT "+pgx.Identifier{memberOf}.Sanitize()+" TO "+ident); err != nil {
			return fmt.Errorf("store.EnsureLoginRole: grant %s to %q: %w", memberOf, name, err)
		}
	}
	err = Ping(ctx, roleURL)
	var pgErr *pgconn.PgError
	if err != nil && hasPassword && errors.As(err, &pgErr) && pgErr.Code == "28P01" { // invalid_password
		if _, aerr := conn.Exec(ctx, "ALTER ROLE "+ident+withPassword); aerr != nil {
			return fmt.Errorf("store.EnsureLoginRole: set the password of %q: %w", name, aerr)
		}
		err = Ping(ctx, roleURL)
	}
	if err != nil {
		return fmt.Errorf("store.EnsureLoginRole: role %q cannot connect to %s: %w", name, Redact(roleURL), err)
	}
	return nil
}

// quoteLiteral quotes s as an SQL string literal (standard_conforming_strings on).
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
