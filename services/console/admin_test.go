package console

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestAnAdministratorManagesKeysAndErases: a session signed in with an
// admin key makes a key (its secret shown once), rotates and revokes it,
// and erases a session and a scope once it types their names; a key
// without admin sees none of these pages.
func TestAnAdministratorManagesKeysAndErases(t *testing.T) {
	h := setup(t)
	ctx := context.Background()
	a := h.signIn(t, keyA)

	status, body := a.get(t, "/console/keys")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, store.KeyIDOf(keyA)+"</code> (this session's)")

	status, body = a.post(t, "/console/keys", url.Values{"csrf": {a.csrf}, "name": {"ci"}, "scope": {"ingest", "read"}, "days": {"30"}})
	require.Equal(t, http.StatusCreated, status, body)
	secret := regexp.MustCompile(`<pre id="secret">(mnm_[A-Za-z0-9_-]{43})</pre>`).FindStringSubmatch(body)
	require.NotNil(t, secret, "the secret is shown once: %s", body)
	made, err := h.store.LookupAPIKey(ctx, secret[1])
	require.NoError(t, err)
	require.Equal(t, []string{"ingest", "read"}, made.Scopes)
	status, body = a.get(t, "/console/keys")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, body, secret[1], "and never again")

	status, body = a.post(t, "/console/keys", url.Values{"csrf": {a.csrf}, "name": {"none"}})
	require.Equal(t, http.StatusBadRequest, status, body)

	status, body = a.post(t, "/console/keys/"+made.KeyID+"/rotate", url.Values{"csrf": {a.csrf}, "overlap_hours": {"0"}})
	require.Equal(t, http.StatusCreated, status, body)
	rotated := regexp.MustCompile(`<pre id="secret">(mnm_[A-Za-z0-9_-]{43})</pre>`).FindStringSubmatch(body)
	require.NotNil(t, rotated)
	_, err = h.store.LookupAPIKey(ctx, secret[1])
	require.ErrorIs(t, err, store.ErrNotFound, "an overlap of 0 ends the old key at once")
	next, err := h.store.LookupAPIKey(ctx, rotated[1])
	require.NoError(t, err)
	status, _ = a.post(t, "/console/keys/"+next.KeyID+"/revoke", url.Values{"csrf": {a.csrf}})
	require.Equal(t, http.StatusSeeOther, status)
	_, err = h.store.LookupAPIKey(ctx, rotated[1])
	require.ErrorIs(t, err, store.ErrNotFound)

	// Erasing a session: refused until its id is typed, then gone.
	session := "console-erase-me"
	h.makeSession(t, tenantA, keyA, session)
	status, body = a.get(t, "/console/sessions/"+session)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `id="erase-session"`)
	status, _ = a.post(t, "/console/sessions/"+session+"/erase", url.Values{"csrf": {a.csrf}, "confirm": {"something else"}})
	require.Equal(t, http.StatusBadRequest, status)
	_, err = h.store.GetSession(ctx, tenantA, session)
	require.NoError(t, err, "not erased without the confirmation")
	status, _ = a.post(t, "/console/sessions/"+session+"/erase", url.Values{"csrf": {a.csrf}, "confirm": {session}})
	require.Equal(t, http.StatusSeeOther, status)
	_, err = h.store.GetSession(ctx, tenantA, session)
	require.ErrorIs(t, err, store.ErrNotFound)

	// Erasing a scope.
	scope, name := "project:console-erase", "release_day"
	h.makeMemory(t, keyA, scope, name)
	status, _ = a.post(t, "/console/memories/"+url.PathEscape(scope)+"/erase", url.Values{"csrf": {a.csrf}, "confirm": {scope}})
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, http.StatusNotFound, h.api(t, http.MethodGet, "/v1/scopes/"+scope+"/memories/"+name, keyA, "", nil))

	// The audit log names the session's key for all of it.
	log, err := h.store.AuditLog(ctx, tenantA, 0, 100)
	require.NoError(t, err)
	var actions []string
	for _, r := range log {
		if r.Actor == "key:"+store.KeyIDOf(keyA) {
			actions = append(actions, r.Action)
		}
	}
	require.Equal(t, []string{"erase_scope", "erase_session", "key.revoke", "key.rotate", "key.create", "key.create"}, actions)

	// A reader's session sees no admin page and no erase form.
	_, reader, err := h.store.CreateAPIKey(ctx, tenantA, store.NewAPIKey{Name: "reader", Scopes: []string{store.ScopeRead}}, "test")
	require.NoError(t, err)
	r := h.signIn(t, reader)
	status, body = r.get(t, "/console/keys")
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "admin scope")
	status, body = r.get(t, "/console/sessions")
	require.Equal(t, http.StatusOK, status)
	require.False(t, strings.Contains(body, `href="/console/keys"`), "no Keys link for a reader")
	h.makeSession(t, tenantA, keyA, "kept")
	status, _ = r.post(t, "/console/sessions/kept/erase", url.Values{"csrf": {r.csrf}, "confirm": {"kept"}})
	require.Equal(t, http.StatusForbidden, status)
	_, err = h.store.GetSession(ctx, tenantA, "kept")
	require.NoError(t, err)
}
