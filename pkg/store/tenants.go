package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	neturl "net/url"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// EnsureTenant creates the tenant when missing.
func (s *Store) EnsureTenant(ctx context.Context, tenant, name string) error {
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		if err := tx.q.TenantUpsert(ctx, dbsqlc.TenantUpsertParams{TenantID: tenant, Name: name}); err != nil {
			return fmt.Errorf("store.EnsureTenant: %w", err)
		}
		return nil
	})
}

// Tenant is a tenant as the operator sees it: its id and name, when it was
// made and, while it is suspended, since when.
type Tenant struct {
	ID          string
	Name        string
	CreatedAt   time.Time
	SuspendedAt *time.Time
}

// ErrTenantExists is CreateTenant's error for an id already taken.
var ErrTenantExists = errors.New("the tenant exists")

// CreateTenant makes a tenant and its first key, with every scope, and
// returns them with the key's secret, in one transaction audited as
// tenant.create and key.create by actor. A tenant of that id already is
// ErrTenantExists.
func (s *Store) CreateTenant(ctx context.Context, tenant, name, actor string) (Tenant, APIKey, string, error) {
	secret := NewSecret()
	var t Tenant
	var key APIKey
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		n, err := tx.q.TenantInsert(ctx, dbsqlc.TenantInsertParams{TenantID: tenant, Name: name})
		if err != nil {
			return fmt.Errorf("store.CreateTenant: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("store.CreateTenant: tenant %q: %w", tenant, ErrTenantExists)
		}
		row, err := tx.q.TenantGet(ctx, tenant)
		if err != nil {
			return fmt.Errorf("store.CreateTenant: %w", err)
		}
		t = tenantOf(row)
		if err := tx.Audit(ctx, actor, "tenant.create", tenant, map[string]any{"name": name}); err != nil {
			return err
		}
		key, err = tx.createAPIKey(ctx, NewAPIKey{Name: "the tenant's first key", Scopes: Scopes}, secret, actor)
		return err
	})
	return t, key, secret, err
}

// Tenants lists every tenant, by id: the operator's read across tenants.
func (s *Store) Tenants(ctx context.Context) ([]Tenant, error) {
	rows, err := dbsqlc.New(s.pool).TenantList(ctx)
	if err != nil {
		return nil, fmt.Errorf("store.Tenants: %w", err)
	}
	out := make([]Tenant, len(rows))
	for i, r := range rows {
		out[i] = Tenant{ID: r.TenantID, Name: r.Name, CreatedAt: r.CreatedAt.Time, SuspendedAt: timeOf(r.SuspendedAt)}
	}
	return out, nil
}

// TenantOf reads one tenant, or ErrUnknownTenant.
func (s *Store) TenantOf(ctx context.Context, tenant string) (Tenant, error) {
	var t Tenant
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		row, err := tx.q.TenantGet(ctx, tenant)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("store.TenantOf: tenant %q: %w", tenant, ErrUnknownTenant)
		}
		if err != nil {
			return fmt.Errorf("store.TenantOf: %w", err)
		}
		t = tenantOf(row)
		return nil
	})
	return t, err
}

// SuspendTenant suspends the tenant (suspend) or resumes it, audited as
// tenant.suspend or tenant.resume by actor, and returns it as it is now.
// While it is suspended its keys are refused; Postgres announces each of
// them on KeysChannel when the state changes, so every gateway process
// checks them again at once. Suspending a suspended tenant keeps the time
// it was suspended at.
func (s *Store) SuspendTenant(ctx context.Context, tenant string, suspend bool, actor string) (Tenant, error) {
	action := "tenant.resume"
	if suspend {
		action = "tenant.suspend"
	}
	var t Tenant
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		row, err := tx.q.TenantSetSuspended(ctx, dbsqlc.TenantSetSuspendedParams{TenantID: tenant, Suspend: suspend})
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("store.SuspendTenant: tenant %q: %w", tenant, ErrUnknownTenant)
		}
		if err != nil {
			return fmt.Errorf("store.SuspendTenant: %w", err)
		}
		t = tenantOf(row)
		return tx.Audit(ctx, actor, action, tenant, nil)
	})
	return t, err
}

