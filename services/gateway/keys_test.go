package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestAKeyIsRefusedOutsideItsScopes: every route answers 403 missing_scope,
// naming the scope, to a key without it, in the dialect of its door, and
// the refusal is counted.
func TestAKeyIsRefusedOutsideItsScopes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	_, readOnly, err := h.store.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "reader", Scopes: []string{store.ScopeRead}}, "test")
	require.NoError(t, err)
	_, ingestOnly, err := h.store.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "ingest", Scopes: []string{store.ScopeIngest}}, "test")
	require.NoError(t, err)

	refusals := []struct {
		method, path, key, scope string
		body                     []byte
	}{
		{"POST", "/v1/turns", readOnly, store.ScopeIngest, encode(t, event("s1", 1))},
		{"PUT", "/v1/scopes/project:demo/memories/notes", readOnly, store.ScopeMemoryWrite, []byte("---\nname: notes\ndescription: d\ntype: project\n---\nbody\n")},
		{"GET", "/v1/sessions", ingestOnly, store.ScopeRead, nil},
		{"GET", "/v1/keys", readOnly, store.ScopeAdmin, nil},
		{"POST", "/v1/keys", ingestOnly, store.ScopeAdmin, encode(t, api.KeyRequest{Name: "x", Scopes: []string{store.ScopeAdmin}})},
	}
	for _, r := range refusals {
		status, body := h.do(t, r.method, r.path, r.key, r.body)
		require.Equal(t, http.StatusForbidden, status, "%s %s: %v", r.method, r.path, body)
		e := body["error"].(map[string]any)
		require.Equal(t, "missing_scope", e["code"])
		require.Contains(t, e["message"], `"`+r.scope+`"`, "the refusal names the scope lacking")
	}
	require.EqualValues(t, len(refusals), h.metrics.Sum("mnemos.requests.refused", "code", "missing_scope"))

	// The model proxy answers in the Messages API's dialect.
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/messages", bytes.NewReader([]byte(`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)))
	require.NoError(t, err)
	req.Header.Set("x-api-key", readOnly)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	var anthropic api.AnthropicErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&anthropic))
	require.Equal(t, "permission_error", anthropic.Error.Type)
	require.Contains(t, anthropic.Error.Message, `"proxy"`)

	// Within its scopes the key is served.
	status, body := h.do(t, "GET", "/v1/sessions", readOnly, nil)
	require.Equal(t, http.StatusOK, status, body)
	status, body = h.do(t, "POST", "/v1/turns", ingestOnly, encode(t, event("s1", 1)))
	require.Equal(t, http.StatusAccepted, status, body)
}

