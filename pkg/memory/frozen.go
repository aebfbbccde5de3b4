package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// SessionSection names the session whose memory section is asked for.
type SessionSection struct {
	SessionID string
	// MemoryScope is the session's memory_scope (from its turn events).
	MemoryScope map[string]string
	// CompactionID is the session's latest compaction ("" before the first).
	CompactionID string
	// KeepsPrefix says that compaction kept the context's beginning as it
	// was (a partial compaction "from" a pivot, made to keep the provider's
	// cached prefix): the section stored before it stays too.
	KeepsPrefix bool
}

// FrozenSection returns the memory section of a session's context (the
// texts of its system blocks; none when the session names no scope). It is
// rendered once, from the indexes of the session's scopes as they are then,
// stored with the session's compaction, and returned byte for byte the same
// until the session's next compaction — so a memory written meanwhile never
// breaks the provider's prompt cache. When two requests render it at once,
// the first one stored is the one both return.
func FrozenSection(ctx context.Context, tx *store.Tx, s SessionSection, l Limits) ([]string, error) {
	cur, err := tx.MemorySection(ctx, s.SessionID)
	found := err == nil
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("memory.FrozenSection: %w", err)
	case cur.CompactionID == s.CompactionID:
		return cur.Blocks, nil
	}
	var blocks []string
	if found && s.KeepsPrefix {
		blocks = cur.Blocks
	} else {
		var indexes []ScopeIndex
		for _, sc := range ScopesOf(s.MemoryScope) {
			ix, err := tx.MemoryIndex(ctx, sc.String())
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("memory.FrozenSection: %w", err)
			}
			indexes = append(indexes, ScopeIndex{Scope: sc, Content: ix.Content})
		}
		blocks = Section(indexes, l)
	}
	stored, err := tx.PutMemorySection(ctx, store.MemorySection{SessionID: s.SessionID, CompactionID: s.CompactionID, Blocks: blocks})
	if err != nil {
		return nil, fmt.Errorf("memory.FrozenSection: %w", err)
	}
	if stored {
		return blocks, nil
	}
	// Another request stored the section of this compaction first.
	cur, err = tx.MemorySection(ctx, s.SessionID)
	if err != nil {
		return nil, fmt.Errorf("memory.FrozenSection: %w", err)
	}
	return cur.Blocks, nil
}