func tenantOf(r dbsqlc.Tenant) Tenant {
	return Tenant{ID: r.TenantID, Name: r.Name, CreatedAt: r.CreatedAt.Time, SuspendedAt: timeOf(r.SuspendedAt)}
}

// TenantSettings returns the settings document a tenant stored ("{}" when it
// changed nothing), or ErrUnknownTenant.
func (s *Store) TenantSettings(ctx context.Context, tenant string) ([]byte, error) {
	var doc []byte
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		t, err := tx.q.TenantGet(ctx, tenant)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("store.TenantSettings: tenant %q: %w", tenant, ErrUnknownTenant)
		}
		if err != nil {
			return fmt.Errorf("store.TenantSettings: %w", err)
		}
		doc = t.Settings
		return nil
	})
	return doc, err
}

// SetTenantSettings replaces a tenant's settings document.
func (s *Store) SetTenantSettings(ctx context.Context, tenant string, doc []byte) error {
	return s.InTx(ctx, tenant, func(tx *Tx) error { return tx.setTenantSettings(ctx, doc) })
}

// SetTenantSettingsBy is SetTenantSettings audited as tenant.settings by
// actor, naming the document's sections, in the same transaction.
func (s *Store) SetTenantSettingsBy(ctx context.Context, tenant string, doc []byte, actor string) error {
	var sections map[string]json.RawMessage
	if err := json.Unmarshal(doc, &sections); err != nil {
		return fmt.Errorf("store.SetTenantSettingsBy: the document is no JSON object: %w", err)
	}
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		if err := tx.setTenantSettings(ctx, doc); err != nil {
			return err
		}
		return tx.Audit(ctx, actor, "tenant.settings", tx.tenant, map[string]any{"sections": slices.Sorted(maps.Keys(sections))})
	})
}

func (tx *Tx) setTenantSettings(ctx context.Context, doc []byte) error {
	n, err := tx.q.TenantSetSettings(ctx, dbsqlc.TenantSetSettingsParams{TenantID: tx.tenant, Settings: doc})
	if err != nil {
		return fmt.Errorf("store.SetTenantSettings: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("store.SetTenantSettings: tenant %q: %w", tx.tenant, ErrUnknownTenant)
	}
	return nil
}

// Provider names the wire format an upstream speaks. A tenant holds at most
// one upstream per provider.
type Provider string

// The providers an upstream may be.
const (
	// ProviderAnthropic is an Anthropic-compatible upstream, for the
	// Messages API proxy (POST /v1/messages).
	ProviderAnthropic Provider = "anthropic"
	// ProviderOpenAI is an OpenAI-compatible upstream, for the OpenAI routes
	// (POST /v1/responses, POST /v1/chat/completions).
	ProviderOpenAI Provider = "openai"
)

// Providers are the providers an upstream may be, in the order they are listed.
var Providers = []Provider{ProviderAnthropic, ProviderOpenAI}

// ParseProvider reads a provider's name, refusing one Mnemos does not know.
func ParseProvider(name string) (Provider, error) {
	for _, p := range Providers {
		if string(p) == name {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown provider %q: want %s or %s", name, ProviderAnthropic, ProviderOpenAI)
}

// Upstream is a tenant's upstream for one provider: a base URL and the key
// Mnemos calls it with. String never shows the key.
type Upstream struct {
	URL string
	Key string
}

// String names the upstream by its URL only: the key is a secret Mnemos
// holds for the tenant, never logged.
func (u Upstream) String() string { return u.URL }

// ErrBadUpstream is NewUpstream's error.
var ErrBadUpstream = errors.New("bad upstream")

// NewUpstream checks an upstream's base URL (http or https, with a host;
// kept without a trailing slash) and its key (one word).
func NewUpstream(rawURL, key string) (Upstream, error) {
	u, err := neturl.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return Upstream{}, fmt.Errorf("%w: the URL %q is no http or https base URL", ErrBadUpstream, rawURL)
	}
	k := strings.TrimSpace(key)
	if k == "" || strings.ContainsAny(k, " \t\r\n") {
		return Upstream{}, fmt.Errorf("%w: the key must be one word", ErrBadUpstream)
	}
	return Upstream{URL: strings.TrimSuffix(u.String(), "/"), Key: k}, nil
}

// TenantUpstream is the tenant's own upstream for provider, or ErrNotFound
// when it has none (it uses the process's).
func (s *Store) TenantUpstream(ctx context.Context, tenant string, provider Provider) (Upstream, error) {
	if _, err := ParseProvider(string(provider)); err != nil {
		return Upstream{}, fmt.Errorf("store.TenantUpstream: %w", err)
	}
	var up Upstream
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		row, err := tx.q.TenantUpstreamGet(ctx, dbsqlc.TenantUpstreamGetParams{TenantID: tenant, Provider: string(provider)})
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("store.TenantUpstream: %w", err)
		}
		up = Upstream{URL: row.Url, Key: row.ApiKey}
		return nil
	})
	return up, err
}

