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

// TestDatabaseIDTellsDatabasesApart: the id names one database: the same
// after a reconnect, another for another database, and another for a
// database dropped and created anew under the same name.
func TestDatabaseIDTellsDatabasesApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	idOf := func(url string) string {
		st, err := store.Open(ctx, store.Config{URL: url, MaxConns: 1})
		require.NoError(t, err)
		defer st.Close()
		id, err := st.DatabaseID(ctx)
		require.NoError(t, err)
		require.Regexp(t, `^pg-\d+-\d+$`, id)
		return id
	}

	one, other := pgtest.URL(t), pgtest.URL(t)
	require.Equal(t, idOf(one), idOf(one), "the same database, reconnected")
	require.NotEqual(t, idOf(one), idOf(other), "two databases")

	// Dropped and created anew, the database is another one.
	admin := pgtest.AdminURL(t, one)
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) }) // after the drop below
	name := "mnemos_test_anew_" + strings.ToLower(rand.Text()[:8])
	anew, err := url.Parse(admin)
	require.NoError(t, err)
	anew.Path = "/" + name
	create := func() string {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+name)
		require.NoError(t, err)
		return idOf(anew.String())
	}
	drop := func() {
		_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		require.NoError(t, err)
	}
	t.Cleanup(drop)
	before := create()
	drop()
	require.NotEqual(t, before, create(), "the database dropped and made anew")
}
