package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// call makes a request with headers and returns the status, the headers
// and the raw body.
func (h *harness) call(t *testing.T, method, path, key, body string, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, raw
}

// saveSession creates an acme session and saves it as change leaves it.
func (h *harness) saveSession(t *testing.T, id string, change func(*sessionstate.Session)) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, h.store.InTx(ctx, "acme", func(tx *store.Tx) error {
		s, err := tx.LockSession(ctx, id, "main")
		if err != nil {
			return err
		}
		s.State = "ok"
		change(&s)
		return tx.SaveSessions(ctx, s)
	}))
}

func decode(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	return out
}

func errorCode(t *testing.T, raw []byte) string {
	t.Helper()
	e, _ := decode(t, raw)["error"].(map[string]any)
	require.NotNil(t, e, string(raw))
	require.NotEmpty(t, e["message"], "the error says why")
	return e["code"].(string)
}

func memoryMarkdown(name, description, body string) string {
	return "---\nname: " + name + "\ndescription: " + description + "\ntype: feedback\n---\n\n" + body + "\n"
}

const memPath = "/v1/scopes/user:u-42/memories/"

func TestMemoryAPI(t *testing.T) {
	t.Parallel()
	h := setup(t)
	md := memoryMarkdown("testing", "Integration tests hit a real database", "Use pgtest.\n\n**Why:** mocks hid a broken migration.")

	status, hdr, raw := h.call(t, "PUT", memPath+"testing", "key-acme", md, map[string]string{"Content-Type": "text/markdown", "Mnemos-Reason": "user said so"})
	require.Equal(t, http.StatusCreated, status, string(raw))
	require.Equal(t, `"1"`, hdr.Get("ETag"))
	got := decode(t, raw)
	require.Equal(t, "created", got["op"])
	require.Equal(t, "testing.md", got["file"])
	require.Equal(t, "user:u-42", got["scope"])

	status, hdr, raw = h.call(t, "GET", memPath+"testing.md", "key-acme", "", map[string]string{"Accept": "text/markdown"})
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, md, string(raw), "the markdown comes back as it was put")
	require.Contains(t, hdr.Get("Content-Type"), "text/markdown")

	status, _, raw = h.call(t, "PUT", memPath+"testing", "key-acme", md, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "unchanged", decode(t, raw)["op"])

	md2 := memoryMarkdown("testing", "Integration tests hit a real database", "Use pgtest; never mock the store.")
	status, hdr, raw = h.call(t, "PUT", memPath+"testing", "key-acme", md2, map[string]string{"If-Match": `"1"`})
	require.Equal(t, http.StatusOK, status, string(raw))
	require.Equal(t, "updated", decode(t, raw)["op"])
	require.Equal(t, `"2"`, hdr.Get("ETag"))

	status, _, raw = h.call(t, "PUT", "/v1/scopes/user:u-42/memories/role", "key-acme", memoryMarkdown("role", "Data scientist", "New to Go."), nil)
	require.Equal(t, http.StatusCreated, status, string(raw))

	status, _, raw = h.call(t, "GET", "/v1/scopes/user:u-42/memories", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status)
	list := decode(t, raw)["memories"].([]any)
	require.Len(t, list, 2)
	require.Equal(t, "role", list[0].(map[string]any)["name"], "most recently updated first")
	require.NotContains(t, list[0], "body", "lists leave bodies out")

	status, hdr, raw = h.call(t, "GET", "/v1/scopes/user:u-42/index", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status)
	ix := decode(t, raw)
	require.Equal(t, "- [testing](testing.md) — Integration tests hit a real database\n- [role](role.md) — Data scientist\n", ix["content"])
	require.EqualValues(t, 2, ix["lines"])
	require.Equal(t, false, ix["loaded"].(map[string]any)["cut"])
	indexTag := hdr.Get("ETag")

	status, _, raw = h.call(t, "PUT", "/v1/scopes/user:u-42/index", "key-acme", "- [Role](role.md) — who the user is\n", map[string]string{"If-Match": indexTag})
	require.Equal(t, http.StatusOK, status, string(raw))
	ix = decode(t, raw)
	require.Equal(t, "- [Role](role.md) — who the user is\n- [testing](testing.md) — Integration tests hit a real database\n", ix["content"])
	require.Equal(t, []any{"testing"}, ix["appended"], "a memory the edit leaves out is appended, not lost")
	status, _, raw = h.call(t, "PUT", "/v1/scopes/user:u-42/index", "key-acme", "- [x](x.md) — y\n", map[string]string{"If-Match": indexTag})
	require.Equal(t, http.StatusPreconditionFailed, status)
	require.Equal(t, "revision_mismatch", errorCode(t, raw))

	status, _, raw = h.call(t, "DELETE", memPath+"testing", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	require.Equal(t, "deleted", decode(t, raw)["op"])
	status, _, _ = h.call(t, "GET", memPath+"testing", "key-acme", "", nil)
	require.Equal(t, http.StatusNotFound, status)
	_, _, raw = h.call(t, "GET", "/v1/scopes/user:u-42/memories?deleted=true", "key-acme", "", nil)
	require.Len(t, decode(t, raw)["memories"], 2, "a deleted memory is still listed when asked")

	status, _, raw = h.call(t, "GET", memPath+"testing/revisions", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status)
	revs := decode(t, raw)["revisions"].([]any)
	require.Len(t, revs, 3)
	first := revs[0].(map[string]any)
	require.Equal(t, "api", first["actor"])
	require.Equal(t, "user said so", first["reason"])
	require.Equal(t, "deleted", revs[2].(map[string]any)["op"])

	status, _, raw = h.call(t, "GET", memPath+"testing/diff?from=1&to=2", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status)
	diff := decode(t, raw)["diff"].(string)
	require.Contains(t, diff, "-Use pgtest.\n")
	require.Contains(t, diff, "+Use pgtest; never mock the store.\n")

	status, _, raw = h.call(t, "GET", memPath+"testing/revisions/1", "key-acme", "", map[string]string{"Accept": "text/markdown"})
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, md, string(raw))

	status, _, raw = h.call(t, "POST", memPath+"testing/revisions/1/restore", "key-acme", "", map[string]string{"If-Match": `"3"`})
	require.Equal(t, http.StatusOK, status, string(raw))
	restored := decode(t, raw)
	require.Equal(t, "restored", restored["op"])
	require.EqualValues(t, 1, restored["restored_from"])
	require.EqualValues(t, 4, restored["revision"])
	_, _, raw = h.call(t, "GET", memPath+"testing", "key-acme", "", map[string]string{"Accept": "text/markdown"})
	require.Equal(t, md, string(raw), "a deleted memory rolled back to revision 1")
	_, _, raw = h.call(t, "GET", "/v1/scopes/user:u-42/index?format=markdown", "key-acme", "", nil)
	require.Equal(t, "- [Role](role.md) — who the user is\n- [testing](testing.md) — Integration tests hit a real database\n", string(raw))

	require.EqualValues(t, 2, h.metrics.Sum("mnemos.memories.changed", "op", "created"))
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.memories.changed", "op", "updated"))
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.memories.changed", "op", "deleted"))
	require.EqualValues(t, 1, h.metrics.Sum("mnemos.memories.changed", "op", "restored"))
	require.EqualValues(t, 5, h.metrics.Sum("mnemos.memories.changed", "actor", "api"))
}

func TestMemoryAPIRefusesBadInput(t *testing.T) {
	t.Parallel()
	h := setup(t)
	good := memoryMarkdown("a", "d", "x")
	status, _, raw := h.call(t, "PUT", memPath+"a", "key-acme", good, nil)
	require.Equal(t, http.StatusCreated, status, string(raw))

	cases := []struct {
		name, method, path, body string
		headers                  map[string]string
		status                   int
		code                     string
	}{
		{"unknown scope kind", "PUT", "/v1/scopes/team:x/memories/a", good, nil, 400, "bad_scope"},
		{"scope without id", "GET", "/v1/scopes/user/memories", "", nil, 400, "bad_scope"},
		{"bad scope id", "GET", "/v1/scopes/user:-x/index", "", nil, 400, "bad_scope"},
		{"path traversal", "PUT", memPath + "..%2F..%2Fproject:p%2Fa", good, nil, 400, "out_of_scope"},
		{"another scope in the name", "GET", memPath + "project:p%2Fa", "", nil, 400, "out_of_scope"},
		{"upper case", "PUT", memPath + "Bad", memoryMarkdown("Bad", "d", "x"), nil, 400, "bad_name"},
		{"names disagree", "PUT", memPath + "b", good, nil, 400, "name_mismatch"},
		{"no frontmatter", "PUT", memPath + "b", "just text", nil, 400, "bad_frontmatter"},
		{"unknown type", "PUT", memPath + "b", strings.Replace(memoryMarkdown("b", "d", "x"), "type: feedback", "type: opinion", 1), nil, 400, "bad_type"},
		{"empty description", "PUT", memPath + "b", strings.Replace(memoryMarkdown("b", "d", "x"), "description: d", "description:", 1), nil, 400, "bad_description"},
		{"invalid utf-8", "PUT", memPath + "b", memoryMarkdown("b", "d", "x\xff"), nil, 400, "invalid_utf8"},
		{"too large", "PUT", memPath + "b", memoryMarkdown("b", "d", strings.Repeat("x", 20_000)), nil, 413, "too_large"},
		{"stale If-Match", "PUT", memPath + "a", good, map[string]string{"If-Match": `"9"`}, 412, "revision_mismatch"},
		{"create only, exists", "PUT", memPath + "a", good, map[string]string{"If-None-Match": "*"}, 412, "revision_mismatch"},
		{"bad If-Match", "PUT", memPath + "a", good, map[string]string{"If-Match": "yesterday"}, 400, "bad_request"},
		{"bad session id", "PUT", memPath + "a", good, map[string]string{"Mnemos-Session-Id": "a.b"}, 400, "bad_request"},
		{"bad revision", "GET", memPath + "a/revisions/zero", "", nil, 400, "bad_request"},
		{"dangling index line", "PUT", "/v1/scopes/user:u-42/index", "- [a](a.md) — x\n- [gone](gone.md) — y\n", nil, 400, "bad_index"},
		{"malformed index line", "PUT", "/v1/scopes/user:u-42/index", "# Memories\n- [a](a.md) — x\n", nil, 400, "bad_index"},
	}
	for _, c := range cases {
		status, _, raw := h.call(t, c.method, c.path, "key-acme", c.body, c.headers)
		require.Equal(t, c.status, status, "%s: %s", c.name, raw)
		require.Equal(t, c.code, errorCode(t, raw), c.name)
	}
	for _, c := range cases {
		want := int64(0)
		for _, d := range cases {
			if d.code == c.code {
				want++
			}
		}
		require.Equal(t, want, h.metrics.Sum("mnemos.memories.refused", "reason", c.code), "%s: counted by reason", c.name)
	}
	status, _, _ = h.call(t, "GET", memPath+"missing", "key-acme", "", nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _, _ = h.call(t, "GET", memPath+"a/revisions/7", "key-acme", "", nil)
	require.Equal(t, http.StatusNotFound, status)

	// Nothing refused was stored; the good memory is as it was.
	_, _, raw = h.call(t, "GET", "/v1/scopes/user:u-42/memories?deleted=true", "key-acme", "", nil)
	require.Len(t, decode(t, raw)["memories"], 1)
	_, _, raw = h.call(t, "GET", "/v1/scopes/user:u-42/index?format=markdown", "key-acme", "", nil)
	require.Equal(t, "- [a](a.md) — d\n", string(raw))
}

func TestMemoriesAreTenantScoped(t *testing.T) {
	t.Parallel()
	h := setup(t)
	secret := memoryMarkdown("secret", "acme's own", "Only acme may read this.")
	status, _, raw := h.call(t, "PUT", memPath+"secret", "key-acme", secret, nil)
	require.Equal(t, http.StatusCreated, status, string(raw))

	for _, path := range []string{memPath + "secret", memPath + "secret/revisions", memPath + "secret/revisions/1", memPath + "secret/diff?from=1&to=1"} {
		status, _, raw := h.call(t, "GET", path, "key-globex", "", nil)
		require.Equal(t, http.StatusNotFound, status, "%s: %s", path, raw)
	}
	status, _, _ = h.call(t, "DELETE", memPath+"secret", "key-globex", "", nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _, _ = h.call(t, "POST", memPath+"secret/revisions/1/restore", "key-globex", "", nil)
	require.Equal(t, http.StatusNotFound, status)
	_, _, raw = h.call(t, "GET", "/v1/scopes/user:u-42/memories", "key-globex", "", nil)
	require.Empty(t, decode(t, raw)["memories"])
	_, _, raw = h.call(t, "GET", "/v1/scopes/user:u-42/index", "key-globex", "", nil)
	require.Empty(t, decode(t, raw)["content"])
	status, _, raw = h.call(t, "PUT", "/v1/scopes/user:u-42/index", "key-globex", "- [secret](secret.md) — mine now\n", nil)
	require.Equal(t, http.StatusBadRequest, status, "globex has no memory of that name to list")
	require.Equal(t, "bad_index", errorCode(t, raw))

	// globex writing the same name writes its own memory.
	status, _, raw = h.call(t, "PUT", memPath+"secret", "key-globex", memoryMarkdown("secret", "globex's", "Other."), nil)
	require.Equal(t, http.StatusCreated, status, string(raw))
	_, _, raw = h.call(t, "GET", memPath+"secret", "key-acme", "", map[string]string{"Accept": "text/markdown"})
	require.Equal(t, secret, string(raw), "acme's memory is untouched")
	status, _, _ = h.call(t, "GET", memPath+"secret", "nope", "", nil)
	require.Equal(t, http.StatusUnauthorized, status)
}

func TestAgentWriteThroughTheAPIMarksItsSession(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	h.saveSession(t, "s1", func(s *sessionstate.Session) { s.AppliedSeq, s.MessageCount = 4, 9 })
	status, _, raw := h.call(t, "PUT", memPath+"pref?session=s1", "key-acme", memoryMarkdown("pref", "Prefers short answers", "x"),
		map[string]string{"Mnemos-Reason": "asked to remember", "Mnemos-Source-Turns": "e-3, e-4"})
	require.Equal(t, http.StatusCreated, status, string(raw))
	_, _, raw = h.call(t, "GET", memPath+"pref/revisions", "key-acme", "", nil)
	rev := decode(t, raw)["revisions"].([]any)[0].(map[string]any)
	require.Equal(t, "agent", rev["actor"])
	require.Equal(t, "s1", rev["session_id"])
	require.Equal(t, []any{"e-3", "e-4"}, rev["source_turns"])

	mem, err := memory.NewStore(h.store, nil, memory.Options{})
	require.NoError(t, err)
	w, err := mem.AgentWrite(ctx, "acme", "s1")
	require.NoError(t, err)
	require.EqualValues(t, 4, w.Seq)
	require.EqualValues(t, 9, w.Position)
	require.EqualValues(t, 1, w.Writes)

	status, _, _ = h.call(t, "DELETE", memPath+"pref", "key-acme", "", map[string]string{"Mnemos-Session-Id": "s1"})
	require.Equal(t, http.StatusOK, status)
	w, err = mem.AgentWrite(ctx, "acme", "s1")
	require.NoError(t, err)
	require.EqualValues(t, 2, w.Writes)
	require.EqualValues(t, 2, h.metrics.Sum("mnemos.memories.changed", "actor", "agent"))
	_, err = mem.AgentWrite(ctx, "globex", "s1")
	require.ErrorIs(t, err, memory.ErrNotFound)
}

func TestContextStartsWithTheMemorySection(t *testing.T) {
	t.Parallel()
	h := setup(t)
	status, _, raw := h.call(t, "PUT", memPath+"role", "key-acme", memoryMarkdown("role", "Data scientist, new to Go", "x"), nil)
	require.Equal(t, http.StatusCreated, status, string(raw))
	h.saveSession(t, "with", func(s *sessionstate.Session) { s.MemoryScope = map[string]string{"user": "u-42", "project": "repo"} })
	h.saveSession(t, "without", func(*sessionstate.Session) {})
	var body struct {
		System []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"system"`
		CacheBreakpoints []struct {
			Message int `json:"message"`
			Block   int `json:"block"`
		} `json:"cache_breakpoints"`
	}
	status, _, raw = h.call(t, "GET", "/v1/sessions/with/context", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(raw))
	require.NoError(t, json.Unmarshal(raw, &body))
	require.Len(t, body.System, 3)
	require.Equal(t, memory.Instructions, body.System[0].Text)
	require.Equal(t, "## MEMORY.md of user:u-42 (the user's memories)\n\n- [role](role.md) — Data scientist, new to Go", body.System[1].Text)
	require.Contains(t, body.System[2].Text, "MEMORY.md of project:repo")
	require.Equal(t, -1, body.CacheBreakpoints[0].Message, "the section's last block is a cache breakpoint")
	require.Equal(t, 2, body.CacheBreakpoints[0].Block)

	// A memory written now is not in the section until the next compaction.
	status, _, _ = h.call(t, "PUT", memPath+"later", "key-acme", memoryMarkdown("later", "Written after", "x"), nil)
	require.Equal(t, http.StatusCreated, status)
	_, _, again := h.call(t, "GET", "/v1/sessions/with/context", "key-acme", "", nil)
	require.Equal(t, string(raw), string(again), "the same bytes")
	require.NotContains(t, string(again), "later.md")
	require.Zero(t, h.metrics.Sum("mnemos.context.cache_breaks", "kind", "unexpected"))

	_, _, raw = h.call(t, "GET", "/v1/sessions/without/context", "key-acme", "", nil)
	require.True(t, bytes.HasPrefix(raw, []byte(`{"system":[],`)), "no scope, no memory section: %s", raw[:40])
}

// TestMissingMemoriesAre404WithAPublicMessage: a memory that is deleted,
// was never written, or lacks the revision asked for answers 404 not_found
// with a message for the client — what is missing and, for a deleted
// memory, how to bring it back — and none of the store's own error text
// (function names, "not found" wrapped in them).
func TestMissingMemoriesAre404WithAPublicMessage(t *testing.T) {
	t.Parallel()
	h := setup(t)
	status, _, raw := h.call(t, "PUT", memPath+"gone", "key-acme", memoryMarkdown("gone", "soon deleted", "x"), nil)
	require.Equal(t, http.StatusCreated, status, string(raw))
	status, _, raw = h.call(t, "DELETE", memPath+"gone", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(raw))

	deleted := "memory gone of scope user:u-42 is deleted; GET its revisions and POST …/revisions/{rev}/restore to bring it back"
	for _, c := range []struct{ method, path, want string }{
		{"GET", memPath + "gone", deleted},
		{"GET", memPath + "gone.md", deleted},
		{"DELETE", memPath + "gone", deleted},
		{"GET", memPath + "never", "no memory never in scope user:u-42"},
		{"DELETE", memPath + "never", "no memory never in scope user:u-42"},
		{"GET", memPath + "never/revisions", "no memory never in scope user:u-42"},
		{"GET", memPath + "gone/revisions/9", "memory gone of scope user:u-42 has no revision 9"},
		{"POST", memPath + "gone/revisions/9/restore", "memory gone of scope user:u-42 has no revision 9"},
		{"POST", memPath + "never/revisions/1/restore", "memory never of scope user:u-42 has no revision 1"},
		{"GET", memPath + "gone/diff?from=1&to=9", "memory gone of scope user:u-42 has no revision 9"},
	} {
		status, _, raw := h.call(t, c.method, c.path, "key-acme", "", nil)
		require.Equal(t, http.StatusNotFound, status, "%s %s: %s", c.method, c.path, raw)
		code, msg := apiError(t, raw)
		require.Equal(t, "not_found", code)
		require.Equal(t, c.want, msg, "%s %s", c.method, c.path)
		require.NotContains(t, msg, "memory.", "no internal names")
		require.NotContains(t, msg, "store.", "no internal names")
	}
}
