package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
)

// ErasureTenant is the kind of a tenant's erasure: every row of it.
const ErasureTenant = "tenant"

// tenantErasureLeaves are the tables a tenant's erasure does not go
// through: the audit log, which outlives what it records; the erasure's
// own record; the tenant's row, removed when the erasure finishes
// (FinishTenantErasure), which takes the record with it.
var tenantErasureLeaves = []string{"audit_log", "erasures", "tenants"}

// TenantErasureSteps are the tables that hold rows of a tenant, read from
// the catalog so that a table added later is erased too: the tenant's API
// keys first (its requests stop), then every other table before the tables
// it refers to, so no cascade removes rows uncounted.
func (t *Tx) TenantErasureSteps(ctx context.Context) ([]string, error) {
	rows, err := (txConn{t}).Query(ctx, `
		SELECT c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
		  AND a.attname = 'tenant_id' AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("store.TenantErasureSteps: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store.TenantErasureSteps: %w", err)
	}
	tables = slices.DeleteFunc(tables, func(name string) bool { return slices.Contains(tenantErasureLeaves, name) })
	refers := map[string][]string{} // table → the tables it refers to
	rows, err = (txConn{t}).Query(ctx, `
		SELECT child.relname, parent.relname FROM pg_constraint k
		JOIN pg_class child ON child.oid = k.conrelid
		JOIN pg_class parent ON parent.oid = k.confrelid
		WHERE k.contype = 'f' AND child.oid <> parent.oid`)
	if err != nil {
		return nil, fmt.Errorf("store.TenantErasureSteps: %w", err)
	}
	var child, parent string
	if _, err := pgx.ForEachRow(rows, []any{&child, &parent}, func() error {
		refers[child] = append(refers[child], parent)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("store.TenantErasureSteps: %w", err)
	}
	return referrersFirst(tables, refers), nil
}

// referrersFirst orders tables so that each comes before every table it
// refers to, "api_keys" first; a cycle keeps the catalog's order.
func referrersFirst(tables []string, refers map[string][]string) []string {
	referredBy := map[string]int{} // how many tables not yet placed refer to it
	for _, tb := range tables {
		for _, p := range refers[tb] {
			referredBy[p]++
		}
	}
	out := make([]string, 0, len(tables))
	placed := map[string]bool{}
	place := func(tb string) {
		out = append(out, tb)
		placed[tb] = true
		for _, p := range refers[tb] {
			referredBy[p]--
		}
	}
	if slices.Contains(tables, "api_keys") && referredBy["api_keys"] == 0 {
		place("api_keys")
	}
	for len(out) < len(tables) {
		progress := false
		for _, tb := range tables {
			if !placed[tb] && referredBy[tb] == 0 {
				place(tb)
				progress = true
			}
		}
		if !progress { // a cycle: the rest as they come
			for _, tb := range tables {
				if !placed[tb] {
					place(tb)
				}
			}
		}
	}
	return out
}

// EraseTenantBatch removes at most max of the tenant's rows of table and
// adds how many to the erasure id's counts, in the same transaction.
func (t *Tx) EraseTenantBatch(ctx context.Context, id int64, table string, max int) (int64, error) {
	name := pgx.Identifier{table}.Sanitize()
	tag, err := (txConn{t}).Exec(ctx, `DELETE FROM `+name+` WHERE (tableoid, ctid) IN (SELECT tableoid, ctid FROM `+name+` WHERE tenant_id = $1 LIMIT $2)`, t.tenant, max)
	if err != nil {
		return 0, fmt.Errorf("store.EraseTenantBatch: %s: %w", table, err)
	}
	n := tag.RowsAffected()
	return n, t.countErased(ctx, id, table, n)
}

// FinishTenantErasure finishes the tenant's erasure id, writes its audit
// record, and removes the tenant's row, which takes the erasure's record
// with it: the audit record is what is left.
func (t *Tx) FinishTenantErasure(ctx context.Context, id int64, action string) (Erasure, error) {
	e, err := t.FinishErasure(ctx, id, action)
	if err != nil {
		return e, err
	}
	if _, err := (txConn{t}).Exec(ctx, `DELETE FROM tenants WHERE tenant_id = $1`, t.tenant); err != nil {
		return e, fmt.Errorf("store.FinishTenantErasure: %w", err)
	}
	return e, nil
}
