package console

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/archivetest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// ChromiumVar names the chromium binary the browser tests drive; they skip
// without it. ArtifactsVar names where their screenshots go (a temporary
// directory, logged, when unset).
const (
	ChromiumVar  = "MNEMOS_TEST_CHROMIUM"
	ArtifactsVar = "MNEMOS_TEST_ARTIFACTS"
)

// browser starts a headless chromium for the test, and collects what its
// pages report: uncaught exceptions and console errors (a CSP violation is
// one), so a page that breaks under the policy fails the test.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	bin := os.Getenv(ChromiumVar)
	if bin == "" {
		t.Skipf("%s is unset: no browser to drive", ChromiumVar)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	var mu sync.Mutex
	var problems []string
	var wg sync.WaitGroup
	messages := chromedp.Console(ctx)
	wg.Go(func() {
		for msg, err := range messages {
			if err != nil {
				return
			}
			if msg.Type == chromedp.ConsoleError || msg.Type == chromedp.ConsoleException {
				mu.Lock()
				problems = append(problems, string(msg.Type)+": "+msg.Text)
				mu.Unlock()
			}
		}
	})
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc(); wg.Wait() })
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), problems...)
	}
}

// artifacts is the directory screenshots are written to.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(ArtifactsVar)
	if dir == "" {
		dir = t.TempDir()
	}
	dir = filepath.Join(dir, "console")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	t.Logf("screenshots in %s", dir)
	return dir
}

// shot saves a full-page screenshot of the page as name.png (quality 100
// is PNG; below it, JPEG).
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// text reads an element's text.
func text[S chromedp.Selectable](t *testing.T, ctx context.Context, sel S) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	require.NoError(t, err)
	return s
}

// downloaded waits for the browser to have saved name in dir, and reads it.
func downloaded(t *testing.T, dir, name string) string {
	t.Helper()
	var data []byte
	require.Eventually(t, func() bool {
		var err error
		data, err = os.ReadFile(filepath.Join(dir, name))
		return err == nil && len(data) > 0
	}, 10*time.Second, 50*time.Millisecond, "the browser saves %s", name)
	return string(data)
}

