package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Where an imported scope's index comes from.
const (
	// IndexFromArchive: the archive's MEMORY.md, every line of it valid
	// against the scope after the import (memories it leaves out appended).
	IndexFromArchive = "archive"
	// IndexFromMemories: the index as the writes kept it in step, each
	// new memory appended with its default line; the archive had no
	// MEMORY.md, or one CheckIndex refuses.
	IndexFromMemories = "memories"
)

// ImportResult is what an import did.
type ImportResult struct {
	Created, Updated, Unchanged []Name
	Index                       Index
	// IndexFrom is IndexFromArchive or IndexFromMemories; IndexProblem
	// says why the archive's index was not used, when it was not.
	IndexFrom    string
	IndexProblem string
}

// Import writes docs into scope, all or none, each a revision with ch
// (whose actor is ActorImport for an archive), and then the index: index,
// when given and CheckIndex accepts it against the scope's live memories
// after the writes, replaces it (as PutIndex would); otherwise the index
// stays as the writes kept it. Memories of the scope that docs do not name
// are left as they are. then, when not nil, runs in the same transaction.
func (s *Store) Import(ctx context.Context, tenant string, scope Scope, docs []Document, index *string, ch Change,
	then func(tx *store.Tx, res ImportResult) error) (ImportResult, error) {
	if err := s.validate(ctx, tenant, scope, ch, Document{}); err != nil {
		return ImportResult{}, err
	}
	l, err := s.limits(ctx, tenant)
	if err != nil {
		return ImportResult{}, fmt.Errorf("memory: limits of %s: %w", tenant, err)
	}
	fns := make([]changeFunc, len(docs))
	seen := make(map[Name]bool, len(docs))
	for i, d := range docs {
		d = d.Canonical()
		if err := d.Validate(l); err != nil {
			e, _ := AsError(err)
			return ImportResult{}, s.Refused(ctx, ch.Actor, Refuse(e.Reason, "%s: %s", d.Name.File(), e.Detail))
		}
		if seen[d.Name] {
			return ImportResult{}, s.Refused(ctx, ch.Actor, Refuse(ReasonBadRequest, "%s is given twice", d.Name.File()))
		}
		seen[d.Name] = true
		docs[i], fns[i] = d, writeDocument(scope, d)
	}
	var res ImportResult
	var results []Result
	err = s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		res, results = ImportResult{}, results[:0]
		ix, err := tx.LockMemoryIndex(ctx, scope.String())
		if err != nil {
			return err
		}
		for i, d := range docs {
			r, err := s.changeIn(ctx, tx, &ix, l, scope, d.Name, ch, Expect{}, fns[i].inTx())
			if err != nil {
				return fmt.Errorf("%s: %w", d.Name.File(), err)
			}
			results = append(results, r)
			switch r.Op {
			case OpCreated:
				res.Created = append(res.Created, d.Name)
			case "":
				res.Unchanged = append(res.Unchanged, d.Name)
			default:
				res.Updated = append(res.Updated, d.Name)
			}
		}
		res.IndexFrom, res.Index = IndexFromMemories, toIndex(scope, ix)
		if index != nil {
			ir, err := s.putIndexIn(ctx, tx, &ix, l, scope, *index, ch)
			if e, ok := AsError(err); ok {
				res.IndexProblem = e.Detail
			} else if err != nil {
				return err
			} else {
				res.IndexFrom, res.Index = IndexFromArchive, ir.Index
			}
		}
		if then != nil {
			return then(tx, res)
		}
		return nil
	})
	if err != nil {
		return ImportResult{}, s.Refused(ctx, ch.Actor, err)
	}
	for _, r := range results {
		s.count(ctx, ch.Actor, r)
	}
	return res, nil
}

// Export reads a scope's index and its live memories, in the order of
// their names, in one transaction, so the two agree. then, when not nil,
// runs in the same transaction (an audit row).
func (s *Store) Export(ctx context.Context, tenant string, scope Scope, then func(tx *store.Tx, ix Index, docs []Document) error) (Index, []Document, error) {
	var ix Index
	var docs []Document
	err := s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		ix, docs = Index{Scope: scope}, nil
		r, err := tx.MemoryIndex(ctx, scope.String())
		switch {
		case err == nil:
			ix = toIndex(scope, r)
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		rows, err := tx.Memories(ctx, scope.String(), false, maxScopeMemories)
		if err != nil {
			return err
		}
		for _, m := range rows {
			docs = append(docs, documentOf(m))
		}
		slices.SortFunc(docs, func(a, b Document) int { return strings.Compare(string(a.Name), string(b.Name)) })
		if then != nil {
			return then(tx, ix, docs)
		}
		return nil
	})
	return ix, docs, err
}
