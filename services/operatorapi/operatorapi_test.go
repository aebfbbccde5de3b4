package operatorapi_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/operatorapi"
)

// harness is the operator API over a database of the test's own, and an
// operator key of it.
type harness struct {
	store  *store.Store
	srv    *httptest.Server
	key    store.OperatorKey
	admin  *client.Admin
	secret string
}

func setup(t *testing.T) *harness {
	t.Helper()
	st := pgtest.New(t)
	key, secret, err := st.CreateOperatorKey(context.Background(), "test")
	require.NoError(t, err)
	mux := http.NewServeMux()
	operatorapi.New(st, nil, erasure.New(erasure.DefaultConfig(), st, bustest.New(t), nil), tenantcfg.Defaults(), slog.New(slog.DiscardHandler)).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &harness{store: st, srv: srv, key: key, secret: secret,
		admin: client.NewAdmin(srv.URL, secret, client.WithHTTPClient(apitest.AdminClient(t)))}
}

// status sends method path with key and answers the status and the error
// code, the answer validated against api/admin-openapi.yaml.
func (h *harness) status(t *testing.T, method, path, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := apitest.AdminClient(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body api.ErrorBody
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	_ = json.Unmarshal(raw, &body) // a success answer has no error to read
	return resp.StatusCode, body.Error.Code
}

// TestEveryRouteIsDocumented compares the operator API's routes with
// api/admin-openapi.yaml: a route registered and not described, or
// described and not registered, fails.
func TestEveryRouteIsDocumented(t *testing.T) {
	t.Parallel()
	mux := apitest.NewRecorder()
	operatorapi.New(nil, nil, nil, tenantcfg.Defaults(), slog.New(slog.DiscardHandler)).Register(mux)
	problems, err := apitest.CheckAdminRoutes(mux.Patterns())
	require.NoError(t, err)
	require.Empty(t, problems, "the operator API's routes and api/admin-openapi.yaml disagree:\n%s", strings.Join(problems, "\n"))
	v, err := apitest.Admin()
	require.NoError(t, err)
	require.NoError(t, v.Document(), "api/admin-openapi.yaml is OpenAPI")
}

// TestAnOperatorKeyIsRequired: without a key, with a tenant's key (even an
// admin one), with an unknown or revoked operator key, every route answers
// 401; a tenant's key never reaches an operator route.
func TestAnOperatorKeyIsRequired(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	made, err := h.admin.CreateTenant(ctx, api.TenantRequest{ID: "acme"})
	require.NoError(t, err)
	tenantKey := made.Key.Secret
	require.True(t, strings.HasPrefix(tenantKey, store.KeyPrefix))
	require.True(t, strings.HasPrefix(h.secret, store.OperatorKeyPrefix))
	require.False(t, strings.HasPrefix(h.secret, store.KeyPrefix), "an operator key is not taken for a tenant's")

	paths := []struct{ method, path string }{
		{"GET", "/admin/v1/tenants"}, {"GET", "/admin/v1/tenants/acme"}, {"POST", "/admin/v1/tenants/acme/suspend"},
		{"DELETE", "/admin/v1/tenants/acme"}, {"GET", "/admin/v1/tenants/acme/keys"}, {"GET", "/admin/v1/audit"},
	}
	for _, key := range []string{"", tenantKey, store.OperatorKeyPrefix + "unknown"} {
		for _, p := range paths {
			status, code := h.status(t, p.method, p.path, key)
			require.Equal(t, http.StatusUnauthorized, status, "%s %s with %q", p.method, p.path, key)
			require.Equal(t, "unauthorized", code)
		}
	}
	got, err := h.admin.GetTenant(ctx, "acme")
	require.NoError(t, err)
	require.False(t, got.Suspended, "nothing above reached the tenant")

	_, err = h.store.RevokeOperatorKey(ctx, h.key.ID)
	require.NoError(t, err)
	status, _ := h.status(t, "GET", "/admin/v1/tenants", h.secret)
	require.Equal(t, http.StatusUnauthorized, status, "a revoked operator key is refused at once")
	keys, err := h.store.OperatorKeys(ctx)
	require.NoError(t, err)
	require.NotNil(t, keys[0].LastUsedAt, "its use was recorded")
}

// TestAnOperatorManagesATenant: make, list, read, suspend, resume, manage
// keys, settings and upstreams, and erase a tenant; each change is in the
// tenant's audit log with the operator's key as actor.
func TestAnOperatorManagesATenant(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	actor := "operator:" + h.key.ID

	made, err := h.admin.CreateTenant(ctx, api.TenantRequest{ID: "acme", Name: "Acme Corp"})
	require.NoError(t, err)
	require.Equal(t, "Acme Corp", made.Tenant.Name)
	require.Equal(t, store.Scopes, made.Key.Key.Scopes, "the first key is the tenant's administrator")
	grant, err := h.store.LookupAPIKey(ctx, made.Key.Secret)
	require.NoError(t, err)
	require.Equal(t, "acme", grant.Tenant)
	_, err = h.admin.CreateTenant(ctx, api.TenantRequest{ID: "acme"})
	e, ok := client.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, "tenant_exists", e.Code)
	_, err = h.admin.CreateTenant(ctx, api.TenantRequest{ID: "no way"})
	e, _ = client.AsError(err)
	require.Equal(t, "bad_tenant_id", e.Code)
	_, err = h.admin.CreateTenant(ctx, api.TenantRequest{ID: "globex"})
	require.NoError(t, err)

	list, err := h.admin.ListTenants(ctx)
	require.NoError(t, err)
	require.Len(t, list.Tenants, 2)
	require.Equal(t, "acme", list.Tenants[0].ID)

	suspended, err := h.admin.SuspendTenant(ctx, "acme")
	require.NoError(t, err)
	require.True(t, suspended.Suspended)
	grant, err = h.store.LookupAPIKey(ctx, made.Key.Secret)
	require.NoError(t, err)
	require.True(t, grant.Suspended, "the key check says the tenant is suspended")
	again, err := h.admin.SuspendTenant(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, suspended.SuspendedAt, again.SuspendedAt, "suspending again keeps the time")
	resumed, err := h.admin.ResumeTenant(ctx, "acme")
	require.NoError(t, err)
	require.False(t, resumed.Suspended)
	require.Nil(t, resumed.SuspendedAt)

	key, err := h.admin.CreateTenantKey(ctx, "acme", api.KeyRequest{Name: "ci", Scopes: []string{store.ScopeIngest}})
	require.NoError(t, err)
	rotated, err := h.admin.RotateTenantKey(ctx, "acme", key.Key.ID, 0)
	require.NoError(t, err)
	require.Equal(t, key.Key.ID, rotated.Previous.ID)
	revoked, err := h.admin.RevokeTenantKey(ctx, "acme", rotated.Key.ID)
	require.NoError(t, err)
	require.False(t, revoked.Active)
	keys, err := h.admin.ListTenantKeys(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, keys.Keys, 3)
	_, err = h.admin.RevokeTenantKey(ctx, "globex", key.Key.ID)
	require.True(t, client.IsNotFound(err), "a key is revoked in its own tenant only: %v", err)
	_, err = h.admin.ListTenantKeys(ctx, "nobody")
	require.True(t, client.IsNotFound(err), "an unknown tenant is 404: %v", err)

	settings, err := h.admin.PutTenantSettings(ctx, "acme", json.RawMessage(`{"tokens": {"auto_compact_percent": 80}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"tokens": {"auto_compact_percent": 80}}`, string(settings.Stored))
	var effective tenantcfg.Settings
	require.NoError(t, json.Unmarshal(settings.Effective, &effective))
	require.InDelta(t, 80, effective.Tokens.AutoCompactPercent, 0)
	_, err = h.admin.PutTenantSettings(ctx, "acme", json.RawMessage(`{"tokens": {"auto_compact_percent": 180}}`))
	e, _ = client.AsError(err)
	require.Equal(t, "bad_settings", e.Code, "settings are checked as tenantcfg checks them")
	_, err = h.admin.PutTenantSettings(ctx, "acme", json.RawMessage(`{"tokenz": {}}`))
	e, _ = client.AsError(err)
	require.Equal(t, "bad_settings", e.Code, "an unknown section is refused")
	read, err := h.admin.GetTenantSettings(ctx, "acme")
	require.NoError(t, err)
	require.JSONEq(t, string(settings.Stored), string(read.Stored), "a refused document changes nothing")

	_, err = h.admin.GetTenantUpstream(ctx, "acme", "openai")
	require.True(t, client.IsNotFound(err))
	up, err := h.admin.PutTenantUpstream(ctx, "acme", "openai", api.UpstreamRequest{URL: "https://oai.acme.example/v1/", Key: "sk-acme"})
	require.NoError(t, err)
	require.Equal(t, "https://oai.acme.example/v1", up.URL)
	held, err := h.store.TenantUpstream(ctx, "acme", store.ProviderOpenAI)
	require.NoError(t, err)
	require.Equal(t, "sk-acme", held.Key)
	_, err = h.admin.PutTenantUpstream(ctx, "acme", "openai", api.UpstreamRequest{URL: "ftp://x", Key: "k"})
	require.Error(t, err)
	_, err = h.admin.PutTenantUpstream(ctx, "acme", "gemini", api.UpstreamRequest{URL: "https://x", Key: "k"})
	e, _ = client.AsError(err)
	require.Equal(t, http.StatusBadRequest, e.Status)
	require.NoError(t, h.admin.DeleteTenantUpstream(ctx, "acme", "openai"))
	require.True(t, client.IsNotFound(h.admin.DeleteTenantUpstream(ctx, "acme", "openai")))

	audit, err := h.admin.GetAuditLog(ctx, "acme", 0, 0)
	require.NoError(t, err)
	var actions []string
	for _, r := range audit.Records {
		require.Equal(t, "acme", r.Tenant)
		require.Equal(t, actor, r.Actor, "%s is the operator's", r.Action)
		actions = append(actions, r.Action)
	}
	require.Equal(t, []string{
		"upstream.clear", "upstream.set", "tenant.settings", "key.revoke", "key.rotate", "key.create", "key.create",
		"tenant.resume", "tenant.suspend", "tenant.suspend", "key.create", "tenant.create",
	}, actions, "every change, newest first, none for what was refused")

	erased, err := h.admin.DeleteTenant(ctx, "acme")
	require.NoError(t, err)
	require.Equal(t, "tenant", erased.Kind)
	require.Positive(t, erased.Rows)
	_, err = h.admin.GetTenant(ctx, "acme")
	require.True(t, client.IsNotFound(err))
	_, err = h.admin.DeleteTenant(ctx, "acme")
	require.True(t, client.IsNotFound(err))

	all, err := h.admin.GetAuditLog(ctx, "", 0, 3)
	require.NoError(t, err)
	require.Len(t, all.Records, 3)
	require.Equal(t, "erase_tenant", all.Records[0].Action, "the log keeps the erased tenant's record")
	require.Equal(t, actor, all.Records[0].Actor)
	require.NotZero(t, all.Next)
	rest, err := h.admin.GetAuditLog(ctx, "", all.Next, 1000)
	require.NoError(t, err)
	tenants := map[string]bool{}
	for _, r := range append(all.Records, rest.Records...) {
		tenants[r.Tenant] = true
	}
	require.Equal(t, map[string]bool{"acme": true, "globex": true}, tenants, "the log of every tenant, each record naming its own")
}

// TestAPathNoRouteTakesIsAnError: under /admin/v1 an unknown path is 404
// and a known path's other method 405, both with an Error body.
func TestAPathNoRouteTakesIsAnError(t *testing.T) {
	t.Parallel()
	h := setup(t)
	status, code := h.status(t, "GET", "/admin/v1/nothing", h.secret)
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, "not_found", code)
	status, code = h.status(t, "PATCH", "/admin/v1/tenants", h.secret)
	require.Equal(t, http.StatusMethodNotAllowed, status)
	require.Equal(t, "method_not_allowed", code)
}

