package api

import (
	"encoding/json"
	"time"
)

// The bodies of the operator API (/admin/v1 on the admin listener,
// admin-openapi.yaml), which manages tenants with an operator key.

// Tenant is a tenant as an operator sees it. SuspendedAt is set while it
// is suspended: its keys are refused then.
type Tenant struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	CreatedAt   time.Time  `json:"created_at"`
	Suspended   bool       `json:"suspended"`
	SuspendedAt *time.Time `json:"suspended_at,omitempty"`
}

// TenantList is every tenant, by id.
type TenantList struct {
	Tenants []Tenant `json:"tenants"`
}

// TenantRequest makes a tenant: its id and, optionally, a display name
// (its id when empty).
type TenantRequest struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
}

// TenantCreated is a tenant just made and its first key, with every scope,
// and that key's secret: the only answer that holds it.
type TenantCreated struct {
	Tenant Tenant    `json:"tenant"`
	Key    KeySecret `json:"key"`
}

// TenantSettings is a tenant's settings: the document it stored (what it
// changed from the defaults) and the effective settings, the defaults
// under it.
type TenantSettings struct {
	Stored    json.RawMessage `json:"stored"`
	Effective json.RawMessage `json:"effective"`
}

// Upstream is a tenant's own upstream for a provider (anthropic or
// openai): its base URL. The key Mnemos calls it with is never shown.
type Upstream struct {
	Provider string `json:"provider"`
	URL      string `json:"url"`
}

// UpstreamRequest sets a tenant's own upstream for a provider: its base
// URL and the key to call it with.
type UpstreamRequest struct {
	URL string `json:"url"`
	Key string `json:"key"`
}
