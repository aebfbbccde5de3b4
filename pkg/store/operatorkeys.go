package store

import (
	"context"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// OperatorKeyPrefix opens every operator key's secret: distinct from a
// tenant's (KeyPrefix), so neither is taken for the other and secret
// scanners tell them apart.
const OperatorKeyPrefix = "mnmop_"

// OperatorKey is a key of the operator API as it is listed: everything
// but its secret. It acts on every tenant; it belongs to none.
type OperatorKey struct {
	ID         string
	Name       string
	Prefix     string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// OperatorActor is who the audit log says acted for a request made with
// the operator key id.
func OperatorActor(id string) string { return "operator:" + id }

// CreateOperatorKey stores a new operator key and returns it with its
// secret, the one time the secret is known.
func (s *Store) CreateOperatorKey(ctx context.Context, name string) (OperatorKey, string, error) {
	secret := newSecret(OperatorKeyPrefix)
	row, err := dbsqlc.New(s.pool).OperatorKeyInsert(ctx, dbsqlc.OperatorKeyInsertParams{
		ID: idOf("op_", secret), Name: name, Prefix: visiblePrefix(OperatorKeyPrefix, secret), Hash: HashAPIKey(secret),
	})
	if err != nil {
		return OperatorKey{}, "", fmt.Errorf("store.CreateOperatorKey: %w", err)
	}
	return operatorKeyOf(row), secret, nil
}

// OperatorKeys lists the operator keys, revoked ones too, oldest first.
func (s *Store) OperatorKeys(ctx context.Context) ([]OperatorKey, error) {
	rows, err := dbsqlc.New(s.pool).OperatorKeyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("store.OperatorKeys: %w", err)
	}
	out := make([]OperatorKey, len(rows))
	for i, r := range rows {
		out[i] = operatorKeyOf(r)
	}
	return out, nil
}

// RevokeOperatorKey revokes the operator key id, or answers ErrNotFound.
// Revoking a revoked key changes nothing.
func (s *Store) RevokeOperatorKey(ctx context.Context, id string) (OperatorKey, error) {
	row, err := dbsqlc.New(s.pool).OperatorKeyRevoke(ctx, id)
	if err != nil {
		return OperatorKey{}, notFound(err)
	}
	return operatorKeyOf(row), nil
}

// LookupOperatorKey is the active operator key of that secret, or
// ErrNotFound; it records the key's use, at most once a minute.
func (s *Store) LookupOperatorKey(ctx context.Context, secret string) (OperatorKey, error) {
	q := dbsqlc.New(s.pool)
	row, err := q.OperatorKeyLookup(ctx, HashAPIKey(secret))
	if err != nil {
		return OperatorKey{}, notFound(err)
	}
	if err := q.OperatorKeyTouch(ctx, row.ID); err != nil {
		return OperatorKey{}, fmt.Errorf("store.LookupOperatorKey: recording its use: %w", err)
	}
	return operatorKeyOf(row), nil
}

func operatorKeyOf(r dbsqlc.OperatorKey) OperatorKey {
	return OperatorKey{ID: r.ID, Name: r.Name, Prefix: r.Prefix, CreatedAt: r.CreatedAt.Time, LastUsedAt: timeOf(r.LastUsedAt), RevokedAt: timeOf(r.RevokedAt)}
}