// TestTheSuspensionIsAnnounced: suspending and resuming a tenant announces
// each of its keys on the keys' channel, as a revocation does, so every
// gateway process checks them again.
func TestTheSuspensionIsAnnounced(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	made, err := h.admin.CreateTenant(ctx, api.TenantRequest{ID: "acme"})
	require.NoError(t, err)
	_, err = h.admin.CreateTenant(ctx, api.TenantRequest{ID: "globex"})
	require.NoError(t, err)
	announced := make(chan string, 16)
	ready := make(chan struct{})
	go func() {
		_ = h.store.ListenKeys(ctx, func() { close(ready) }, func(hash string) { announced <- hash })
	}()
	<-ready
	want := store.HashAPIKey(made.Key.Secret)
	for _, change := range []func(context.Context, string) (api.Tenant, error){h.admin.SuspendTenant, h.admin.ResumeTenant} {
		_, err := change(ctx, "acme")
		require.NoError(t, err)
		select {
		case got := <-announced:
			require.Equal(t, hexOf(want), got, "acme's key, and no other tenant's")
		case <-ctx.Done():
			t.Fatal("the key was not announced")
		}
	}
	_, err = h.admin.ResumeTenant(ctx, "acme")
	require.NoError(t, err)
	select {
	case got := <-announced:
		t.Fatalf("resuming a tenant not suspended announced %s", got)
	case <-time.After(300 * time.Millisecond):
	}
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }
