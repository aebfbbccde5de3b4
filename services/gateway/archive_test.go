package gateway_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/internal/testkit/archivetest"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// raw sends body with contentType and answers the status, the headers and
// the body as they came.
func (h *harness) raw(t *testing.T, method, path, key, contentType string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, out
}

func (h *harness) putMemory(t *testing.T, key, scope string, d memory.Document) {
	t.Helper()
	status, _, body := h.raw(t, "PUT", "/v1/scopes/"+scope+"/memories/"+string(d.Name), key, "text/markdown", []byte(d.Markdown()))
	require.Contains(t, []int{http.StatusCreated, http.StatusOK}, status, string(body))
}

func (h *harness) memoryList(t *testing.T, key, scope string) []api.Memory {
	t.Helper()
	status, _, body := h.raw(t, "GET", "/v1/scopes/"+scope+"/memories?deleted=true", key, "", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	var l api.MemoryList
	require.NoError(t, json.Unmarshal(body, &l))
	return l.Memories
}

func (h *harness) memoryMarkdown(t *testing.T, key, scope, name string) string {
	t.Helper()
	status, _, body := h.raw(t, "GET", "/v1/scopes/"+scope+"/memories/"+name+"?format=markdown", key, "", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	return string(body)
}

func (h *harness) indexContent(t *testing.T, key, scope string) string {
	t.Helper()
	status, _, body := h.raw(t, "GET", "/v1/scopes/"+scope+"/index?format=markdown", key, "", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	return string(body)
}

// TestExportThenImportIntoAnotherScope: the archive holds memory/MEMORY.md
// and each memory's markdown as GET answers it; imported into another
// scope it gives the same memories and index, by the actor import, and
// both are in the audit log.
func TestExportThenImportIntoAnotherScope(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const from, to = "user:u-42", "project:copy"
	h.putMemory(t, "key-acme", from, memory.Document{Name: "testing", Description: "Integration tests hit a real database", Type: memory.TypeFeedback, Body: "Never mocks.\n\nWhy: a mock hid a broken migration."})
	h.putMemory(t, "key-acme", from, memory.Document{Name: "release", Description: `"Quoted" release steps`, Type: memory.TypeProject, Body: "Tag, push, announce."})
	h.putMemory(t, "key-acme", from, memory.Document{Name: "gone", Description: "Deleted before the export", Type: memory.TypeUser, Body: "x"})
	status, _, body := h.raw(t, "DELETE", "/v1/scopes/"+from+"/memories/gone", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	edited := "- [Release](release.md) — steps\n- [testing](testing.md) — Integration tests hit a real database\n"
	status, _, body = h.raw(t, "PUT", "/v1/scopes/"+from+"/index", "key-acme", "text/markdown", []byte(edited))
	require.Equal(t, http.StatusOK, status, string(body))

	status, hdr, tgz := h.raw(t, "GET", "/v1/scopes/"+from+"/export", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(tgz))
	require.Equal(t, "application/gzip", hdr.Get("Content-Type"))
	require.Equal(t, `attachment; filename="memory-user-u-42.tar.gz"`, hdr.Get("Content-Disposition"))
	names, files := archivetest.Files(t, tgz)
	require.Equal(t, []string{"memory/", "memory/MEMORY.md", "memory/release.md", "memory/testing.md"}, names)
	require.Equal(t, edited, files["memory/MEMORY.md"])
	for _, n := range []string{"release", "testing"} {
		require.Equal(t, h.memoryMarkdown(t, "key-acme", from, n), files["memory/"+n+".md"])
	}

	status, _, body = h.raw(t, "POST", "/v1/scopes/"+to+"/import", "key-acme", "application/gzip", tgz)
	require.Equal(t, http.StatusOK, status, string(body))
	var res api.ScopeImport
	require.NoError(t, json.Unmarshal(body, &res))
	require.Equal(t, []string{"release", "testing"}, res.Created)
	require.Empty(t, res.Updated)
	require.Equal(t, "archive", res.IndexFrom)
	require.Equal(t, edited, res.Index.Content)
	require.Equal(t, edited, h.indexContent(t, "key-acme", to))
	require.Len(t, h.memoryList(t, "key-acme", to), 2, "the deleted memory is not exported")
	for _, n := range []string{"release", "testing"} {
		require.Equal(t, files["memory/"+n+".md"], h.memoryMarkdown(t, "key-acme", to, n))
	}
	status, _, body = h.raw(t, "GET", "/v1/scopes/"+to+"/memories/testing/revisions", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status, string(body))
	require.Contains(t, string(body), `"actor":"import"`)

	// Importing it again changes nothing.
	status, _, body = h.raw(t, "POST", "/v1/scopes/"+to+"/import", "key-acme", "application/gzip", tgz)
	require.Equal(t, http.StatusOK, status, string(body))
	require.NoError(t, json.Unmarshal(body, &res))
	require.Empty(t, res.Created)
	require.Equal(t, []string{"release", "testing"}, res.Unchanged)

	log, err := h.store.AuditLog(context.Background(), "acme", 0, 100)
	require.NoError(t, err)
	var actions []string
	for _, r := range log {
		if strings.HasPrefix(r.Action, "scope.") {
			actions = append(actions, r.Action+" "+r.Target)
		}
	}
	require.ElementsMatch(t, []string{"scope.export " + from, "scope.import " + to, "scope.import " + to}, actions)
}

// TestExportOfAnEmptyScope answers an archive of an empty index.
func TestExportOfAnEmptyScope(t *testing.T) {
	t.Parallel()
	h := setup(t)
	status, _, tgz := h.raw(t, "GET", "/v1/scopes/user:nobody/export", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status)
	names, files := archivetest.Files(t, tgz)
	require.Equal(t, []string{"memory/", "memory/MEMORY.md"}, names)
	require.Empty(t, files["memory/MEMORY.md"])
}

// TestImportRefusesBadArchivesWritingNothing: every bad archive is
// refused with its code, naming the file, counted, and the scope stays
// as it was.
func TestImportRefusesBadArchivesWritingNothing(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const scope = "project:p1"
	h.putMemory(t, "key-acme", scope, memory.Document{Name: "kept", Description: "Here before", Type: memory.TypeProject, Body: "k"})
	before := h.indexContent(t, "key-acme", scope)
	good := func(name string) string {
		return memory.Document{Name: memory.Name(name), Description: "Fine", Type: memory.TypeProject, Body: "b"}.Markdown()
	}
	many := []archivetest.Entry{}
	for i := range 2_001 {
		n := fmt.Sprintf("m%04d", i)
		many = append(many, archivetest.Entry{Name: "memory/" + n + ".md", Body: good(n)})
	}
	cases := []struct {
		name    string
		body    []byte
		status  int
		code    string
		mention string
	}{
		{"not gzip", []byte("plain text"), 400, "bad_archive", "gzip"},
		{"bad frontmatter", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Body: good("a")}, archivetest.Entry{Name: "memory/b.md", Body: "no frontmatter"}), 400, "bad_frontmatter", "memory/b.md"},
		{"bad name", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Body: good("a")}, archivetest.Entry{Name: "memory/B!.md", Body: good("a")}), 400, "bad_name", "B!.md"},
		{"name is not the file", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Body: good("b")}), 400, "name_mismatch", "memory/a.md"},
		{"too large", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Body: good("a") + strings.Repeat("x", 17<<10)}), 413, "too_large", "memory/a.md"},
		{"too many files", archivetest.Tgz(t, many...), 400, "too_many_files", "m2000.md"},
		{"path traversal", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Body: good("a")}, archivetest.Entry{Name: "../x.md", Body: good("x")}), 400, "bad_path", "../x.md"},
		{"absolute path", archivetest.Tgz(t, archivetest.Entry{Name: "/tmp/x.md", Body: good("x")}), 400, "bad_path", "/tmp/x.md"},
		{"symlink", archivetest.Tgz(t, archivetest.Entry{Name: "memory/a.md", Body: good("a")}, archivetest.Entry{Name: "memory/x.md", Link: "/etc/passwd", Typeflag: tar.TypeSymlink}), 400, "bad_entry", "memory/x.md"},
		{"not a regular file", archivetest.Tgz(t, archivetest.Entry{Name: "memory/x.md", Typeflag: tar.TypeChar}), 400, "bad_entry", "memory/x.md"},
		{"gzip bomb", archivetest.Bomb(t, 80, archivetest.Entry{Name: "memory/a.md", Body: good("a")}), 413, "too_large", "decompresses"},
	}
	for _, c := range cases {
		status, _, body := h.raw(t, "POST", "/v1/scopes/"+scope+"/import", "key-acme", "application/gzip", c.body)
		require.Equal(t, c.status, status, "%s: %s", c.name, body)
		var e api.ErrorBody
		require.NoError(t, json.Unmarshal(body, &e), c.name)
		require.Equal(t, c.code, e.Error.Code, c.name)
		require.Contains(t, e.Error.Message, c.mention, c.name)
	}
	require.EqualValues(t, len(cases), h.metrics.Sum("mnemos.memories.refused", "actor", "import"))
	list := h.memoryList(t, "key-acme", scope)
	require.Len(t, list, 1, "nothing written")
	require.Equal(t, int64(1), list[0].Revision)
	require.Equal(t, before, h.indexContent(t, "key-acme", scope))
}

