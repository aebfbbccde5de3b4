package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/archivetest"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// TestTheConsoleDownloadsAScopeAndASessionsHistory: the scope page's
// Export button and the session page's Export history link download what
// the API's exports answer, and only the signed-in tenant's.
func TestTheConsoleDownloadsAScopeAndASessionsHistory(t *testing.T) {
	h := setup(t)
	session, scope, name := "console-export", "project:console-export", "release_day"
	h.makeSession(t, tenantA, keyA, session)
	h.makeMemory(t, keyA, scope, name)
	a, b := h.signIn(t, keyA), h.signIn(t, keyB)

	status, page := a.get(t, "/console/memories/"+url.PathEscape(scope))
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `action="/console/exports/memories/`+url.PathEscape(scope)+`"`)
	require.Contains(t, page, `id="export-scope"`)
	status, tgz := a.get(t, "/console/exports/memories/"+url.PathEscape(scope))
	require.Equal(t, http.StatusOK, status)
	names, files := archivetest.Files(t, []byte(tgz))
	require.Equal(t, []string{"memory/", "memory/MEMORY.md", "memory/" + name + ".md"}, names)
	require.Contains(t, files["memory/"+name+".md"], "name: "+name)
	status, _ = b.get(t, "/console/exports/memories/"+url.PathEscape(scope))
	require.Equal(t, http.StatusNotFound, status, "another tenant has no such scope")

	status, page = a.get(t, "/console/sessions/"+session)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, page, `<a id="export-history" href="/console/exports/sessions/`+session+`" download>`)
	status, lines := a.get(t, "/console/exports/sessions/"+session)
	require.Equal(t, http.StatusOK, status)
	var seqs []int64
	for _, line := range strings.Split(strings.TrimSpace(lines), "\n") {
		ev, err := turn.Decode([]byte(line), turn.DecodeOptions{Tenant: tenantA})
		require.NoError(t, err, line)
		require.Equal(t, session, ev.SessionID)
		seqs = append(seqs, ev.Seq)
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}, seqs)
	status, body := b.get(t, "/console/exports/sessions/"+session)
	require.Equal(t, http.StatusNotFound, status)
	require.NotContains(t, body, "Done with step")
}
