package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// The two tenants of every test: the console is used as acme, and globex
// tries to reach acme's data.
const (
	tenantA, keyA = "acme", "console-key-acme"
	tenantB, keyB = "globex", "console-key-globex"
)

// harness is the gateway with the console mounted, over a real Postgres
// and JetStream, with the accountant, the outbox relay and the compactor
// (builtin summaries) running, so turns posted to the API are applied and
// compactions done as in production.
type harness struct {
	store   *store.Store
	console *Console
	dreams  *dream.Dreams
	mux     *http.ServeMux
	srv     *httptest.Server
}

func setup(t testing.TB) *harness {
	t.Helper()
	st := pgtest.New(t)
	b := bustest.New(t)
	log := bustest.Logger(t)
	ctx, cancel := context.WithCancel(context.Background())
	for tenant, key := range map[string]string{tenantA: keyA, tenantB: keyB} {
		require.NoError(t, st.EnsureTenant(ctx, tenant, tenant))
		require.NoError(t, st.AddAPIKey(ctx, tenant, "test", key))
	}
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, b, settings, log, nil)
	require.NoError(t, err)
	provider := builtin.New(map[llm.Task]builtin.Handler{llm.TaskCompaction: compaction.BuiltinSummarizer})
	comp, err := compactor.New(compactor.DefaultConfig(), st, b, settings, provider, log, nil)
	require.NoError(t, err)
	gcfg := gateway.DefaultConfig()
	gcfg.PollInterval = 20 * time.Millisecond
	gcfg, err = gateway.WithServices(gcfg, st, settings, log, nil)
	require.NoError(t, err)
	gw, err := gateway.New(gcfg, st, b, settings, log, nil)
	require.NoError(t, err)
	con, err := New(Config{Store: st, Settings: settings, Memories: gcfg.Memories, Dreams: gcfg.Dreams, Search: gcfg.Search, Keys: gcfg.Keys, Eraser: gw.Eraser(), Log: log})
	require.NoError(t, err)
	mux := http.NewServeMux()
	gw.Register(mux)
	con.Register(mux)
	srv := httptest.NewServer(mux)

	relay := outbox.New(outbox.Config{Batch: 128, Poll: 20 * time.Millisecond}, st, b, log)
	var wg sync.WaitGroup
	for name, run := range map[string]func(context.Context) error{"relay": relay.Run, "accountant": acc.Run, "compactor": comp.Run} {
		wg.Go(func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	t.Cleanup(func() { srv.Close(); gw.Drain(); cancel(); wg.Wait() })
	return &harness{store: st, console: con, dreams: gcfg.Dreams, mux: mux, srv: srv}
}

// api calls the JSON API with key and decodes the answer into out (when not nil).
func (h *harness) api(t testing.TB, method, path, key, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	if strings.HasPrefix(body, "---") {
		req.Header.Set("Content-Type", "text/markdown")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil && resp.StatusCode < 300 {
		require.NoError(t, json.Unmarshal(raw, out), string(raw))
	}
	return resp.StatusCode
}

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// postTurn sends one turn event through POST /v1/turns.
func (h *harness) postTurn(t testing.TB, key, session string, seq int, inputTokens int) {
	t.Helper()
	ev := map[string]any{
		"schema": "mnemos.turn.v1", "event_id": randomID(), "session_id": session, "seq": seq,
		"memory_scope": map[string]string{"project": "console"}, "model": "claude-sonnet-4-5",
		"input_messages": []any{map[string]any{"uuid": randomID(), "role": "user", "content": []any{
			map[string]any{"type": "text", "text": fmt.Sprintf("Step %d: %s", seq, strings.Repeat("please refactor the parser and keep the tests green. ", 20))}}}},
		"response": map[string]any{"uuid": randomID(), "role": "assistant", "stop_reason": "end_turn", "content": []any{
			map[string]any{"type": "text", "text": fmt.Sprintf("Done with step %d.", seq)}}},
		"usage":       map[string]int{"input_tokens": inputTokens, "output_tokens": 200},
		"occurred_at": time.Now().UTC().Format(time.RFC3339),
	}
	raw, err := json.Marshal(ev)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, h.api(t, http.MethodPost, "/v1/turns", key, string(raw), nil))
}

// waitApplied waits until the accountant applied seq of the session.
func (h *harness) waitApplied(t testing.TB, tenant, session string, seq int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		s, err := h.store.GetSession(context.Background(), tenant, session)
		return err == nil && s.AppliedSeq >= seq
	}, 30*time.Second, 20*time.Millisecond, "turn %d of %s was not applied", seq, session)
}

