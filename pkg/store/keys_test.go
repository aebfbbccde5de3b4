package store_test

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

func TestAPIKeyLifecycle(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	ctx := context.Background()
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	require.NoError(t, st.EnsureTenant(ctx, "globex", "Globex"))

	// A known key, registered twice, is one key with every scope.
	require.NoError(t, st.AddAPIKey(ctx, "acme", "dev", "secret-key"))
	require.NoError(t, st.AddAPIKey(ctx, "acme", "dev", "secret-key"))
	g, err := st.LookupAPIKey(ctx, "secret-key")
	require.NoError(t, err)
	require.Equal(t, store.KeyGrant{Tenant: "acme", KeyID: store.KeyIDOf("secret-key"), Scopes: store.Scopes}, g)
	_, err = st.LookupAPIKey(ctx, "wrong")
	require.ErrorIs(t, err, store.ErrNotFound)
	var stored []byte
	require.NoError(t, pgtest.Admin(t, st).QueryRow(ctx, "SELECT key_hash FROM api_keys").Scan(&stored))
	require.NotContains(t, string(stored), "secret-key", "keys are stored hashed")

	// A new key: its secret shown once, its prefix kept in the clear.
	key, secret, err := st.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "ci", Scopes: []string{store.ScopeIngest, store.ScopeRead}}, "key:test")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(secret, store.KeyPrefix))
	require.Len(t, secret, len(store.KeyPrefix)+43)
	require.Equal(t, secret[:12], key.Prefix)
	require.Equal(t, store.KeyIDOf(secret), key.ID)
	require.Equal(t, []string{store.ScopeIngest, store.ScopeRead}, key.Scopes)
	g, err = st.LookupAPIKey(ctx, secret)
	require.NoError(t, err)
	require.True(t, g.Has(store.ScopeIngest))
	require.False(t, g.Has(store.ScopeProxy))

	_, _, err = st.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "x", Scopes: []string{"everything"}}, "t")
	require.ErrorIs(t, err, store.ErrBadScope)
	_, _, err = st.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "x"}, "t")
	require.ErrorIs(t, err, store.ErrBadScope)

	// An expired key grants nothing.
	past := time.Now().Add(-time.Minute)
	_, old, err := st.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "old", Scopes: []string{store.ScopeRead}, ExpiresAt: &past}, "t")
	require.NoError(t, err)
	_, err = st.LookupAPIKey(ctx, old)
	require.ErrorIs(t, err, store.ErrNotFound)

	// Another tenant sees none of these keys and can touch none.
	others, err := st.APIKeys(ctx, "globex")
	require.NoError(t, err)
	require.Empty(t, others)
	_, err = st.RevokeAPIKey(ctx, "globex", key.ID, "t")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, _, _, err = st.RotateAPIKey(ctx, "globex", key.ID, time.Minute, "t")
	require.ErrorIs(t, err, store.ErrNotFound)

	// Rotation: a new secret with the same name and scopes; the old one
	// holds for the overlap.
	before, rotated, newSecret, err := st.RotateAPIKey(ctx, "acme", key.ID, time.Hour, "t")
	require.NoError(t, err)
	require.Equal(t, "ci", rotated.Name)
	require.Equal(t, key.Scopes, rotated.Scopes)
	require.NotNil(t, before.ExpiresAt)
	require.WithinDuration(t, time.Now().Add(time.Hour), *before.ExpiresAt, time.Minute)
	_, err = st.LookupAPIKey(ctx, secret)
	require.NoError(t, err, "the old key holds during the overlap")
	_, err = st.LookupAPIKey(ctx, newSecret)
	require.NoError(t, err)

	// Revocation, once and again.
	revoked, err := st.RevokeAPIKey(ctx, "acme", key.ID, "t")
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	again, err := st.RevokeAPIKey(ctx, "acme", key.ID, "t")
	require.NoError(t, err)
	require.Equal(t, revoked.RevokedAt, again.RevokedAt, "revoking again changes nothing")
	_, err = st.LookupAPIKey(ctx, secret)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, _, _, err = st.RotateAPIKey(ctx, "acme", key.ID, 0, "t")
	require.ErrorIs(t, err, store.ErrKeyInactive)

	keys, err := st.APIKeys(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, keys, 4, "revoked and expired keys are listed too")

	// Use is recorded, at most once a minute.
	require.NoError(t, st.TouchAPIKey(ctx, "acme", rotated.ID))
	got, err := st.APIKey(ctx, "acme", rotated.ID)
	require.NoError(t, err)
	require.NotNil(t, got.LastUsedAt)

	// What was done is in the audit log, newest first, without secrets.
	log, err := st.AuditLog(ctx, "acme", 0, 100)
	require.NoError(t, err)
	var actions []string
	for _, r := range log {
		actions = append(actions, r.Action)
		require.NotContains(t, string(r.Detail), newSecret)
		require.NotContains(t, string(r.Detail), secret)
	}
	require.Equal(t, []string{"key.revoke", "key.revoke", "key.rotate", "key.create", "key.create", "key.create", "key.create"}, actions)
	none, err := st.AuditLog(ctx, "globex", 0, 100)
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestAKeyChangeIsAnnounced(t *testing.T) {
	t.Parallel()
	st := pgtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, st.EnsureTenant(ctx, "acme", "Acme"))
	key, secret, err := st.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "k", Scopes: []string{store.ScopeRead}}, "t")
	require.NoError(t, err)

	ready, heard := make(chan struct{}), make(chan string, 4)
	done := make(chan error, 1)
	go func() {
		done <- st.ListenKeys(ctx, func() { close(ready) }, func(hash string) { heard <- hash })
	}()
	<-ready
	_, err = st.RevokeAPIKey(ctx, "acme", key.ID, "t")
	require.NoError(t, err)
	select {
	case h := <-heard:
		require.Equal(t, hashHex(secret), h)
	case <-time.After(5 * time.Second):
		t.Fatal("the revocation was not announced")
	}
	cancel()
	require.NoError(t, <-done, "the listener ends with its context")
}

func hashHex(secret string) string { return hex.EncodeToString(store.HashAPIKey(secret)) }
