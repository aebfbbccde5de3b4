package sessionctx_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestLoadReadsEveryDecision: the decisions of micro-compaction and of the
// context-management edits come back apart, each by its kind; an offload
// is none of them.
func TestLoadReadsEveryDecision(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.round(t, "s", 1)
	e.round(t, "s", 2)
	ctx := context.Background()
	require.NoError(t, e.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		for _, r := range []store.Replacement{
			{ToolUseID: "s-call-1", Kind: store.ReplaceMicrocompact, Text: assembly.ClearedText},
			{ToolUseID: "s-call-1", Kind: store.ReplaceClearToolUses, Text: assembly.ClearedText},
			{ToolUseID: "s-call-2", Kind: store.ReplaceClearToolInput, Text: assembly.ClearedInput},
			{ToolUseID: "s-a1", Kind: store.ReplaceClearThinking},
			{ToolUseID: "s-call-2", Kind: store.ReplaceOffload, Text: "offloaded"},
		} {
			r.SessionID = "s"
			if err := tx.RecordReplacement(ctx, r); err != nil {
				return err
			}
		}
		return nil
	}))
	c := sessionctx.NewCache(64 << 20)
	cached, plain := e.load(t, c, "s")
	for _, st := range []sessionctx.State{cached, plain} {
		require.Equal(t, map[string]bool{"s-call-1": true}, st.Cleared)
		require.Equal(t, assembly.Cuts{
			ToolUses: map[string]bool{"s-call-1": true},
			Inputs:   map[string]bool{"s-call-2": true},
			Thinking: map[string]bool{"s-a1": true},
		}, st.Cuts)
	}
}