// TestExportAndImportAreTheTenantsAndNeedTheirScopes: another tenant's key
// exports an empty scope and imports into its own; a key without read
// cannot export, one without memory:write cannot import.
func TestExportAndImportAreTheTenantsAndNeedTheirScopes(t *testing.T) {
	t.Parallel()
	h := setup(t)
	const scope = "user:u-1"
	secret := memory.Document{Name: "secret", Description: "Acme's secret", Type: memory.TypeUser, Body: "the plans"}
	h.putMemory(t, "key-acme", scope, secret)

	status, _, tgz := h.raw(t, "GET", "/v1/scopes/"+scope+"/export", "key-globex", "", nil)
	require.Equal(t, http.StatusOK, status)
	names, files := archivetest.Files(t, tgz)
	require.Equal(t, []string{"memory/", "memory/MEMORY.md"}, names)
	require.Empty(t, files["memory/MEMORY.md"])

	status, _, acme := h.raw(t, "GET", "/v1/scopes/"+scope+"/export", "key-acme", "", nil)
	require.Equal(t, http.StatusOK, status)
	status, _, body := h.raw(t, "POST", "/v1/scopes/"+scope+"/import", "key-globex", "application/gzip", acme)
	require.Equal(t, http.StatusOK, status, string(body))
	require.Len(t, h.memoryList(t, "key-acme", scope), 1)
	require.Equal(t, int64(1), h.memoryList(t, "key-acme", scope)[0].Revision, "globex's import wrote globex's scope")

	ctx := context.Background()
	_, ingestOnly, err := h.store.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "ingest", Scopes: []string{store.ScopeIngest}}, "test")
	require.NoError(t, err)
	_, readOnly, err := h.store.CreateAPIKey(ctx, "acme", store.NewAPIKey{Name: "reader", Scopes: []string{store.ScopeRead}}, "test")
	require.NoError(t, err)
	status, _, body = h.raw(t, "GET", "/v1/scopes/"+scope+"/export", ingestOnly, "", nil)
	require.Equal(t, http.StatusForbidden, status, string(body))
	require.Contains(t, string(body), "missing_scope")
	status, _, body = h.raw(t, "POST", "/v1/scopes/"+scope+"/import", readOnly, "application/gzip", acme)
	require.Equal(t, http.StatusForbidden, status, string(body))
	require.Contains(t, string(body), `\"memory:write\"`)
}
