package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// runAccountant consumes turn events from the bus until the test ends.
func (h *harness) runAccountant(t *testing.T) *tokenaccounting.Service {
	t.Helper()
	acc := h.accountant(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = acc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return acc
}

// history applies a session of five rounds to acme's s1: tool calls and
// their results, one result large enough to be offloaded, thinking, an
// error result given as a string, a round of two input messages, and a
// last round that closes the user's turn without usage.
func (h *harness) history(t *testing.T, acc *tokenaccounting.Service) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, acc.Apply(ctx, round("acme", "s1", 1, "run the build", "")))
	require.NoError(t, acc.Apply(ctx, round("acme", "s1", 2, "what did it say?", strings.Repeat("build output line\n", 4_000)+"BUILD FAILED")))
	require.NoError(t, acc.Apply(ctx, round("acme", "s1", 3, "fix it", "ok")))
	four := round("acme", "s1", 4, "and the tests?", "")
	errText := turn.Content{{Type: turn.BlockText, Text: "exit status 2"}}
	four.InputMessages[0].Content = append(turn.Content{{Type: turn.BlockToolResult, ToolUseID: "s1-call-3", Content: &errText, IsError: true}}, four.InputMessages[0].Content...)
	four.Response.Content = append(turn.Content{{Type: turn.BlockThinking, Thinking: "The tests <need> a database & a bus.", Signature: "sig"}}, four.Response.Content...)
	require.NoError(t, acc.Apply(ctx, four))
	five := round("acme", "s1", 5, "thanks", "PASS")
	five.InputMessages = append(five.InputMessages, turn.Message{UUID: "s1-u5b", Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "one more thing: ship it"}}})
	five.Response = &turn.Message{UUID: "s1-a5", Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: "Shipped."}}}
	five.Usage = nil
	require.NoError(t, acc.Apply(ctx, five))
}

// export answers a session's export with key, each line decoded.
func (h *harness) export(t *testing.T, key, session string) ([]byte, []turn.Event) {
	t.Helper()
	status, hdr, body := h.raw(t, "GET", "/v1/sessions/"+session+"/export", key, "", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	require.Equal(t, "application/x-ndjson", hdr.Get("Content-Type"))
	require.Equal(t, `attachment; filename="session-`+session+`.jsonl"`, hdr.Get("Content-Disposition"))
	var evs []turn.Event
	for i, line := range bytes.Split(bytes.TrimSuffix(body, []byte("\n")), []byte("\n")) {
		ev, err := turn.Decode(line, turn.DecodeOptions{Tenant: "acme"})
		require.NoError(t, err, "line %d is a turn event POST /v1/turns takes: %s", i+1, line)
		evs = append(evs, ev)
	}
	return body, evs
}

// messages reads a session's stored messages; the id of a tool result the
// session offloaded is written "<id>" in them, so that two sessions'
// messages compare.
func (h *harness) messages(t *testing.T, tenant, session string) []store.Message {
	t.Helper()
	var out []store.Message
	ctx := context.Background()
	require.NoError(t, h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		out, err = tx.Messages(ctx, session)
		return err
	}))
	for i := range out {
		out[i].SessionID, out[i].CreatedAt = "", time.Time{}
		out[i].Content = toolResultID.ReplaceAll(out[i].Content, []byte("stored as tool result <id>"))
		out[i].Content = bytes.ReplaceAll(out[i].Content, []byte("/v1/tool-results/"+toolResultOf(t, out[i].Content)), []byte("/v1/tool-results/<id>"))
	}
	return out
}

func toolResultOf(t *testing.T, content []byte) string {
	t.Helper()
	i := bytes.Index(content, []byte("/v1/tool-results/"))
	if i < 0 {
		return "\x00none"
	}
	rest := content[i+len("/v1/tool-results/"):]
	return string(rest[:bytes.IndexByte(rest, ')')])
}

// waitApplied waits until the session's applied seq reaches seq.
func (h *harness) waitApplied(t *testing.T, tenant, session string, seq int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		s, err := h.store.GetSession(context.Background(), tenant, session)
		return err == nil && s.AppliedSeq >= seq
	}, 20*time.Second, 20*time.Millisecond, "session %s applies through seq %d", session, seq)
}

