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

// AddAPIKey stores the key's hash for tenant. Adding the same key twice is a no-op.
func (s *Store) AddAPIKey(ctx context.Context, tenant, name, key string) error {
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		err := tx.q.APIKeyInsert(ctx, dbsqlc.APIKeyInsertParams{KeyHash: HashAPIKey(key), TenantID: tenant, Name: name})
		if err != nil {
			return fmt.Errorf("store.AddAPIKey: %w", err)
		}
		return nil
	})
}

// TenantForAPIKey returns the tenant an active key belongs to, or
// ErrNotFound. No tenant is known yet, so it asks the owner's function,
// which answers for this one key only.
func (s *Store) TenantForAPIKey(ctx context.Context, key string) (string, error) {
	tenant, err := dbsqlc.New(s.pool).APIKeyTenant(ctx, HashAPIKey(key))
	if err != nil {
		return "", notFound(err)
	}
	return tenant, nil
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
