package store

import (
	"context"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// DatabaseID names the database the pool serves, apart from every other:
// "pg-<system identifier>-<oid>", the cluster's system identifier (new with
// every initdb) and the database's oid (new with every CREATE DATABASE,
// from a template or not). It stays the same across restarts and changes
// when the database is dropped and created anew. The embedded NATS keeps
// its JetStream store under it, so that a new database never inherits the
// message ids an old one's events left in the duplicate window.
func (s *Store) DatabaseID(ctx context.Context) (string, error) {
	row, err := dbsqlc.New(s.pool).DatabaseIdentity(ctx)
	if err != nil {
		return "", fmt.Errorf("store.DatabaseID: %w", err)
	}
	return fmt.Sprintf("pg-%s-%d", row.Cluster, row.DatabaseOid), nil
}
