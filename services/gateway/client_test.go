package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/pkg/health"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// TestClientCallsEveryRoute calls each operation of the document through
// the typed client against a real gateway, every answer validated against
// api/openapi.yaml (the harness's client), and checks what it decoded.
func TestClientCallsEveryRoute(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	mux := http.NewServeMux()
	health.Register(mux, map[string]health.Check{"postgres": func(context.Context) error { return nil }}, map[string]string{"gateway": "serving"})
	h.gw.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, "key-acme", client.WithHTTPClient(h.client))
	code := func(err error) string {
		t.Helper()
		e, ok := client.AsError(err)
		require.True(t, ok, "%v", err)
		return e.Code
	}

	// Operations.
	hz, err := c.Healthz(ctx)
	require.NoError(t, err)
	require.Equal(t, api.Health{Status: "ok", Targets: map[string]string{"gateway": "serving"}}, hz)
	rz, err := c.Readyz(ctx)
	require.NoError(t, err)
	require.Equal(t, "ready", rz.Status)
	doc, err := c.OpenAPI(ctx)
	require.NoError(t, err)
	require.True(t, json.Valid(doc))

	// Turns and sessions.
	acc, err := c.PostTurn(ctx, event("s1", 1))
	require.NoError(t, err)
	require.Equal(t, api.TurnAccepted{EventID: "s1-1", Subject: h.bus.Subject("turn.completed", "acme", "s1")}, acc)
	_, err = c.GetSession(ctx, "s1")
	require.True(t, client.IsNotFound(err), "the gateway alone applies nothing: %v", err)
	h.saveSession(t, "s1", func(s *sessionstate.Session) { s.TokenCount, s.AppliedSeq, s.MessageCount = 1_200, 1, 2 })
	sess, err := c.GetSession(ctx, "s1")
	require.NoError(t, err)
	require.Equal(t, int64(1_200), sess.Tokens.Count)
	require.Equal(t, int64(1), sess.AppliedSeq)
	pf, err := c.Preflight(ctx, "s1", api.PreflightRequest{InputMessages: []turn.Message{{UUID: "p1", Role: "user", Content: turn.Content{{Type: "text", Text: "and now?"}}}}})
	require.NoError(t, err)
	require.Positive(t, pf.Count)
	require.Equal(t, "ok", pf.State)
	require.False(t, pf.Blocked)
	_, err = c.Preflight(ctx, "s1", api.PreflightRequest{ContextWindow: 1_000})
	require.Equal(t, "bad_context_window", code(err))
	require.NoError(t, h.store.InTx(ctx, "acme", func(tx *store.Tx) error {
		return tx.InsertToolResult(ctx, store.ToolResult{ID: "tr-1", SessionID: "s1", MessageUUID: "u1", ToolUseID: "t1", Content: "whole output", SizeChars: 12})
	}))
	tr, err := c.GetToolResult(ctx, "tr-1")
	require.NoError(t, err)
	require.Equal(t, "whole output", tr.Content)
	cx, err := c.GetContext(ctx, "s1", client.ContextOptions{Wait: "0"})
	require.NoError(t, err)
	require.Equal(t, "s1", cx.SessionID)
	require.Nil(t, cx.Compaction)
	_, err = c.GetContext(ctx, "s1", client.ContextOptions{Wait: "forever"})
	require.Equal(t, "bad_wait", code(err))
	_, err = c.GetNotes(ctx, "s1")
	require.True(t, client.IsNotFound(err))
	usage, err := c.GetUsage(ctx, "", "")
	require.NoError(t, err)
	require.Empty(t, usage.Rows)
	require.Equal(t, "0", usage.Total.CostUSD)
	_, err = c.GetUsage(ctx, "last week", "")
	require.Equal(t, "bad_day", code(err))
	su, err := c.GetSessionUsage(ctx, "s1")
	require.NoError(t, err)
	require.Equal(t, api.SessionUsage{SessionID: "s1", ProxyAmounts: api.ProxyAmounts{CostUSD: "0", StraightCostUSD: "0", SavingsUSD: "0"},
		Threads: []api.ThreadUsage{{Thread: "s1", ProxyAmounts: api.ProxyAmounts{CostUSD: "0", StraightCostUSD: "0", SavingsUSD: "0"}}}}, su,
		"a session no proxied round priced costs nothing")
	_, err = c.GetSessionUsage(ctx, "no-such-session")
	require.True(t, client.IsNotFound(err))
	_, err = c.GetNotesMarkdown(ctx, "s1")
	require.True(t, client.IsNotFound(err))
	_, err = c.Recall(ctx, "s1", api.RecallRequest{Query: "how do I release?"})
	require.Equal(t, "recall_unavailable", code(err), "this gateway serves no recall")

	// Compactions: requested without waiting (no compactor runs here).
	noWait := false
	cp, err := c.Compact(ctx, "s1", api.CompactRequest{Wait: &noWait})
	require.NoError(t, err)
	require.Equal(t, "requested", cp.Status)
	require.False(t, cp.Ended())
	got, err := c.GetCompaction(ctx, cp.ID)
	require.NoError(t, err)
	require.Equal(t, cp.ID, got.ID)
	list, err := c.ListCompactions(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, list.Compactions, 1)

	// Memories.
	const scope = "user:u-42"
	m, err := c.PutMemory(ctx, scope, "release", memoryMarkdown("release", "How to release", "Tag, then push."), client.WriteOptions{IfNoneMatch: true, Reason: "learned"})
	require.NoError(t, err)
	require.Equal(t, "created", m.Op)
	m, err = c.PutMemory(ctx, scope, "release", memoryMarkdown("release", "How to release", "Tag, push, announce."), client.WriteOptions{IfMatch: m.Revision, SessionID: "s1", SourceTurns: []string{"s1-1"}})
	require.NoError(t, err)
	require.Equal(t, "updated", m.Op)
	require.Equal(t, int64(2), m.Revision)
	_, err = c.PutMemory(ctx, scope, "release", memoryMarkdown("release", "x", "y"), client.WriteOptions{IfMatch: 1})
	require.Equal(t, "revision_mismatch", code(err))
	m, err = c.GetMemory(ctx, scope, "release.md")
	require.NoError(t, err)
	require.Contains(t, m.Markdown, "announce")
	md, err := c.GetMemoryMarkdown(ctx, scope, "release")
	require.NoError(t, err)
	require.Equal(t, m.Markdown, md)
	ms, err := c.ListMemories(ctx, scope, false)
	require.NoError(t, err)
	require.Len(t, ms.Memories, 1)
	revs, err := c.ListRevisions(ctx, scope, "release")
	require.NoError(t, err)
	require.Len(t, revs.Revisions, 2)
	require.Equal(t, "agent", revs.Revisions[1].Actor)
	rev, err := c.GetRevision(ctx, scope, "release", 1)
	require.NoError(t, err)
	require.Contains(t, rev.Markdown, "Tag, then push.")
	diff, err := c.DiffRevisions(ctx, scope, "release", 0, 0)
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 2}, [2]int64{diff.From, diff.To})
	require.Contains(t, diff.Diff, "+Tag, push, announce.")
	m, err = c.DeleteMemory(ctx, scope, "release", client.WriteOptions{})
	require.NoError(t, err)
	require.NotNil(t, m.DeletedAt)
	ms, err = c.ListMemories(ctx, scope, true)
	require.NoError(t, err)
	require.Len(t, ms.Memories, 1, "deleted ones too")
	m, err = c.RestoreRevision(ctx, scope, "release", 1, client.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(1), m.RestoredFrom)
	ix, err := c.GetIndex(ctx, scope)
	require.NoError(t, err)
	ix, err = c.PutIndex(ctx, scope, "", client.WriteOptions{IfMatch: ix.Revision})
	require.NoError(t, err)
	require.NotNil(t, ix.Changed)
	require.Contains(t, ix.Appended, "release", "an edit that leaves a memory out gets it appended")
	tgz, err := c.ExportScope(ctx, scope)
	require.NoError(t, err)
	imported, err := c.ImportScope(ctx, "project:p-copy", tgz)
	require.NoError(t, err)
	require.Equal(t, []string{"release"}, imported.Created)
	require.Equal(t, "archive", imported.IndexFrom)

	// A session's history (the gateway alone applies nothing: s1's row
	// above has no turns, so its export is empty).
	var history bytes.Buffer
	n, err := c.ExportSession(ctx, "s1", &history)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = c.ExportSession(ctx, "nope", &history)
	require.True(t, client.IsNotFound(err), "%v", err)
	line, err := turn.Marshal(event("elsewhere", 1))
	require.NoError(t, err)
	im, err := c.ImportSession(ctx, "s9", append(line, '\n'))
	require.NoError(t, err)
	require.Equal(t, api.SessionImport{SessionID: "s9", Events: 1, Messages: 2, FirstSeq: 1, LastSeq: 1}, im)
	_, err = c.ImportSession(ctx, "s9", []byte("{}\n"))
	require.Equal(t, "unknown_schema", code(err))

	// Search: the restored memory, by its name and description first.
	found, err := c.SearchScope(ctx, scope, "how do we release?", client.SearchOptions{Source: "memory", Limit: 5})
	require.NoError(t, err)
	require.Len(t, found.Hits, 1)
	require.Equal(t, "release", found.Hits[0].Memory)
	require.Contains(t, found.Hits[0].Snippet, "«release»")
	_, err = c.SearchScope(ctx, scope, "-release", client.SearchOptions{})
	require.Equal(t, "empty_query", code(err))

	// Dreams.
	d, err := c.StartDream(ctx, scope)
	require.NoError(t, err)
	require.Equal(t, "requested", d.Status)
	ds, err := c.ListDreams(ctx, scope, 10)
	require.NoError(t, err)
	require.Len(t, ds.Dreams, 1)
	d, err = c.GetDream(ctx, d.ID)
	require.NoError(t, err)
	_, err = c.ApproveDream(ctx, d.ID)
	require.Equal(t, "not_a_proposal", code(err))
	d, err = c.KillDream(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, "killed", d.Status, "a dream not yet started ends at once")
	_, err = c.KillDream(ctx, d.ID)
	require.Equal(t, "dream_ended", code(err))

	// Another tenant sees none of it, and can erase none of it.
	other := client.New(srv.URL, "key-globex", client.WithHTTPClient(h.client))
	_, err = other.GetSession(ctx, "s1")
	require.True(t, client.IsNotFound(err))
	_, err = other.DeleteSession(ctx, "s1")
	require.True(t, client.IsNotFound(err))
	_, err = other.DeleteScope(ctx, scope)
	require.True(t, client.IsNotFound(err))

	// Erasures.
	er, err := c.DeleteSession(ctx, "s1")
	require.NoError(t, err)
	require.Equal(t, "session", er.Kind)
	require.Positive(t, er.Rows)
	_, err = c.GetSession(ctx, "s1")
	require.True(t, client.IsNotFound(err))
	_, err = c.DeleteSession(ctx, "s1")
	require.True(t, client.IsNotFound(err), "nothing of it is left")
	_, err = c.DeleteSession(ctx, "not a session")
	require.Equal(t, "bad_session_id", code(err))
	er, err = c.DeleteScope(ctx, scope)
	require.NoError(t, err)
	require.Equal(t, scope, er.Target)
	_, err = c.GetMemory(ctx, scope, "release")
	require.True(t, client.IsNotFound(err))
	_, err = c.DeleteScope(ctx, "planet:earth")
	require.Equal(t, "bad_scope", code(err))
	_, err = client.New(srv.URL, "nope", client.WithHTTPClient(h.client)).GetSession(ctx, "s1")
	require.Equal(t, "unauthorized", code(err))
}