// makeSession posts turns that climb past the warning threshold, compacts
// the session through POST …/compact, then posts two more turns: its chart
// has one compaction mark.
func (h *harness) makeSession(t testing.TB, tenant, key, session string) {
	t.Helper()
	counts := []int{20_000, 45_000, 70_000, 95_000, 120_000, 140_000, 150_000}
	for i, n := range counts {
		h.postTurn(t, key, session, i+1, n)
	}
	h.waitApplied(t, tenant, session, int64(len(counts)))
	var comp struct {
		Status     string `json:"status"`
		PreTokens  int64  `json:"pre_tokens"`
		PostTokens int64  `json:"post_tokens"`
	}
	require.Equal(t, http.StatusOK, h.api(t, http.MethodPost, "/v1/sessions/"+session+"/compact", key, `{}`, &comp))
	require.Equal(t, "completed", comp.Status)
	h.postTurn(t, key, session, len(counts)+1, 30_000)
	h.postTurn(t, key, session, len(counts)+2, 42_000)
	h.waitApplied(t, tenant, session, int64(len(counts)+2))
}

// memoryDoc is a memory's markdown.
func memoryDoc(name, body string) string {
	return "---\nname: " + name + "\ndescription: when releases go out\ntype: project\n---\n" + body + "\n"
}

// makeMemory writes a memory twice through the API: revisions 1 and 2.
func (h *harness) makeMemory(t testing.TB, key, scope, name string) {
	t.Helper()
	path := "/v1/scopes/" + scope + "/memories/" + name
	require.Equal(t, http.StatusCreated, h.api(t, http.MethodPut, path, key, memoryDoc(name, "Releases go out on Tuesdays."), nil))
	require.Equal(t, http.StatusOK, h.api(t, http.MethodPut, path, key, memoryDoc(name, "Releases go out on Thursdays."), nil))
}

// makeProposal records a dream of scope that the deletion guard held: it
// would delete the memory name. The dreamer does this when a run changes
// too much; here it is written through the same store calls.
func (h *harness) makeProposal(t testing.TB, tenant, scope, name string) string {
	t.Helper()
	ctx := context.Background()
	sc, err := memory.ParseScope(scope)
	require.NoError(t, err)
	d, err := h.dreams.Request(ctx, tenant, sc)
	require.NoError(t, err)
	m, err := h.console.cfg.Memories.Get(ctx, tenant, sc, memory.Name(name))
	require.NoError(t, err)
	prop, err := json.Marshal(dream.Proposal{Edits: []dream.ProposedEdit{{Name: name, Delete: true, ExpectRevision: m.Revision, Reason: "superseded by the release calendar"}}})
	require.NoError(t, err)
	err = h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		return tx.FinishDream(ctx, d.ID, store.DreamOutcome{Status: string(dream.StatusProposed), At: time.Now().UTC(), DreamWork: store.DreamWork{
			LLMProvider: "builtin", MemoriesLive: 1, ChangesAllowed: 0, ChangesDestructive: 1,
			Deleted: []string{name}, ProposalJSON: prop, Summary: "Would delete " + name + ".",
		}})
	})
	require.NoError(t, err)
	return d.ID
}

// browserless is a console client without a browser: a cookie jar, no
// redirects followed, so each answer's status is seen.
type browserless struct {
	h      *harness
	client *http.Client
	csrf   string
}

// signIn signs in with key and reads the CSRF token of a page.
func (h *harness) signIn(t testing.TB, key string) *browserless {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	b := &browserless{h: h, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	status, _ := b.post(t, "/console/login", url.Values{"key": {key}})
	require.Equal(t, http.StatusSeeOther, status)
	status, body := b.get(t, "/console/sessions")
	require.Equal(t, http.StatusOK, status, body)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, m, "no CSRF token on the page")
	b.csrf = m[1]
	return b
}

func (b *browserless) get(t testing.TB, path string) (int, string) {
	t.Helper()
	resp, err := b.client.Get(b.h.srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}

func (b *browserless) post(t testing.TB, path string, form url.Values) (int, string) {
	t.Helper()
	resp, err := b.client.Post(b.h.srv.URL+path, "application/x-www-form-urlencoded", bytes.NewBufferString(form.Encode()))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(raw)
}
