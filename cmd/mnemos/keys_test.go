package main

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestKeyAndTenantCommands: mnemos key makes, lists, rotates and revokes a
// tenant's keys in the database, and mnemos tenant delete erases the
// tenant's rows, but only when told -yes, and says its events in the
// streams are left to a gateway.
func TestKeyAndTenantCommands(t *testing.T) {
	t.Parallel()
	base := map[string]string{"MNEMOS_DATABASE_URL": pgtest.URL(t)}
	ctx := context.Background()
	cmd := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, env(base), &out, io.Discard)
		return out.String(), err
	}
	secretOf := regexp.MustCompile(`secret (mnm_\S+)`)
	idOf := regexp.MustCompile(`key (key_[0-9a-f]{16})`)

	_, err := cmd("tenant", "create", "acme")
	require.NoError(t, err)
	out, err := cmd("key", "create", "-name", "ci", "-scopes", "ingest,read", "-expires", "720h", "acme")
	require.NoError(t, err)
	secret, id := secretOf.FindStringSubmatch(out), idOf.FindStringSubmatch(out)
	require.NotNil(t, secret, out)
	require.Equal(t, store.KeyIDOf(secret[1]), id[1])
	require.Contains(t, out, "scopes ingest,read, expires ")

	_, err = cmd("key", "create", "-scopes", "root", "acme")
	require.ErrorIs(t, err, store.ErrBadScope)
	_, err = cmd("key", "create", "nobody")
	require.ErrorIs(t, err, store.ErrUnknownTenant)

	out, err = cmd("key", "rotate", "-overlap", "0", "acme", id[1])
	require.NoError(t, err)
	rotated := idOf.FindStringSubmatch(out)
	require.NotNil(t, rotated, out)
	out, err = cmd("key", "revoke", "acme", rotated[1])
	require.NoError(t, err)
	require.Contains(t, out, "revoked at")
	_, err = cmd("key", "revoke", "acme", "key_0000000000000000")
	require.ErrorContains(t, err, "has no key key_0000000000000000")

	out, err = cmd("key", "list", "acme")
	require.NoError(t, err)
	require.Regexp(t, id[1]+`.*expired`, out, "an overlap of 0 ends the old key")
	require.Regexp(t, rotated[1]+`.*revoked`, out)
	require.Regexp(t, `created by mnemos tenant create.*active`, out)

	_, err = cmd("tenant", "delete", "acme")
	require.ErrorContains(t, err, "give -yes")
	out, err = cmd("key", "list", "acme")
	require.NoError(t, err)
	require.Contains(t, out, rotated[1], "nothing erased without -yes")
	out, err = cmd("tenant", "delete", "-yes", "acme")
	require.NoError(t, err)
	require.Regexp(t, `tenant acme erased: \d+ rows\n  api_keys +3\n`, out)
	require.Contains(t, out, "not purged yet", "the command line reaches no bus: the streams wait for a gateway")
	out, err = cmd("key", "list", "acme")
	require.NoError(t, err)
	require.NotContains(t, out, "key_", "the keys are gone")
	_, err = cmd("tenant", "settings", "acme")
	require.NoError(t, err, "the tenant's row stays until its events are purged (pkg/erasure's tests finish it)")
}
