package store

import (
	"context"
	"errors"
	"fmt"

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
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		n, err := tx.q.TenantSetSettings(ctx, dbsqlc.TenantSetSettingsParams{TenantID: tenant, Settings: doc})
		if err != nil {
			return fmt.Errorf("store.SetTenantSettings: %w", err)
		}
		if n == 0 {
			return fmt.Errorf("store.SetTenantSettings: tenant %q: %w", tenant, ErrUnknownTenant)
		}
		return nil
	})
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
		return nil
	})
}

// DeleteTenantUpstream takes the tenant's own upstream for provider away:
// it uses the process's again. It reports whether there was one.
func (s *Store) DeleteTenantUpstream(ctx context.Context, tenant string, provider Provider) (bool, error) {
	if _, err := ParseProvider(string(provider)); err != nil {
		return false, fmt.Errorf("store.DeleteTenantUpstream: %w", err)
	}
	var n int64
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		var err error
		n, err = tx.q.TenantUpstreamDelete(ctx, dbsqlc.TenantUpstreamDeleteParams{TenantID: tenant, Provider: string(provider)})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store.DeleteTenantUpstream: %w", err)
	}
	return n > 0, nil
}
