package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/mnemos-ai/mnemos/api"
)

// Admin calls the operator API of one Mnemos process (/admin/v1 on its
// admin listener, api/admin-openapi.yaml) with an operator key: one method
// per operation, named after its operationId. Errors are as Client's.
type Admin struct {
	c *Client
}

// NewAdmin returns a client of the operator API at adminURL
// ("http://localhost:9090", the admin listener) sending operatorKey as its
// bearer token.
func NewAdmin(adminURL, operatorKey string, opts ...Option) *Admin {
	return &Admin{c: New(adminURL, operatorKey, opts...)}
}

func tenantPath(tenant string) string { return "/admin/v1/tenants/" + segment(tenant) }

// ListTenants lists every tenant, by id.
func (a *Admin) ListTenants(ctx context.Context) (api.TenantList, error) {
	var out api.TenantList
	_, _, err := a.c.call(ctx, get("/admin/v1/tenants"), &out)
	return out, err
}

// CreateTenant makes a tenant and its first key, with every scope, and
// answers the key's secret, shown this once.
func (a *Admin) CreateTenant(ctx context.Context, req api.TenantRequest) (api.TenantCreated, error) {
	return sendFor[api.TenantCreated](ctx, a.c, http.MethodPost, "/admin/v1/tenants", req, http.StatusCreated)
}

// GetTenant reads one tenant.
func (a *Admin) GetTenant(ctx context.Context, tenant string) (api.Tenant, error) {
	var out api.Tenant
	_, _, err := a.c.call(ctx, get(tenantPath(tenant)), &out)
	return out, err
}

// DeleteTenant erases the tenant, every row of it, and answers what went.
func (a *Admin) DeleteTenant(ctx context.Context, tenant string) (api.Erasure, error) {
	return sendFor[api.Erasure](ctx, a.c, http.MethodDelete, tenantPath(tenant), nil, http.StatusOK)
}

// SuspendTenant suspends the tenant: its keys are refused within a second.
func (a *Admin) SuspendTenant(ctx context.Context, tenant string) (api.Tenant, error) {
	return sendFor[api.Tenant](ctx, a.c, http.MethodPost, tenantPath(tenant)+"/suspend", nil, http.StatusOK)
}

// ResumeTenant resumes a suspended tenant.
func (a *Admin) ResumeTenant(ctx context.Context, tenant string) (api.Tenant, error) {
	return sendFor[api.Tenant](ctx, a.c, http.MethodPost, tenantPath(tenant)+"/resume", nil, http.StatusOK)
}

// ListTenantKeys lists the tenant's API keys, without secrets.
func (a *Admin) ListTenantKeys(ctx context.Context, tenant string) (api.KeyList, error) {
	var out api.KeyList
	_, _, err := a.c.call(ctx, get(tenantPath(tenant)+"/keys"), &out)
	return out, err
}

// CreateTenantKey makes an API key of the tenant and answers its secret,
// shown this once.
func (a *Admin) CreateTenantKey(ctx context.Context, tenant string, req api.KeyRequest) (api.KeySecret, error) {
	return sendFor[api.KeySecret](ctx, a.c, http.MethodPost, tenantPath(tenant)+"/keys", req, http.StatusCreated)
}

// GetTenantKey reads one API key of the tenant.
func (a *Admin) GetTenantKey(ctx context.Context, tenant, id string) (api.Key, error) {
	var out api.Key
	_, _, err := a.c.call(ctx, get(tenantPath(tenant)+"/keys/"+segment(id)), &out)
	return out, err
}

// RevokeTenantKey revokes an API key of the tenant.
func (a *Admin) RevokeTenantKey(ctx context.Context, tenant, id string) (api.Key, error) {
	return sendFor[api.Key](ctx, a.c, http.MethodDelete, tenantPath(tenant)+"/keys/"+segment(id), nil, http.StatusOK)
}

// RotateTenantKey makes a key in place of the tenant's key id, which stays
// good for overlap.
func (a *Admin) RotateTenantKey(ctx context.Context, tenant, id string, overlap time.Duration) (api.KeySecret, error) {
	return sendFor[api.KeySecret](ctx, a.c, http.MethodPost, tenantPath(tenant)+"/keys/"+segment(id)+"/rotate",
		api.RotateRequest{OverlapSeconds: int64(overlap / time.Second)}, http.StatusCreated)
}

// GetTenantSettings reads the tenant's stored and effective settings.
func (a *Admin) GetTenantSettings(ctx context.Context, tenant string) (api.TenantSettings, error) {
	var out api.TenantSettings
	_, _, err := a.c.call(ctx, get(tenantPath(tenant)+"/settings"), &out)
	return out, err
}

// PutTenantSettings replaces the tenant's stored settings with doc, a JSON
// object.
func (a *Admin) PutTenantSettings(ctx context.Context, tenant string, doc json.RawMessage) (api.TenantSettings, error) {
	var out api.TenantSettings
	r := request{method: http.MethodPut, path: tenantPath(tenant) + "/settings", body: doc, contentType: "application/json", ok: []int{http.StatusOK}}
	_, _, err := a.c.call(ctx, r, &out)
	return out, err
}

// GetTenantUpstream reads the tenant's own upstream for provider
// (anthropic, openai); IsNotFound when it has none.
func (a *Admin) GetTenantUpstream(ctx context.Context, tenant, provider string) (api.Upstream, error) {
	var out api.Upstream
	_, _, err := a.c.call(ctx, get(tenantPath(tenant)+"/upstreams/"+segment(provider)), &out)
	return out, err
}

// PutTenantUpstream sets the tenant's own upstream for provider.
func (a *Admin) PutTenantUpstream(ctx context.Context, tenant, provider string, req api.UpstreamRequest) (api.Upstream, error) {
	return sendFor[api.Upstream](ctx, a.c, http.MethodPut, tenantPath(tenant)+"/upstreams/"+segment(provider), req, http.StatusOK)
}

// DeleteTenantUpstream takes the tenant's own upstream for provider away;
// IsNotFound when it had none.
func (a *Admin) DeleteTenantUpstream(ctx context.Context, tenant, provider string) error {
	_, _, _, err := a.c.do(ctx, request{method: http.MethodDelete, path: tenantPath(tenant) + "/upstreams/" + segment(provider), ok: []int{http.StatusNoContent}})
	return err
}

// GetAuditLog reads a page of the audit log, newest first, of every
// tenant (tenant "") or of one: before 0 starts at the newest, limit 0
// asks for the server's 100.
func (a *Admin) GetAuditLog(ctx context.Context, tenant string, before int64, limit int) (api.AuditLog, error) {
	var out api.AuditLog
	r := get("/admin/v1/audit")
	r.query = auditQuery(before, limit)
	if tenant != "" {
		r.query.Set("tenant", tenant)
	}
	_, _, err := a.c.call(ctx, r, &out)
	return out, err
}

// sendFor sends body (none when nil) as JSON and decodes the answer.
func sendFor[T any](ctx context.Context, c *Client, method, path string, body any, ok int) (T, error) {
	var out T
	r, err := send(method, path, body, ok)
	if err != nil {
		return out, err
	}
	_, _, err = c.call(ctx, r, &out)
	return out, err
}
