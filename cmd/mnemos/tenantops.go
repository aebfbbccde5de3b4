package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/gateway/erasureapi"
	"github.com/mnemos-ai/mnemos/services/gateway/keysapi"
	"github.com/mnemos-ai/mnemos/services/operatorapi"
)

// operatorKeyEnv names the variable that holds the operator key the tenant
// and key commands send with -api.
const operatorKeyEnv = "MNEMOS_OPERATOR_KEY"

// tenantOps is what the tenant and key commands do to tenants: in the
// database (dbOps, the default) or through the operator API of a running
// mnemos (apiOps, -api URL). The commands print the same either way.
type tenantOps interface {
	// CreateTenant makes the tenant and a first key with every scope;
	// secret, when set, registers that key instead of a new one.
	CreateTenant(ctx context.Context, id, name, secret string) (api.KeySecret, error)
	ListTenants(ctx context.Context) ([]api.Tenant, error)
	SuspendTenant(ctx context.Context, id string, suspend bool) (api.Tenant, error)
	DeleteTenant(ctx context.Context, id string) (api.Erasure, error)
	// Settings replaces the tenant's stored settings with doc (when not
	// nil), then reads them.
	Settings(ctx context.Context, id string, doc []byte) (api.TenantSettings, error)
	// Upstream sets (up not nil) or clears the tenant's own upstream for
	// p, then reads it: own is false when the tenant has none.
	Upstream(ctx context.Context, id string, p store.Provider, up *store.Upstream, clear bool) (url string, own bool, err error)
	CreateKey(ctx context.Context, tenant string, req api.KeyRequest) (api.KeySecret, error)
	ListKeys(ctx context.Context, tenant string) ([]api.Key, error)
	RevokeKey(ctx context.Context, tenant, id string) (api.Key, error)
	// RotateKey answers the new key, and the old one as Previous.
	RotateKey(ctx context.Context, tenant, id string, overlap time.Duration) (api.KeySecret, error)
	Close()
}

// apiFlag adds -api to a tenant or key command's flags.
func apiFlag(fs *flag.FlagSet) *string {
	return fs.String("api", "", "act through the operator API of the mnemos at this admin URL (e.g. http://127.0.0.1:9464), with the operator key in "+operatorKeyEnv+", instead of the database")
}

// openOps opens the commands' backend: the operator API at apiURL, or the
// database when apiURL is empty.
func openOps(ctx context.Context, apiURL string, getenv func(string) string) (tenantOps, error) {
	if apiURL == "" {
		st, err := tenantStore(ctx, getenv)
		if err != nil {
			return nil, err
		}
		return dbOps{st: st}, nil
	}
	key := getenv(operatorKeyEnv)
	if key == "" {
		return nil, fmt.Errorf("-api needs an operator key in %s (mnemos operator-key create makes one)", operatorKeyEnv)
	}
	return apiOps{c: client.NewAdmin(apiURL, key)}, nil
}

// dbOps acts in the database; the audit log names the command line.
type dbOps struct{ st *store.Store }

func (o dbOps) Close() { o.st.Close() }

func (o dbOps) CreateTenant(ctx context.Context, id, name, secret string) (api.KeySecret, error) {
	if err := o.st.EnsureTenant(ctx, id, cmp.Or(name, id)); err != nil {
		return api.KeySecret{}, err
	}
	key, secret, err := o.st.CreateAPIKey(ctx, id, store.NewAPIKey{Name: "created by mnemos tenant create", Scopes: store.Scopes, Secret: secret}, cliActor)
	return api.KeySecret{Key: keysapi.Wire(key, time.Now()), Secret: secret}, err
}

func (o dbOps) ListTenants(ctx context.Context) ([]api.Tenant, error) {
	tenants, err := o.st.Tenants(ctx)
	out := make([]api.Tenant, len(tenants))
	for i, t := range tenants {
		out[i] = operatorapi.Wire(t)
	}
	return out, err
}

func (o dbOps) SuspendTenant(ctx context.Context, id string, suspend bool) (api.Tenant, error) {
	t, err := o.st.SuspendTenant(ctx, id, suspend, cliActor)
	return operatorapi.Wire(t), err
}

// DeleteTenant erases the tenant's rows. The command line has no bus: the
// erasure ends with erasure.ErrStreamsPending, and the tenant's events in
// the streams, then its row, go by the sweep of a gateway.
func (o dbOps) DeleteTenant(ctx context.Context, id string) (api.Erasure, error) {
	er, err := erasure.New(erasure.DefaultConfig(), o.st, nil, nil).EraseTenant(ctx, id, cliActor)
	if err != nil && !errors.Is(err, erasure.ErrStreamsPending) {
		return api.Erasure{}, err
	}
	return erasureapi.Answer(er), err
}

func (o dbOps) Settings(ctx context.Context, id string, doc []byte) (api.TenantSettings, error) {
	defaults := tenantcfg.Defaults()
	if doc != nil {
		if _, err := operatorapi.Settings(defaults, doc); err != nil {
			return api.TenantSettings{}, err
		}
		if err := o.st.SetTenantSettingsBy(ctx, id, doc, cliActor); err != nil {
			return api.TenantSettings{}, err
		}
	}
	stored, err := o.st.TenantSettings(ctx, id)
	if err != nil {
		return api.TenantSettings{}, err
	}
	return operatorapi.Settings(defaults, stored)
}