// TestSessionExportThenImportIntoANewSession: the export is one turn event
// a line in seq order, the offloaded result whole again; imported into a
// new session id it gives the same messages, its events named for it, and
// the same body imported again changes nothing.
func TestSessionExportThenImportIntoANewSession(t *testing.T) {
	t.Parallel()
	h := setup(t)
	acc := h.runAccountant(t)
	h.history(t, acc)

	body, evs := h.export(t, "key-acme", "s1")
	require.Len(t, evs, 5)
	for i, ev := range evs {
		require.Equal(t, int64(i+1), ev.Seq)
		require.Equal(t, fmt.Sprintf("s1-e%d", i+1), ev.EventID)
		require.Equal(t, "s1", ev.SessionID)
		require.Equal(t, "claude-sonnet-4-5", ev.Model)
		require.Equal(t, map[string]string{"project": "repo-x"}, ev.MemoryScope)
		require.Nil(t, ev.Usage, "no usage is kept per round")
		require.NotNil(t, ev.Response)
	}
	require.Len(t, evs[4].InputMessages, 2)
	require.Equal(t, "end_turn", evs[4].Response.StopReason)
	require.Equal(t, "tool_use", evs[0].Response.StopReason)
	require.True(t, evs[3].InputMessages[0].Content[0].IsError)
	require.Equal(t, "The tests <need> a database & a bus.", evs[3].Response.Content[0].Thinking)
	whole := *evs[1].InputMessages[0].Content[0].Content
	require.Len(t, whole, 1)
	require.True(t, strings.HasSuffix(whole[0].Text, "BUILD FAILED"), "the offloaded result is exported whole, not its preview")
	require.NotContains(t, string(body), "persisted-output")
	require.NotContains(t, string(body), "tenant_id", "an export names no tenant: the importing key does")

	status, _, answer := h.raw(t, "POST", "/v1/sessions/copy/import", "key-acme", "application/x-ndjson", body)
	require.Equal(t, http.StatusAccepted, status, string(answer))
	var res api.SessionImport
	require.NoError(t, json.Unmarshal(answer, &res))
	require.Equal(t, api.SessionImport{SessionID: "copy", Events: 5, Messages: 11, FirstSeq: 1, LastSeq: 5}, res)
	h.waitApplied(t, "acme", "copy", 5)

	orig, copied := h.messages(t, "acme", "s1"), h.messages(t, "acme", "copy")
	require.Len(t, orig, 11)
	require.Equal(t, orig, copied)
	require.Contains(t, string(orig[2].Content), "persisted-output", "the copy offloaded the large result as the original did")

	_, again := h.export(t, "key-acme", "copy")
	for i := range again {
		require.Equal(t, "copy:"+evs[i].EventID, again[i].EventID)
		again[i].EventID, again[i].SessionID, again[i].OccurredAt = evs[i].EventID, "s1", evs[i].OccurredAt
	}
	require.Equal(t, evs, again, "the copy exports the same history")

	status, _, answer = h.raw(t, "POST", "/v1/sessions/copy/import", "key-acme", "application/x-ndjson", body)
	require.Equal(t, http.StatusAccepted, status, string(answer))
	require.NoError(t, json.Unmarshal(answer, &res))
	require.Equal(t, 5, res.Duplicates, "the same import again publishes nothing new")
	s, err := h.store.GetSession(context.Background(), "acme", "copy")
	require.NoError(t, err)
	require.Equal(t, int64(11), s.MessageCount)
	require.Zero(t, s.RejectedTurns)

	// Another history at the same seqs is refused before anything is published.
	status, _, answer = h.raw(t, "POST", "/v1/sessions/s1/import", "key-acme", "application/x-ndjson",
		[]byte(strings.ReplaceAll(string(body), `"s1-e`, `"other-e`)))
	require.Equal(t, http.StatusConflict, status, string(answer))
	require.Contains(t, string(answer), "seq_conflict")
}

