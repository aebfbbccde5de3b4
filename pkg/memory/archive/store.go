package archive

import (
	"context"

	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Import writes a into scope with mem.Import, as the actor
// memory.ActorImport, and records who (auditActor: "key:<id>", "cli")
// imported what in the audit log (scope.import), in the same transaction.
func Import(ctx context.Context, mem *memory.Store, tenant string, scope memory.Scope, a Scope, auditActor string) (memory.ImportResult, error) {
	docs := make([]memory.Document, len(a.Files))
	for i, f := range a.Files {
		docs[i] = f.Document
	}
	var index *string
	if a.HasIndex {
		index = &a.Index
	}
	ch := memory.Change{Actor: memory.ActorImport, Reason: "import by " + auditActor}
	return mem.Import(ctx, tenant, scope, docs, index, ch, func(tx *store.Tx, res memory.ImportResult) error {
		return tx.Audit(ctx, auditActor, "scope.import", scope.String(), map[string]any{
			"created": len(res.Created), "updated": len(res.Updated), "unchanged": len(res.Unchanged), "index_from": res.IndexFrom,
		})
	})
}

// Export reads scope with mem.Export and records the export in the audit
// log (scope.export), in the same transaction.
func Export(ctx context.Context, mem *memory.Store, tenant string, scope memory.Scope, auditActor string) (memory.Index, []memory.Document, error) {
	return mem.Export(ctx, tenant, scope, func(tx *store.Tx, ix memory.Index, docs []memory.Document) error {
		return tx.Audit(ctx, auditActor, "scope.export", scope.String(), map[string]any{"memories": len(docs), "index_revision": ix.Revision})
	})
}
