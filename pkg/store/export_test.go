package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// QueryRowForTest runs a raw query inside the transaction, or among the
// reads of Reads.
func (t *Tx) QueryRowForTest(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.conn == nil {
		return t.db.QueryRow(ctx, sql, args...)
	}
	return txConn{t}.QueryRow(ctx, sql, args...)
}
