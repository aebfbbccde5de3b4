package console

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

var sessionLink = regexp.MustCompile(`href="/console/sessions/([A-Za-z0-9_-]+)"`)
var nextLink = regexp.MustCompile(`href="(/console/sessions\?[^"]+)" rel="next"`)

// walk follows a listing's pages from path and returns the sessions in
// the order shown.
func walk(t *testing.T, b *browserless, path string) []string {
	t.Helper()
	var ids []string
	for pages := 0; path != ""; pages++ {
		require.Less(t, pages, 10, "the pages do not end")
		status, body := b.get(t, strings.ReplaceAll(path, "&amp;", "&"))
		require.Equal(t, http.StatusOK, status, body)
		for _, m := range sessionLink.FindAllStringSubmatch(body, -1) {
			ids = append(ids, m[1])
		}
		path = ""
		if m := nextLink.FindStringSubmatch(body); m != nil {
			path = m[1]
		}
	}
	return ids
}

// TestSessionsList pages through more sessions than a page holds in each
// order, and filters them: every session once, in its order.
func TestSessionsList(t *testing.T) {
	h := setup(t)
	const n = pageSize + 7
	for i := 1; i <= n; i++ {
		h.postTurn(t, keyA, fmt.Sprintf("s-%03d", i), 1, 1_000*(i*37%n+1)) // sizes out of creation order
	}
	h.postTurn(t, keyA, "s-big", 1, 150_000)
	for i := 1; i <= n; i++ {
		h.waitApplied(t, tenantA, fmt.Sprintf("s-%03d", i), 1)
	}
	h.waitApplied(t, tenantA, "s-big", 1)
	a := h.signIn(t, keyA)
	ctx := context.Background()

	for _, sort := range []string{"created", "activity", "size"} {
		t.Run(sort, func(t *testing.T) {
			ids := walk(t, a, "/console/sessions?sort="+sort)
			require.Len(t, ids, n+1)
			seen := map[string]bool{}
			for _, id := range ids {
				require.False(t, seen[id], "%s listed twice", id)
				seen[id] = true
			}
			var keys []int64
			for _, id := range ids {
				s, err := h.store.GetSession(ctx, tenantA, id)
				require.NoError(t, err)
				switch sort {
				case "created":
					keys = append(keys, s.CreatedAt.UnixMicro())
				case "activity":
					keys = append(keys, s.UpdatedAt.UnixMicro())
				case "size":
					keys = append(keys, s.TokenCount)
				}
			}
			require.True(t, slices.IsSortedFunc(keys, func(x, y int64) int { return int(y - x) }), "not in %s order: %v", sort, keys)
			if sort == "size" {
				require.Equal(t, "s-big", ids[0])
			}
		})
	}

	// Filters: the one session past the error threshold; none of another agent.
	require.Equal(t, []string{"s-big"}, walk(t, a, "/console/sessions?state=error&sort=size"))
	require.Empty(t, walk(t, a, "/console/sessions?agent=nobody"))
	require.Len(t, walk(t, a, "/console/sessions?scope=project:console"), n+1)
	require.Empty(t, walk(t, a, "/console/sessions?scope=project:other"))

	// Search by id opens the session; a cursor of another order is refused.
	status, _ := a.get(t, "/console/sessions?q=s-big")
	require.Equal(t, http.StatusSeeOther, status)
	status, _ = a.get(t, "/console/sessions?sort=size&cursor=created:1:s-001")
	require.Equal(t, http.StatusBadRequest, status)
	status, _ = a.get(t, "/console/sessions?sort=sideways")
	require.Equal(t, http.StatusBadRequest, status)
}

// TestLargeContextIsNotListed: a session page does not read a context over
// ContextListBytes, and says where to read it.
func TestLargeContextIsNotListed(t *testing.T) {
	h := setup(t)
	h.postTurn(t, keyA, "small", 1, 1_000)
	h.waitApplied(t, tenantA, "small", 1)
	a := h.signIn(t, keyA)
	status, body := a.get(t, "/console/sessions/small")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `<table id="context">`)
	h.console.cfg.ContextListBytes = 100
	status, body = a.get(t, "/console/sessions/small")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, body, `<table id="context">`)
	require.Contains(t, body, "GET /v1/sessions/small/context")
}

// TestSessionPageListsItsAgents: a session the model proxy follows lists
// its threads, each linked to its own page; another tenant's page of the
// same id shows none of them.
func TestSessionPageListsItsAgents(t *testing.T) {
	h := setup(t)
	h.postTurn(t, keyA, "proxied", 1, 1_000)
	h.waitApplied(t, tenantA, "proxied", 1)
	ctx := context.Background()
	require.NoError(t, h.store.InTx(ctx, tenantA, func(tx *store.Tx) error {
		sub := store.Thread{SessionID: "proxied", ThreadID: "proxied--agent-0123456789ab", AgentID: "agent-0123456789ab", Kind: store.ThreadAgent}
		if _, err := tx.LockSession(ctx, sub.ThreadID, sub.AgentID); err != nil {
			return err
		}
		main := store.Thread{SessionID: "proxied", ThreadID: "proxied", AgentID: "main", Kind: store.ThreadMain}
		if err := tx.PutThreadRound(ctx, main, 0, [][]byte{{1}, {2}}); err != nil {
			return err
		}
		if err := tx.PutThreadRound(ctx, sub, 0, [][]byte{{3}, {4}, {5}, {6}}); err != nil {
			return err
		}
		return tx.RecordProxyRound(ctx, sub.ThreadID, 1, 4)
	}))
	status, body := h.signIn(t, keyA).get(t, "/console/sessions/proxied")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `<table id="agents">`)
	require.Contains(t, body, `href="/console/sessions/proxied--agent-0123456789ab"`)
	require.Contains(t, body, `<td class="num">4</td>`)

	h.postTurn(t, keyB, "proxied", 1, 1_000)
	h.waitApplied(t, tenantB, "proxied", 1)
	status, body = h.signIn(t, keyB).get(t, "/console/sessions/proxied")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, body, `<table id="agents">`)
}
