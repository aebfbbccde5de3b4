package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkSessionPage renders the page of a session of 1,000 turns (and
// one compaction) on the server: the reads in the tenant's transaction,
// the chart's data and the template, through the console's handler with
// its cookie check. The target is at most 100 ms an operation.
func BenchmarkSessionPage(b *testing.B) {
	h := setup(b)
	const turns = 1000
	session := "long-session"
	for i := 1; i <= turns; i++ {
		h.postTurn(b, keyA, session, i, 20_000+(i%50)*2_000) // a sawtooth under auto-compaction
	}
	h.waitApplied(b, tenantA, session, turns)
	require.Equal(b, http.StatusOK, h.api(b, http.MethodPost, "/v1/sessions/"+session+"/compact", keyA, `{}`, nil))
	cookie := &http.Cookie{Name: cookieName, Value: h.console.sign(signedIn{tenant: tenantA, nonce: newNonce(), expires: time.Now().Add(time.Hour)})}

	req := func() *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/console/sessions/"+session, nil)
		r.AddCookie(cookie)
		return r
	}
	w := httptest.NewRecorder()
	h.mux.ServeHTTP(w, req())
	require.Equal(b, http.StatusOK, w.Code)
	require.Equal(b, turns, strings.Count(w.Body.String(), "<tr><td class=\"num\">"), "every turn is a row")
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.mux.ServeHTTP(w, req())
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
	}
}