// TestATenantAdministratorManagesItsOwnKeysOnly: an admin key makes,
// lists, rotates and revokes its tenant's keys, and sees or touches none
// of another tenant's; each change is in its tenant's audit log.
func TestATenantAdministratorManagesItsOwnKeysOnly(t *testing.T) {
	t.Parallel()
	h := setup(t)

	status, body := h.do(t, "POST", "/v1/keys", "key-acme", encode(t, api.KeyRequest{Name: "ci", Scopes: []string{store.ScopeIngest, store.ScopeRead}}))
	require.Equal(t, http.StatusCreated, status, body)
	var made api.KeySecret
	remarshal(t, body, &made)
	require.Equal(t, "ci", made.Key.Name)
	require.True(t, made.Key.Active)
	require.Equal(t, made.Secret[:12], made.Key.Prefix)
	status, _ = h.do(t, "GET", "/v1/sessions", made.Secret, nil)
	require.Equal(t, http.StatusOK, status, "the new key works at once")

	for _, bad := range []api.KeyRequest{
		{Name: "none"},
		{Name: "unknown", Scopes: []string{"superuser"}},
		{Name: "twice", Scopes: []string{store.ScopeRead, store.ScopeRead}},
		{Name: "past", Scopes: []string{store.ScopeRead}, ExpiresAt: new(time.Now().Add(-time.Hour))},
	} {
		status, body := h.do(t, "POST", "/v1/keys", "key-acme", encode(t, bad))
		require.Equal(t, http.StatusBadRequest, status, "%+v: %v", bad, body)
	}

	// globex's administrator sees none of acme's keys and touches none.
	status, body = h.do(t, "GET", "/v1/keys", "key-globex", nil)
	require.Equal(t, http.StatusOK, status)
	var globex api.KeyList
	remarshal(t, body, &globex)
	require.Len(t, globex.Keys, 1, "globex's own key only")
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/keys/" + made.Key.ID}, {"DELETE", "/v1/keys/" + made.Key.ID}, {"POST", "/v1/keys/" + made.Key.ID + "/rotate"},
	} {
		status, body := h.do(t, r.method, r.path, "key-globex", encode(t, api.RotateRequest{}))
		require.Equal(t, http.StatusNotFound, status, "%s %s: %v", r.method, r.path, body)
	}
	status, _ = h.do(t, "GET", "/v1/sessions", made.Secret, nil)
	require.Equal(t, http.StatusOK, status, "the key stands after another tenant's attempts")

	// Rotation with an overlap: both keys work; then revocation.
	status, body = h.do(t, "POST", "/v1/keys/"+made.Key.ID+"/rotate", "key-acme", encode(t, api.RotateRequest{OverlapSeconds: 3600}))
	require.Equal(t, http.StatusCreated, status, body)
	var rotated api.KeySecret
	remarshal(t, body, &rotated)
	require.Equal(t, made.Key.Scopes, rotated.Key.Scopes)
	require.NotNil(t, rotated.Previous.ExpiresAt)
	for _, key := range []string{made.Secret, rotated.Secret} {
		status, _ = h.do(t, "GET", "/v1/sessions", key, nil)
		require.Equal(t, http.StatusOK, status)
	}
	status, body = h.do(t, "DELETE", "/v1/keys/"+made.Key.ID, "key-acme", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, false, body["active"])
	status, body = h.do(t, "GET", "/v1/sessions", made.Secret, nil)
	require.Equal(t, http.StatusUnauthorized, status, "a revoked key is refused by the process that revoked it: %v", body)
	status, body = h.do(t, "POST", "/v1/keys/"+made.Key.ID+"/rotate", "key-acme", encode(t, api.RotateRequest{}))
	require.Equal(t, http.StatusConflict, status, body)

	status, body = h.do(t, "GET", "/v1/audit", "key-acme", nil)
	require.Equal(t, http.StatusOK, status, body)
	var log api.AuditLog
	remarshal(t, body, &log)
	var actions, actors []string
	for _, r := range log.Records {
		actions = append(actions, r.Action)
		actors = append(actors, r.Actor)
	}
	admin := "key:" + store.KeyIDOf("key-acme")
	require.Equal(t, []string{"key.revoke", "key.rotate", "key.create", "key.create", "key.create"}, actions)
	require.Equal(t, []string{admin, admin, admin, admin, "system"}, actors, "the harness made the administrator's key")
	status, body = h.do(t, "GET", "/v1/audit", "key-globex", nil)
	require.Equal(t, http.StatusOK, status)
	var other api.AuditLog
	remarshal(t, body, &other)
	require.Len(t, other.Records, 1, "globex's log holds its own key's making, nothing of acme's")
	require.Equal(t, store.KeyIDOf("key-globex"), other.Records[0].Target)
}

func remarshal(t *testing.T, from any, to any) {
	t.Helper()
	raw, err := json.Marshal(from)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, to))
}

// TestMCPMemoryWritesNeedTheirScope: over MCP, a key with read views the
// memory files; its writes are refused as tool errors naming
// memory:write, and nothing is written.
func TestMCPMemoryWritesNeedTheirScope(t *testing.T) {
	t.Parallel()
	h := setup(t)
	_, reader, err := h.store.CreateAPIKey(context.Background(), "acme", store.NewAPIKey{Name: "reader", Scopes: []string{store.ScopeRead}}, "test")
	require.NoError(t, err)
	cs := h.mcpClient(t, "Authorization", "Bearer "+reader, "X-Mnemos-Project", "repo-x")
	doc := memoryMarkdown("deploy-window", "Deploys happen on Tuesdays", "Deploy on Tuesdays only.")
	text, isErr := callTool(t, cs, "memory", map[string]any{"command": "create", "path": "/memories/deploy-window.md", "file_text": doc})
	require.True(t, isErr)
	require.Contains(t, text, `lacks the scope "memory:write"`)
	require.Contains(t, okTool(t, cs, "memory", map[string]any{"command": "view", "path": "/memories"}), "0 memories")
}