func (o dbOps) Upstream(ctx context.Context, id string, p store.Provider, up *store.Upstream, clear bool) (string, bool, error) {
	switch {
	case up != nil:
		if err := o.st.SetTenantUpstreamBy(ctx, id, p, *up, cliActor); err != nil {
			return "", false, err
		}
	case clear:
		if _, err := o.st.DeleteTenantUpstreamBy(ctx, id, p, cliActor); err != nil {
			return "", false, err
		}
	}
	current, err := o.st.TenantUpstream(ctx, id, p)
	if errors.Is(err, store.ErrNotFound) {
		return "", false, nil
	}
	return current.URL, err == nil, err
}

func (o dbOps) CreateKey(ctx context.Context, tenant string, req api.KeyRequest) (api.KeySecret, error) {
	if _, err := o.st.TenantSettings(ctx, tenant); err != nil {
		return api.KeySecret{}, err // an unknown tenant
	}
	key, secret, err := o.st.CreateAPIKey(ctx, tenant, store.NewAPIKey{Name: req.Name, Scopes: req.Scopes, ExpiresAt: req.ExpiresAt}, cliActor)
	return api.KeySecret{Key: keysapi.Wire(key, time.Now()), Secret: secret}, err
}

func (o dbOps) ListKeys(ctx context.Context, tenant string) ([]api.Key, error) {
	keys, err := o.st.APIKeys(ctx, tenant)
	out := make([]api.Key, len(keys))
	for i, k := range keys {
		out[i] = keysapi.Wire(k, time.Now())
	}
	return out, err
}

func (o dbOps) RevokeKey(ctx context.Context, tenant, id string) (api.Key, error) {
	key, err := o.st.RevokeAPIKey(ctx, tenant, id, cliActor)
	return keysapi.Wire(key, time.Now()), err
}

func (o dbOps) RotateKey(ctx context.Context, tenant, id string, overlap time.Duration) (api.KeySecret, error) {
	old, key, secret, err := o.st.RotateAPIKey(ctx, tenant, id, overlap, cliActor)
	previous := keysapi.Wire(old, time.Now())
	return api.KeySecret{Key: keysapi.Wire(key, time.Now()), Secret: secret, Previous: &previous}, err
}

// apiOps acts through the operator API; the audit log names its operator key.
type apiOps struct{ c *client.Admin }

func (apiOps) Close() {}

func (o apiOps) CreateTenant(ctx context.Context, id, name, secret string) (api.KeySecret, error) {
	if secret != "" {
		return api.KeySecret{}, errors.New("tenant create: -key registers a known key in the database; it takes no -api")
	}
	made, err := o.c.CreateTenant(ctx, api.TenantRequest{ID: id, Name: name})
	return made.Key, err
}

func (o apiOps) ListTenants(ctx context.Context) ([]api.Tenant, error) {
	list, err := o.c.ListTenants(ctx)
	return list.Tenants, err
}

func (o apiOps) SuspendTenant(ctx context.Context, id string, suspend bool) (api.Tenant, error) {
	if suspend {
		return o.c.SuspendTenant(ctx, id)
	}
	return o.c.ResumeTenant(ctx, id)
}

func (o apiOps) DeleteTenant(ctx context.Context, id string) (api.Erasure, error) {
	return o.c.DeleteTenant(ctx, id)
}

func (o apiOps) Settings(ctx context.Context, id string, doc []byte) (api.TenantSettings, error) {
	if doc != nil {
		if !json.Valid(doc) {
			return api.TenantSettings{}, errors.New("tenant settings: the document is no JSON")
		}
		return o.c.PutTenantSettings(ctx, id, doc)
	}
	return o.c.GetTenantSettings(ctx, id)
}

func (o apiOps) Upstream(ctx context.Context, id string, p store.Provider, up *store.Upstream, clear bool) (string, bool, error) {
	switch {
	case up != nil:
		set, err := o.c.PutTenantUpstream(ctx, id, string(p), api.UpstreamRequest{URL: up.URL, Key: up.Key})
		return set.URL, err == nil, err
	case clear:
		if err := o.c.DeleteTenantUpstream(ctx, id, string(p)); err != nil && !client.IsNotFound(err) {
			return "", false, err
		}
	}
	current, err := o.c.GetTenantUpstream(ctx, id, string(p))
	if client.IsNotFound(err) {
		if _, err := o.c.GetTenant(ctx, id); err != nil {
			return "", false, err // the tenant, not its upstream, is missing
		}
		return "", false, nil
	}
	return current.URL, err == nil, err
}

func (o apiOps) CreateKey(ctx context.Context, tenant string, req api.KeyRequest) (api.KeySecret, error) {
	return o.c.CreateTenantKey(ctx, tenant, req)
}

func (o apiOps) ListKeys(ctx context.Context, tenant string) ([]api.Key, error) {
	list, err := o.c.ListTenantKeys(ctx, tenant)
	return list.Keys, err
}

func (o apiOps) RevokeKey(ctx context.Context, tenant, id string) (api.Key, error) {
	return o.c.RevokeTenantKey(ctx, tenant, id)
}

func (o apiOps) RotateKey(ctx context.Context, tenant, id string, overlap time.Duration) (api.KeySecret, error) {
	return o.c.RotateTenantKey(ctx, tenant, id, overlap)
}
