package store

import (
	"context"
	"fmt"

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

// TenantForAPIKey returns the tenant an active key belongs to, or ErrNotFound.
func (s *Store) TenantForAPIKey(ctx context.Context, key string) (string, error) {
	tenant, err := dbsqlc.New(s.pool).APIKeyTenant(ctx, HashAPIKey(key))
	if err != nil {
		return "", notFound(err)
	}
	return tenant, nil
}
