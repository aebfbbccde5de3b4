package console

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/search"
)

// postExchange sends one turn event of a session naming project:scopeID:
// a user message and the assistant's answer, as texts.
func (h *harness) postExchange(t testing.TB, key, session string, seq int, scopeID, user, assistant string) {
	t.Helper()
	ev := map[string]any{
		"schema": "mnemos.turn.v1", "event_id": randomID(), "session_id": session, "seq": seq,
		"memory_scope": map[string]string{"project": scopeID}, "model": "claude-sonnet-4-5",
		"input_messages": []any{map[string]any{"uuid": randomID(), "role": "user", "content": []any{
			map[string]any{"type": "text", "text": user}}}},
		"response": map[string]any{"uuid": randomID(), "role": "assistant", "stop_reason": "end_turn", "content": []any{
			map[string]any{"type": "text", "text": assistant}}},
		"usage":       map[string]int{"input_tokens": 1_000 * seq, "output_tokens": 100},
		"occurred_at": time.Now().UTC().Format(time.RFC3339),
	}
	raw, err := json.Marshal(ev)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, h.api(t, http.MethodPost, "/v1/turns", key, string(raw), nil))
}

// putMemory writes a memory through the API.
func (h *harness) putMemory(t testing.TB, key, scope, name, description, body string) {
	t.Helper()
	doc := "---\nname: " + name + "\ndescription: " + description + "\ntype: project\n---\n" + body + "\n"
	require.Equal(t, http.StatusCreated, h.api(t, http.MethodPut, "/v1/scopes/"+scope+"/memories/"+name, key, doc, nil))
}

// hitRow reads a listed hit: its source and its link.
var hitRow = regexp.MustCompile(`<tr class="hit" data-source="(memory|message)">[\s\S]*?<a href="([^"]+)">`)

// renderedHits lists the hits of a scope page as "source link", in the
// order shown.
func renderedHits(body string) []string {
	out := []string{}
	for _, m := range hitRow.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1]+" "+html.UnescapeString(m[2]))
	}
	return out
}

// apiHits lists the API's hits for the same search, as renderedHits would.
func apiHits(t *testing.T, h *harness, key, scope, query, source string) []string {
	t.Helper()
	var res api.SearchResult
	path := "/v1/scopes/" + url.PathEscape(scope) + "/search?" + url.Values{"q": {query}, "source": {source}, "limit": {strconv.Itoa(searchLimit)}}.Encode()
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, path, key, "", &res))
	out := make([]string, len(res.Hits))
	for i, hit := range res.Hits {
		if hit.Source == string(search.SourceMemory) {
			out[i] = "memory /console/memories/" + url.PathEscape(scope) + "/" + hit.Memory
		} else {
			out[i] = fmt.Sprintf("message /console/sessions/%s#m%d", hit.Session, *hit.Position)
		}
	}
	return out
}

// searchPage opens a scope's page with a search.
func searchPage(t *testing.T, b *browserless, scope, query, source string) (int, string) {
	t.Helper()
	return b.get(t, "/console/memories/"+url.PathEscape(scope)+"?"+url.Values{"q": {query}, "source": {source}}.Encode())
}

