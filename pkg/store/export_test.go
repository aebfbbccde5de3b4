package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// QueryRowForTest runs a raw query inside the transaction.
func (t *Tx) QueryRowForTest(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.tx.QueryRow(ctx, sql, args...)
}
