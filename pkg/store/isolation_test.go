package store_test

import (
	"context"
	"crypto/rand"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

func TestCheckIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	open := func(u string) *store.Store {
		st, err := store.Open(ctx, store.Config{URL: u, MaxConns: 2})
		require.NoError(t, err)
		t.Cleanup(st.Close)
		return st
	}
	app := open(dbURL)
	require.NoError(t, app.CheckIsolation(ctx), "the services' role is confined")
	require.ErrorContains(t, open(pgtest.AdminURL(t, dbURL)).CheckIsolation(ctx), "it is a superuser")
	err := open(pgtest.OwnerURL(t, dbURL)).CheckIsolation(ctx)
	require.ErrorContains(t, err, "it owns tables, so it could drop their policies: ")
	require.ErrorContains(t, err, "sessions")

	admin := pgtest.Admin(t, app)
	_, err = admin.Exec(ctx, "ALTER TABLE messages NO FORCE ROW LEVEL SECURITY")
	require.NoError(t, err)
	require.ErrorContains(t, app.CheckIsolation(ctx), "table messages is not isolated: row-level security is not forced")
	_, err = admin.Exec(ctx, "ALTER TABLE messages FORCE ROW LEVEL SECURITY; CREATE POLICY everything ON messages USING (true)")
	require.NoError(t, err)
	require.ErrorContains(t, app.CheckIsolation(ctx), "table messages is not isolated: the policies everything widen what this role sees")
	_, err = admin.Exec(ctx, "DROP POLICY everything ON messages; DROP POLICY tenant_isolation ON tool_results")
	require.NoError(t, err)
	require.ErrorContains(t, app.CheckIsolation(ctx), "table tool_results is not isolated: it has no tenant_isolation policy")
}

func TestInTxNeedsATenant(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	called := false
	err := st.InTx(context.Background(), "", func(*store.Tx) error { called = true; return nil })
	require.ErrorContains(t, err, "no tenant")
	require.False(t, called)
}

// TestEnsureLoginRole: a missing role is created with the URL's password and
// made a member; a role that cannot log in is given login; a changed
// password is set; a role that already works is left alone.
func TestEnsureLoginRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.AdminURL(t, pgtest.URL(t))
	role := "mnemos_test_role_" + strings.ToLower(rand.Text()[:10]) // its own on a shared server
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := conn.Exec(ctx, "DROP ROLE IF EXISTS "+role)
		require.NoError(t, err)
		conn.Close(ctx)
	})
	_, err = conn.Exec(ctx, "DROP ROLE IF EXISTS "+role)
	require.NoError(t, err)
	u, err := url.Parse(admin)
	require.NoError(t, err)
	u.User = url.UserPassword(role, "first")

	require.NoError(t, store.EnsureLoginRole(ctx, admin, u.String(), store.AppRole))
	var canLogin, member bool
	read := func() {
		require.NoError(t, conn.QueryRow(ctx, "SELECT rolcanlogin, pg_has_role(oid, $2, 'MEMBER') FROM pg_roles WHERE rolname = $1", role, store.AppRole).Scan(&canLogin, &member))
	}
	read()
	require.True(t, canLogin)
	require.True(t, member)

	_, err = conn.Exec(ctx, "ALTER ROLE "+role+" NOLOGIN; REVOKE "+store.AppRole+" FROM "+role)
	require.NoError(t, err)
	require.NoError(t, store.EnsureLoginRole(ctx, admin, u.String(), store.AppRole))
	read()
	require.True(t, canLogin, "login is given back")
	require.True(t, member, "the membership is granted again")
	require.NoError(t, store.Ping(ctx, u.String()))

	u.User = url.UserPassword(role, "second")
	require.NoError(t, store.EnsureLoginRole(ctx, admin, u.String(), store.AppRole), "a new password is set when the old one is refused")
	require.NoError(t, store.Ping(ctx, u.String()))

	noUser := *u
	noUser.User = nil
	require.ErrorContains(t, store.EnsureLoginRole(ctx, admin, noUser.String(), store.AppRole), "names no user")
}
