package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// QueryRowForTest runs a raw query inside the transaction, or among the
// reads of Reads.
func (t *Tx) QueryRowForTest(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.tx == nil {
		return t.db.QueryRow(ctx, sql, args...)
	}
	return t.tx.QueryRow(ctx, sql, args...)
}