// TestBrowser drives the console in chromium as a tenant would: sign in,
// find the session made through the API, see its chart drawn with the
// compaction's mark, search a scope, restore a memory revision, approve one dream proposal
// and reject another, then check each change through the API.
func TestBrowser(t *testing.T) {
	ctx, problems := browser(t)
	dir := artifacts(t)
	h := setup(t)
	session, scope, name := "refactor-parser", "project:console", "release_day"
	h.makeSession(t, tenantA, keyA, session)
	h.makeMemory(t, keyA, scope, name)
	// A message for the scope's search to find that holds HTML: the page
	// must show it as text (an element would break the CSP or the DOM
	// check below).
	hostile := "hostile-paste"
	h.postExchange(t, keyA, hostile, 1, "console",
		`Pasted from the parser's log: <script>alert("parser")</script> <img src=x onerror=alert(1)> releases blocked`, "I will look at the parser.")
	h.waitApplied(t, tenantA, hostile, 1)
	// A second memory for the proposal to delete, so the restored one stays.
	other := "old_release_notes"
	require.Equal(t, http.StatusCreated, h.api(t, http.MethodPut, "/v1/scopes/"+scope+"/memories/"+other, keyA, memoryDoc(other, "Old notes."), nil))
	dreamID := h.makeProposal(t, tenantA, scope, other)
	// A second proposal, in another scope, to reject.
	otherScope := "project:console-archive"
	require.Equal(t, http.StatusCreated, h.api(t, http.MethodPut, "/v1/scopes/"+otherScope+"/memories/"+other, keyA, memoryDoc(other, "Archived notes."), nil))
	rejectID := h.makeProposal(t, tenantA, otherScope, other)
	// A model call in the ledger, as llm.Guard records each one (the
	// builtin provider the compactor used here records none).
	require.NoError(t, h.store.AddLLMUsage(context.Background(), tenantA, store.LLMUsage{
		Day: time.Now(), Task: "compaction", Provider: "anthropic", Model: "claude-haiku-4-5", InputTokens: 12_345, OutputTokens: 678,
	}, false))
	// An agent's round the proxy relayed, priced by the ledger: Mnemos
	// sent up two thirds of the client's bytes.
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), h.store.TenantSettings, time.Second)
	require.NoError(t, err)
	priced, err := llmledger.New(h.store, settings).RecordRound(context.Background(), llmledger.Round{
		Tenant: tenantA, Provider: "anthropic", Model: "claude-sonnet-4-5", Caches: true,
		Usage:   llm.Usage{InputTokens: 3, CacheReadTokens: 40_000, CacheWriteTokens: 6_000, OutputTokens: 800},
		Changed: true, SentBytes: 200_000, ClientBytes: 300_000,
	})
	require.NoError(t, err)
	require.Positive(t, priced.Savings())
	base := h.srv.URL
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		require.NoError(t, chromedp.Do(ctx, steps...))
	}
	link := func(href string) chromedp.CSS { return chromedp.CSS(`a[href="` + href + `"]`) }

	// Sign in: the console sends a signed-out browser to the form.
	do(chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("key")))
	shot(t, ctx, dir, "01-login")
	do(chromedp.SendKeys(chromedp.ID("key"), keyA), chromedp.Click(chromedp.ID("signin")), chromedp.WaitVisible(chromedp.ID("tenant")))
	require.Equal(t, tenantA, text(t, ctx, chromedp.ID("tenant")))

	// Sessions: the session is listed; its link opens it, and the chart is
	// drawn with one compaction mark.
	sessionLink := link("/console/sessions/" + session)
	do(chromedp.WaitVisible(sessionLink))
	shot(t, ctx, dir, "02-sessions")
	do(chromedp.Click(sessionLink), chromedp.WaitVisible(chromedp.CSS("#chart canvas")), chromedp.WaitVisible(chromedp.CSS("#chart[data-drawn]")))
	drawn, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("chart"), "data-drawn"))
	require.NoError(t, err)
	require.Equal(t, "1", drawn.Value, "the chart should carry one compaction mark")
	turns, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll("#turns tbody tr")))
	require.NoError(t, err)
	require.Len(t, turns, 9)
	compactions := text(t, ctx, chromedp.CSS("#compactions tbody"))
	require.Contains(t, compactions, "manual")
	require.Contains(t, compactions, "completed")
	context := text(t, ctx, chromedp.ID("context"))
	require.Contains(t, context, "compact-boundary", "the current context starts with the compaction's head")
	require.Contains(t, context, "Done with step 9.")
	shot(t, ctx, dir, "03-session")
	// Its history downloads, and the scope's archive below: the browser
	// saves each where downloads go.
	downloads := t.TempDir()
	_, err = chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads})
	require.NoError(t, err)
	do(chromedp.Click(chromedp.ID("export-history")))
	history := downloaded(t, downloads, "session-"+session+".jsonl")
	require.Len(t, strings.Split(strings.TrimSpace(history), "\n"), 9, "one turn event a line")
	require.Contains(t, history, `"session_id":"`+session+`"`)

	// Memories: the scope, the memory and its diff; restore revision 1.
	scopePath := "/console/memories/" + url.PathEscape(scope)
	do(chromedp.Click(link("/console/memories")), chromedp.WaitVisible(link(scopePath)))
	shot(t, ctx, dir, "04-memories")
	do(chromedp.Click(link(scopePath)), chromedp.WaitVisible(link(scopePath+"/"+name)))
	shot(t, ctx, dir, "05-scope")
	do(chromedp.Click(chromedp.ID("export-scope")))
	names, _ := archivetest.Files(t, []byte(downloaded(t, downloads, "memory-project-console.tar.gz")))
	require.Contains(t, names, "memory/"+name+".md")
	// Search the scope: type the words, submit; the memory and the
	// sessions' messages are listed, best first, the words marked, the
	// pasted HTML as text.
	do(chromedp.SendKeys(chromedp.ID("search-q"), "releases parser"), chromedp.Click(chromedp.ID("search")), chromedp.WaitVisible(chromedp.ID("hits")))
	shot(t, ctx, dir, "05b-scope-search")
	hitRows, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSSAll("#hits tr.hit")))
	require.NoError(t, err)
	require.Len(t, hitRows, len(apiHits(t, h, keyA, scope, "releases parser", "")))
	hitsText := text(t, ctx, chromedp.ID("hits"))
	require.Contains(t, hitsText, name+".md")
	require.Contains(t, hitsText, session)
	require.Contains(t, hitsText, hostile)
	require.Contains(t, hitsText, "<img src=x onerror=alert(1)>", "the pasted HTML reads as text")
	injected, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#hits script, #hits img").length`))
	require.NoError(t, err)
	require.Zero(t, injected, "the hits hold no element the stored text made")
	marks, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#hits mark")].map(m => m.textContent.toLowerCase())`))
	require.NoError(t, err)
	require.Contains(t, marks, "releases")
	require.Contains(t, marks, "parser")
	// Messages only: the memory goes; a message's link opens its session
	// at the message.
	// The page before had message hits too: wait for the table of the
	// new page, which names its source, or the next read races the
	// navigation.
	do(chromedp.SetValue(chromedp.ID("search-source"), "message"), chromedp.Click(chromedp.ID("search")),
		chromedp.WaitVisible(chromedp.CSS(`#hits[data-source="message"] tr.hit[data-source="message"]`)))
	require.NotContains(t, text(t, ctx, chromedp.ID("hits")), name+".md")
	do(chromedp.Click(chromedp.CSS(`#hits a[href^="/console/sessions/`+hostile+`#m"]`)), chromedp.WaitVisible(chromedp.CSS("#context tr:target")))
	require.Contains(t, text(t, ctx, chromedp.CSS("#context tr:target")), "releases blocked")
	shot(t, ctx, dir, "05c-search-hit")
	do(chromedp.Navigate(base+scopePath), chromedp.WaitVisible(link(scopePath+"/"+name)))
	do(chromedp.Click(link(scopePath+"/"+name)), chromedp.WaitVisible(chromedp.ID("diff")))
	diff := text(t, ctx, chromedp.ID("diff"))
	require.Contains(t, diff, "-Releases go out on Tuesdays.")
	require.Contains(t, diff, "+Releases go out on Thursdays.")
	shot(t, ctx, dir, "06-memory")
	do(chromedp.Click(chromedp.ID("restore-1")), chromedp.WaitVisible(chromedp.Search(`//span[@id="revision"][text()="3"]`)))
	shot(t, ctx, dir, "07-memory-restored")
	var m struct {
		Revision int64  `json:"revision"`
		Body     string `json:"body"`
	}
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/scopes/"+scope+"/memories/"+name, keyA, "", &m))
	require.Equal(t, int64(3), m.Revision)
	require.Contains(t, m.Body, "Tuesdays")

	// Dreams: the proposal is listed as held; approve it.
	dreamLink := link("/console/dreams/" + dreamID)
	do(chromedp.Click(link("/console/dreams")), chromedp.WaitVisible(dreamLink))
	shot(t, ctx, dir, "08-dreams")
	do(chromedp.Click(dreamLink), chromedp.WaitVisible(chromedp.ID("approve")))
	shot(t, ctx, dir, "09-dream-proposed")
	do(chromedp.Click(chromedp.ID("approve")), chromedp.WaitVisible(chromedp.Search(`//dd[@id="status"][text()="approved"]`)))
	shot(t, ctx, dir, "10-dream-approved")
	var dr struct {
		Status string `json:"status"`
	}
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/dreams/"+dreamID, keyA, "", &dr))
	require.Equal(t, "approved", dr.Status)
	require.Equal(t, http.StatusNotFound, h.api(t, http.MethodGet, "/v1/scopes/"+scope+"/memories/"+other, keyA, "", nil),
		"the approved proposal should have deleted %s", other)

	// The other proposal is rejected: it ends killed and deletes nothing.
	do(chromedp.Click(link("/console/dreams")), chromedp.WaitVisible(link("/console/dreams/"+rejectID)),
		chromedp.Click(link("/console/dreams/"+rejectID)), chromedp.WaitVisible(chromedp.ID("reject")),
		chromedp.Click(chromedp.ID("reject")), chromedp.WaitVisible(chromedp.Search(`//dd[@id="status"][text()="killed"]`)))
	shot(t, ctx, dir, "10b-dream-rejected")
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/dreams/"+rejectID, keyA, "", &dr))
	require.Equal(t, "killed", dr.Status)
	require.Equal(t, http.StatusOK, h.api(t, http.MethodGet, "/v1/scopes/"+otherScope+"/memories/"+other, keyA, "", nil),
		"the rejected proposal should have deleted nothing")

	// Usage: the model call is in the ledger.
	do(chromedp.Click(link("/console/usage")), chromedp.WaitVisible(chromedp.ID("usage")))
	shot(t, ctx, dir, "11-usage")
	usage := text(t, ctx, chromedp.ID("usage"))
	require.Contains(t, usage, "claude-haiku-4-5")
	require.Contains(t, usage, "12345")
	// The proxied round, through Mnemos and straight.
	proxied := text(t, ctx, chromedp.ID("proxy-cost"))
	for _, amount := range []llm.USD{priced.Through, priced.Straight, priced.Savings()} {
		require.Contains(t, proxied, amount.String())
	}

	require.Empty(t, problems(), "the pages reported errors (a CSP violation is one)")
}