// TestScopeSearch stores sessions and memories in a scope through the API
// and searches it from the scope's page: the hits are listed in the order
// the API ranks them, each linked to its memory or to its message on the
// session's page, the matched words marked and everything escaped; an
// empty query lists nothing and a refused one says why.
func TestScopeSearch(t *testing.T) {
	h := setup(t)
	const scope = "project:billing"
	h.postExchange(t, keyA, "deploy-notes", 1, "billing",
		"The Tuesday deploy of the billing service failed: the migration locked the invoices table.",
		"I split the migration in two; the billing deploy went out on Wednesday.")
	h.postExchange(t, keyA, "lunch", 1, "billing", "Where should we get lunch today?", "The noodle place near the office.")
	h.postExchange(t, keyA, "hostile", 1, "billing",
		`<script>alert("billing")</script> billing <img src=x onerror=alert(1)> «fake» mark <b>bold</b> and the invoices`, "Noted.")
	h.postExchange(t, keyA, "elsewhere", 1, "payroll", "The billing deploy of payroll.", "Done.")
	h.putMemory(t, keyA, scope, "billing_deploys", "how billing deploys go out", "Billing deploys go out on Tuesdays, after the invoices migration check.")
	h.putMemory(t, keyA, scope, "office_lunch", "where the team eats", "The noodle place near the office.")
	for _, s := range []string{"deploy-notes", "lunch", "hostile", "elsewhere"} {
		h.waitApplied(t, tenantA, s, 1)
	}
	a := h.signIn(t, keyA)

	// Both sources, in the API's order: the memory named by both words
	// first, then the messages; nothing of lunch or of another scope.
	status, body := searchPage(t, a, scope, "billing deploy", "")
	require.Equal(t, http.StatusOK, status, body)
	got := renderedHits(body)
	require.Equal(t, apiHits(t, h, keyA, scope, "billing deploy", ""), got)
	require.Len(t, got, 4)
	require.Equal(t, "memory /console/memories/project:billing/billing_deploys", got[0])
	require.ElementsMatch(t, []string{
		"message /console/sessions/deploy-notes#m0",
		"message /console/sessions/deploy-notes#m1",
		"message /console/sessions/hostile#m0",
	}, got[1:])
	require.NotContains(t, body, "lunch#")
	require.NotContains(t, body, "elsewhere")
	require.Contains(t, body, "4 hits, best first")
	scores := regexp.MustCompile(`<td class="num">([0-9.]+)</td>\s*<td class="snippet">`).FindAllStringSubmatch(body, -1)
	require.Len(t, scores, 4)
	for i := 1; i < len(scores); i++ {
		prev, err := strconv.ParseFloat(scores[i-1][1], 64)
		require.NoError(t, err)
		cur, err := strconv.ParseFloat(scores[i][1], 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, prev, cur, "scores fall with the rank")
	}
	require.Contains(t, body, "<mark>billing</mark>")
	require.Contains(t, body, "<mark>deploy</mark>")
	require.Contains(t, body, `<option value="" selected>`)

	// The stored HTML is text: Postgres's snippet drops what its parser
	// reads as tags (the <script>), and the page escapes what is left.
	require.NotContains(t, body, "<script")
	require.NotContains(t, body, "<img")
	require.Contains(t, body, "&lt;img src=x onerror=alert(1)&gt;")
	require.NotContains(t, body, "<b>bold")

	// The message's link lands on its row of the session page.
	status, sessionBody := a.get(t, "/console/sessions/deploy-notes")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, sessionBody, `<tr id="m1">`)

	// One source at a time.
	status, body = searchPage(t, a, scope, "billing deploy", "memory")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, []string{"memory /console/memories/project:billing/billing_deploys"}, renderedHits(body))
	require.Contains(t, body, `<option value="memory" selected>`)
	status, body = searchPage(t, a, scope, "billing deploy", "message")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, apiHits(t, h, keyA, scope, "billing deploy", "message"), renderedHits(body))
	require.Len(t, renderedHits(body), 3)
	status, body = searchPage(t, a, scope, "billing deploy", "all")
	require.Equal(t, http.StatusOK, status)
	require.Len(t, renderedHits(body), 4)

	// A query holding HTML is searched for its words and shown as text.
	status, body = searchPage(t, a, scope, `noodle '"><img src=x onerror=alert(1)>`, "")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, body, "<img")
	require.Contains(t, body, "noodle &#39;&#34;&gt;&lt;img src=x onerror=alert(1)&gt;")
	require.Equal(t, apiHits(t, h, keyA, scope, `noodle '"><img src=x onerror=alert(1)>`, ""), renderedHits(body))
	require.NotEmpty(t, renderedHits(body))

	// Nothing to search: nothing listed, no error.
	for _, q := range []string{"", "   "} {
		status, body = searchPage(t, a, scope, q, "")
		require.Equal(t, http.StatusOK, status)
		require.NotContains(t, body, `id="hits"`)
		require.NotContains(t, body, `id="search-problem"`)
		require.Contains(t, body, `id="search-q"`)
	}
	// A query the parser refuses, or a bad source: the page says why, 400.
	for _, c := range []struct{ query, source, says string }{
		{"<!-- --> </> !!", "", "holds no word to search for"},
		{strings.Repeat("long ", search.MaxQueryChars/4), "", "longer than 500 characters"},
		{"billing", "<i>sessions</i>", "want memory, message, or none for both"},
	} {
		status, body = searchPage(t, a, scope, c.query, c.source)
		require.Equal(t, http.StatusBadRequest, status, body)
		require.Contains(t, body, `<p class="error" role="alert" id="search-problem">Not searched: `)
		require.Contains(t, body, c.says)
		require.NotContains(t, body, `id="hits"`)
		require.NotContains(t, body, "<!--")
		require.NotContains(t, body, "<i>sessions")
		require.Contains(t, body, "billing_deploys.md", "the rest of the page is shown")
	}
	// No hit: the table says so.
	status, body = searchPage(t, a, scope, "zeppelin", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "Nothing in this scope matches.")

	// A scope whose sessions hold messages but no memory: its page opens
	// for a search that finds them, and is not found otherwise.
	status, body = searchPage(t, a, "project:payroll", "payroll", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, []string{"message /console/sessions/elsewhere#m0"}, renderedHits(body))
	status, _ = a.get(t, "/console/memories/project:payroll")
	require.Equal(t, http.StatusNotFound, status)
	status, _ = searchPage(t, a, "project:payroll", "zeppelin", "")
	require.Equal(t, http.StatusNotFound, status)
}

func TestMarkedSnippet(t *testing.T) {
	for in, want := range map[string][]snippetPart{
		"":                 nil,
		"plain":            {{Text: "plain"}},
		"a «b» c":          {{Text: "a "}, {Text: "b", Mark: true}, {Text: " c"}},
		"«a»«b»":           {{Text: "a", Mark: true}, {Text: "b", Mark: true}},
		"a «b":             {{Text: "a «b"}},
		"a » b «c»":        {{Text: "a » b "}, {Text: "c", Mark: true}},
		"«<script>»x":      {{Text: "<script>", Mark: true}, {Text: "x"}},
		"«a«b» c»":         {{Text: "a«b", Mark: true}, {Text: " c»"}},
		"é «ü» … «ß» tail": {{Text: "é "}, {Text: "ü", Mark: true}, {Text: " … "}, {Text: "ß", Mark: true}, {Text: " tail"}},
	} {
		require.Equal(t, want, markedSnippet(in), in)
	}
}