// SetTenantUpstream gives the tenant its own upstream for provider; its
// upstreams for other providers stay as they are.
func (s *Store) SetTenantUpstream(ctx context.Context, tenant string, provider Provider, up Upstream) error {
	return s.SetTenantUpstreamBy(ctx, tenant, provider, up, "")
}

// SetTenantUpstreamBy is SetTenantUpstream audited as upstream.set by
// actor (unless actor is empty), naming the provider and the URL, never
// the key.
func (s *Store) SetTenantUpstreamBy(ctx context.Context, tenant string, provider Provider, up Upstream, actor string) error {
	if _, err := ParseProvider(string(provider)); err != nil {
		return fmt.Errorf("store.SetTenantUpstream: %w", err)
	}
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		if _, err := tx.q.TenantGet(ctx, tenant); errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("store.SetTenantUpstream: tenant %q: %w", tenant, ErrUnknownTenant)
		} else if err != nil {
			return fmt.Errorf("store.SetTenantUpstream: %w", err)
		}
		if err := tx.q.TenantUpstreamSet(ctx, dbsqlc.TenantUpstreamSetParams{
			TenantID: tenant, Provider: string(provider), Url: up.URL, ApiKey: up.Key,
		}); err != nil {
			return fmt.Errorf("store.SetTenantUpstream: %w", err)
		}
		if actor == "" {
			return nil
		}
		return tx.Audit(ctx, actor, "upstream.set", string(provider), map[string]any{"url": up.URL})
	})
}

// DeleteTenantUpstream takes the tenant's own upstream for provider away:
// it uses the process's again. It reports whether there was one.
func (s *Store) DeleteTenantUpstream(ctx context.Context, tenant string, provider Provider) (bool, error) {
	return s.DeleteTenantUpstreamBy(ctx, tenant, provider, "")
}

// DeleteTenantUpstreamBy is DeleteTenantUpstream audited as
// upstream.clear by actor (unless actor is empty) when there was one.
func (s *Store) DeleteTenantUpstreamBy(ctx context.Context, tenant string, provider Provider, actor string) (bool, error) {
	if _, err := ParseProvider(string(provider)); err != nil {
		return false, fmt.Errorf("store.DeleteTenantUpstream: %w", err)
	}
	var n int64
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		var err error
		if n, err = tx.q.TenantUpstreamDelete(ctx, dbsqlc.TenantUpstreamDeleteParams{TenantID: tenant, Provider: string(provider)}); err != nil || n == 0 || actor == "" {
			return err
		}
		return tx.Audit(ctx, actor, "upstream.clear", string(provider), nil)
	})
	if err != nil {
		return false, fmt.Errorf("store.DeleteTenantUpstream: %w", err)
	}
	return n > 0, nil
}