// TestSessionImportRefusesABadLineApplyingNothing: a bad line refuses the
// whole body with 400 naming the line; none of the good lines before it
// is applied.
func TestSessionImportRefusesABadLineApplyingNothing(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.runAccountant(t)
	line := func(seq int64) string { return string(encode(t, event("from", seq))) }
	for _, c := range []struct {
		body, code, where string
	}{
		{line(1) + "\n" + line(2) + "\n" + `{"schema": "mnemos.turn.v1", "event_id": "x"` + "\n" + line(4) + "\n", "bad_json", "line 3: "},
		{line(1) + "\n\n" + strings.Replace(line(2), `"seq":2`, `"seq":"two"`, 1) + "\n", "schema_violation", "line 3: "},
		{line(1) + "\n" + line(2) + "\n" + line(2) + "\n", "seq_order", "line 3: seq 2 follows seq 2 of line 2"},
		{strings.Replace(line(1), `"schema"`, `"tenant_id":"globex","schema"`, 1) + "\n", "tenant_mismatch", "line 1: "},
		{"\n\n", "no_events", "no turn event"},
	} {
		status, _, answer := h.raw(t, "POST", "/v1/sessions/fresh/import", "key-acme", "application/x-ndjson", []byte(c.body))
		require.Contains(t, []int{http.StatusBadRequest, http.StatusForbidden}, status, string(answer))
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		require.NoError(t, json.Unmarshal(answer, &e))
		require.Equal(t, c.code, e.Error.Code, e.Error.Message)
		require.Contains(t, e.Error.Message, c.where)
	}

	// A good import published after them applies; the session of the bad
	// ones never came to be.
	status, _, answer := h.raw(t, "POST", "/v1/sessions/probe/import", "key-acme", "application/x-ndjson", []byte(line(1)+"\n"))
	require.Equal(t, http.StatusAccepted, status, string(answer))
	h.waitApplied(t, "acme", "probe", 1)
	_, err := h.store.GetSession(context.Background(), "acme", "fresh")
	require.ErrorIs(t, err, store.ErrNotFound, "nothing of a refused import was applied")
	status, _, _ = h.raw(t, "GET", "/v1/sessions/fresh/export", "key-acme", "", nil)
	require.Equal(t, http.StatusNotFound, status)
}

// TestSessionExportAndImportAreTheTenantsAndNeedTheirScopes: another
// tenant's key finds no such session; export needs read, import ingest.
func TestSessionExportAndImportAreTheTenantsAndNeedTheirScopes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	acc := h.accountant(t)
	ctx := context.Background()
	require.NoError(t, acc.Apply(ctx, round("acme", "s1", 1, "acme's secret plans", "")))

	status, _, body := h.raw(t, "GET", "/v1/sessions/s1/export", "key-globex", "", nil)
	require.Equal(t, http.StatusNotFound, status, string(body))
	require.NotContains(t, string(body), "secret")

	export, _ := h.export(t, "key-acme", "s1")
	_, ingestOnly, err := h.store.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "ingest", Scopes: []string{store.ScopeIngest}}, "test")
	require.NoError(t, err)
	_, readOnly, err := h.store.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "reader", Scopes: []string{store.ScopeRead}}, "test")
	require.NoError(t, err)
	status, _, body = h.raw(t, "GET", "/v1/sessions/s1/export", ingestOnly, "", nil)
	require.Equal(t, http.StatusForbidden, status, string(body))
	require.Contains(t, string(body), "missing_scope")
	require.Contains(t, string(body), `\"read\"`)
	status, _, body = h.raw(t, "POST", "/v1/sessions/s2/import", readOnly, "application/x-ndjson", export)
	require.Equal(t, http.StatusForbidden, status, string(body))
	require.Contains(t, string(body), "missing_scope")
	require.Contains(t, string(body), `\"ingest\"`)
	status, _, body = h.raw(t, "POST", "/v1/sessions/s2/import", ingestOnly, "application/x-ndjson", export)
	require.Equal(t, http.StatusAccepted, status, string(body))
}
