package memory

import (
	"context"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Edit is one change of a Batch: a memory written, or deleted.
type Edit struct {
	Name Name
	// Document is the memory's new content (its Name is Name); nil deletes
	// the memory.
	Document *Document
	// Expect is the edit's precondition, checked when it applies.
	Expect Expect
	// Reason, when set, is added to the batch's reason for this edit.
	Reason string
}

// Deletes reports whether the edit deletes its memory.
func (e Edit) Deletes() bool { return e.Document == nil }

// Batch is changes of one scope made together, all or none.
type Batch struct {
	Edits []Edit
	// Index, when not nil, replaces the index after the edits, as PutIndex
	// does (lines checked, memories left out appended).
	Index *string
	// IndexRevision, when above 0, is the index revision Index was made
	// on; it is checked before any edit applies.
	IndexRevision int64
}

// BatchResult is what a batch did.
type BatchResult struct {
	// Results holds one result per edit, in order.
	Results []Result
	// Index is the index edit's result (zero when the batch had none).
	Index IndexResult
}

// Changed returns the edits' results that made a revision.
func (r BatchResult) Changed() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Changed() {
			out = append(out, res)
		}
	}
	return out
}

// Apply makes every change of b in one transaction, or none of them: the
// first edit refused (a bad document, a failed Expect, a deletion of a
// memory that is not live) or an index edit refused rolls the whole batch
// back. Each edit is a revision with ch (and the edit's reason). then, when
// not nil, runs in the same transaction after the changes, so what the
// caller records of the batch commits with it.
func (s *Store) Apply(ctx context.Context, tenant string, scope Scope, b Batch, ch Change,
	then func(tx *store.Tx, res BatchResult) error) (BatchResult, error) {
	if err := s.validate(ctx, tenant, scope, ch, Document{}); err != nil {
		return BatchResult{}, err
	}
	l, err := s.limits(ctx, tenant)
	if err != nil {
		return BatchResult{}, fmt.Errorf("memory: limits of %s: %w", tenant, err)
	}
	fns := make([]changeFunc, len(b.Edits))
	for i, e := range b.Edits {
		if _, err := ParseName(string(e.Name)); err != nil {
			return BatchResult{}, s.Refused(ctx, ch.Actor, err)
		}
		if e.Deletes() {
			fns[i] = deleteMemory(scope, e.Name)
			continue
		}
		doc := e.Document.Canonical()
		if doc.Name != e.Name {
			return BatchResult{}, s.Refused(ctx, ch.Actor, Refuse(ReasonNameMismatch, "edit %d names %s, its document %s", i+1, e.Name, doc.Name))
		}
		if err := doc.Validate(l); err != nil {
			return BatchResult{}, s.Refused(ctx, ch.Actor, err)
		}
		fns[i] = writeDocument(scope, doc)
	}
	var res BatchResult
	err = s.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		res = BatchResult{Results: make([]Result, 0, len(b.Edits))}
		ix, err := tx.LockMemoryIndex(ctx, scope.String())
		if err != nil {
			return err
		}
		if b.Index != nil && b.IndexRevision > 0 && ix.Revision != b.IndexRevision {
			return Refuse(ReasonRevisionMismatch, "the index changed since the batch was made: expected index revision %d, it is at revision %d", b.IndexRevision, ix.Revision)
		}
		for i, e := range b.Edits {
			r, err := s.changeIn(ctx, tx, &ix, l, scope, e.Name, withReason(ch, e.Reason), e.Expect, fns[i].inTx())
			if err != nil {
				return fmt.Errorf("edit %d (%s): %w", i+1, e.Name, err)
			}
			res.Results = append(res.Results, r)
		}
		if b.Index != nil {
			if res.Index, err = s.putIndexIn(ctx, tx, &ix, l, scope, *b.Index, ch); err != nil {
				return err
			}
		}
		if then != nil {
			return then(tx, res)
		}
		return nil
	})
	if err != nil {
		return BatchResult{}, s.Refused(ctx, ch.Actor, err)
	}
	for _, r := range res.Results {
		s.count(ctx, ch.Actor, r)
	}
	return res, nil
}

// withReason adds an edit's own reason to the change's.
func withReason(ch Change, reason string) Change {
	switch {
	case reason == "":
	case ch.Reason == "":
		ch.Reason = reason
	default:
		ch.Reason += ": " + reason
	}
	return ch
}
