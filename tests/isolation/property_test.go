package isolation_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/sessionmemory"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// The tenants of the property test. Every text a tenant sends carries its
// marker, so a byte of one tenant's data in another's answer or row shows.
var tenants = []string{"alpha", "bravo", "charlie"}

func marker(tenant string) string { return "zq-" + tenant + "-qz" }

// Settings that make every tenant's sessions produce every kind of row
// quickly: offloaded tool results, notes after a few hundred tokens.
// The test's tenants send many requests at once: their per-process cap on
// expensive requests is off, so every answer is about isolation, not a 429.
const settingsDoc = `{"offload": {"threshold_chars": 1500, "preview_bytes": 200},
	"session_memory": {"init_tokens": 300, "update_tokens": 300, "update_tool_calls": 1},
	"limits": {"concurrent_requests": 0}}`

// system is every service of one process on one small pool, with an HTTP
// API in front of the gateway.
type system struct {
	store *store.Store
	admin *pgxpool.Pool
	api   *httptest.Server
	stop  func()
}

func startSystem(t *testing.T, maxConns int32) *system {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := store.Open(ctx, store.Config{URL: pgtest.URL(t), MaxConns: maxConns})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	require.NoError(t, st.CheckIsolation(ctx))
	for _, tenant := range tenants {
		require.NoError(t, st.EnsureTenant(ctx, tenant, tenant))
		require.NoError(t, st.AddAPIKey(ctx, tenant, "test", "key-"+tenant))
		require.NoError(t, st.SetTenantSettings(ctx, tenant, []byte(settingsDoc)))
	}
	b := bustest.New(t)
	apitest.CheckBusEvents(t, b)
	log := bustest.Logger(t)
	meter := telemetrytest.New(t).Meter()
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	ledger := llmledger.New(st, settings)
	provider := llm.Guard(builtin.New(map[llm.Task]builtin.Handler{
		llm.TaskCompaction: compaction.BuiltinSummarizer,
		llm.TaskNotes:      sessionnotes.Builtin,
	}), llm.GuardOptions{Budget: ledger, Recorder: ledger})

	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, b, settings, log, meter)
	require.NoError(t, err)
	comp, err := compactor.New(compactor.DefaultConfig(), st, b, settings, provider, log, meter)
	require.NoError(t, err)
	notes, err := sessionmemory.New(sessionmemory.DefaultConfig(), st, b, settings, provider, log, meter)
	require.NoError(t, err)
	relay := outbox.New(outbox.Config{Batch: 128, Poll: 50 * time.Millisecond}, st, b, log)
	gcfg := gateway.DefaultConfig()
	gcfg.PollInterval = 20 * time.Millisecond
	gw, err := gateway.New(gcfg, st, b, settings, log, meter)
	require.NoError(t, err)
	mux := http.NewServeMux()
	gw.Register(mux)
	api := httptest.NewServer(mux)

	var wg sync.WaitGroup
	for name, run := range map[string]func(context.Context) error{"accountant": acc.Run, "compactor": comp.Run, "session-memory": notes.Run, "relay": relay.Run} {
		wg.Go(func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	var once sync.Once
	stop := func() { once.Do(func() { api.Close(); gw.Drain(); cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return &system{store: st, admin: pgtest.Admin(t, st), api: api, stop: stop}
}

// workload sends random requests of every tenant, several at once, and
// checks each answer as it comes.
type workload struct {
	t   *testing.T
	sys *system
	// every session's next round, by tenant and session
	mu       sync.Mutex
	sessions map[string]*session
	// which tenant each tool result and compaction belongs to (read as admin)
	ownersMu sync.Mutex
	owners   map[string]string
	counts   sync.Map // request kind → *atomic.Int64
	// client validates every answer against api/openapi.yaml.
	client *http.Client
}

type session struct {
	mu      sync.Mutex
	tenant  string
	id      string
	seq     int64
	pending string // a tool_use id waiting for its result
}

func (w *workload) session(tenant, id string) *session {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := tenant + "/" + id
	if w.sessions[key] == nil {
		w.sessions[key] = &session{tenant: tenant, id: id}
	}
	return w.sessions[key]
}

func (w *workload) count(kind string) {
	n, _ := w.counts.LoadOrStore(kind, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

// call sends one request with tenant's key and checks that no other
// tenant's marker is in the answer.
func (w *workload) call(tenant, method, path string, body any) (int, []byte) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		require.NoError(w.t, err)
		r = strings.NewReader(string(data))
	}
	req, err := http.NewRequest(method, w.sys.api.URL+path, r)
	require.NoError(w.t, err)
	req.Header.Set("Authorization", "Bearer key-"+tenant)
	resp, err := w.client.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(w.t, err)
	for _, other := range tenants {
		if other != tenant {
			require.NotContains(w.t, string(raw), marker(other), "%s %s for %s answered another tenant's data", method, path, tenant)
		}
	}
	return resp.StatusCode, raw
}

// ingest sends the session's next round through POST /v1/turns (the
// accountant applies it from the bus): a request or a tool result, and an
// answer that sometimes calls a tool with a large result.
func (w *workload) ingest(r *rand.Rand, s *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	mk := marker(s.tenant)
	id := func(kind string) string { return fmt.Sprintf("%s-%s-%d", s.id, kind, s.seq) }
	var in turn.Message
	if s.pending != "" {
		result := turn.Content{{Type: turn.BlockText, Text: strings.Repeat("file contents of "+mk+" ", 1+r.IntN(200))}}
		in = turn.Message{UUID: id("r"), Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: s.pending, Content: &result}}}
		s.pending = ""
	} else {
		in = turn.Message{UUID: id("u"), Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: fmt.Sprintf("request %d of %s", s.seq, mk)}}}
	}
	resp := turn.Message{UUID: id("a"), Role: "assistant", StopReason: "end_turn", Content: turn.Content{{Type: turn.BlockText, Text: fmt.Sprintf("answer %d for %s", s.seq, mk)}}}
	if r.IntN(2) == 0 {
		s.pending = id("tool")
		input, err := json.Marshal(map[string]string{"file_path": "/src/" + mk + ".go"})
		require.NoError(w.t, err)
		resp.StopReason = "tool_use"
		resp.Content = append(resp.Content, turn.Block{Type: turn.BlockToolUse, ID: s.pending, Name: "Read", Input: input})
	}
	ev := turn.Event{
		Schema: turn.SchemaV1, EventID: id("e"), SessionID: s.id, Seq: s.seq, Model: "model-" + mk,
		InputMessages: []turn.Message{in}, Response: &resp,
		Usage:      &turn.Usage{InputTokens: 400 * s.seq, OutputTokens: 40},
		OccurredAt: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC).Add(time.Duration(s.seq) * time.Minute),
	}
	status, raw := w.call(s.tenant, http.MethodPost, "/v1/turns", ev)
	require.Equal(w.t, http.StatusAccepted, status, string(raw))
}

// owner is the tenant a tool result or compaction belongs to, as the
// administrator sees it.
func (w *workload) owner(table, id string) string {
	w.ownersMu.Lock()
	defer w.ownersMu.Unlock()
	if o, ok := w.owners[table+"/"+id]; ok {
		return o
	}
	var o string
	err := w.sys.admin.QueryRow(context.Background(), "SELECT tenant_id FROM "+table+" WHERE id = $1", id).Scan(&o)
	require.NoError(w.t, err)
	w.owners[table+"/"+id] = o
	return o
}

// anyID picks a random id of table, of any tenant.
func (w *workload) anyID(r *rand.Rand, table string) (string, bool) {
	rows, err := w.sys.admin.Query(context.Background(), "SELECT id FROM "+table+" ORDER BY id")
	require.NoError(w.t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(w.t, err)
	if len(ids) == 0 {
		return "", false
	}
	return ids[r.IntN(len(ids))], true
}

// step runs one random request of a random tenant.
func (w *workload) step(r *rand.Rand) {
	t := w.t
	ctx := context.Background()
	tenant := tenants[r.IntN(len(tenants))]
	other := tenants[r.IntN(len(tenants))]
	// Two session names every tenant uses, and one of each tenant's own.
	sessionID := []string{"shared-1", "shared-2", "own-" + tenant}[r.IntN(3)]
	switch k := r.IntN(100); {
	case k < 35:
		w.count("ingest")
		w.ingest(r, w.session(tenant, sessionID))
	case k < 40:
		// The listing holds the tenant's sessions only (call checks the
		// markers in the answer too).
		w.count("sessions")
		status, raw := w.call(tenant, http.MethodGet, "/v1/sessions?limit=500", nil)
		require.Equal(t, 200, status, string(raw))
		var list struct {
			Items []struct {
				SessionID string `json:"session_id"`
			} `json:"items"`
		}
		require.NoError(t, json.Unmarshal(raw, &list))
		for _, it := range list.Items {
			require.Contains(t, []string{"shared-1", "shared-2", "own-" + tenant}, it.SessionID, "tenant %s listed another tenant's session", tenant)
		}
	case k < 45:
		w.count("session")
		status, raw := w.call(tenant, http.MethodGet, "/v1/sessions/"+sessionID, nil)
		require.Contains(t, []int{200, 404}, status, string(raw))
		if status == 200 && !strings.Contains(string(raw), `"applied_seq":0,`) {
			require.Contains(t, string(raw), `"model":"model-`+marker(tenant))
		}
	case k < 58:
		w.count("context")
		status, raw := w.call(tenant, http.MethodGet, "/v1/sessions/"+sessionID+"/context", nil)
		require.Contains(t, []int{200, 404}, status, string(raw))
	case k < 66:
		w.count("tool-result")
		w.readAnyByID(r, tenant, "tool_results", "/v1/tool-results/")
	case k < 71:
		w.count("compact")
		status, raw := w.call(tenant, http.MethodPost, "/v1/sessions/"+sessionID+"/compact", map[string]any{"wait": false})
		require.Contains(t, []int{202, 404}, status, string(raw))
	case k < 78:
		w.count("compaction")
		w.readAnyByID(r, tenant, "compactions", "/v1/compactions/")
	case k < 82:
		w.count("compactions")
		status, raw := w.call(tenant, http.MethodGet, "/v1/sessions/"+sessionID+"/compactions", nil)
		require.Contains(t, []int{200, 404}, status, string(raw)) // 404: the tenant has no such session yet
		var list struct {
			Compactions []struct {
				ID string `json:"id"`
			} `json:"compactions"`
		}
		require.NoError(t, json.Unmarshal(raw, &list))
		for _, c := range list.Compactions {
			require.Equal(t, tenant, w.owner("compactions", c.ID), "tenant %s listed another tenant's compaction", tenant)
		}
	case k < 89:
		w.count("notes")
		status, raw := w.call(tenant, http.MethodGet, "/v1/sessions/"+sessionID+"/notes", nil)
		require.Contains(t, []int{200, 404}, status, string(raw))
	case k < 93:
		// Through the store: tenant asks, by key, for rows of another tenant.
		w.count("store-by-key")
		if other == tenant {
			return
		}
		toolResult, hasTool := w.anyIDOf(other, "tool_results")
		compactionID, hasCompaction := w.anyIDOf(other, "compactions")
		require.NoError(t, w.sys.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			_, err := tx.Session(ctx, "own-"+other)
			require.ErrorIs(t, err, store.ErrNotFound)
			msgs, err := tx.Messages(ctx, "own-"+other)
			require.NoError(t, err)
			require.Empty(t, msgs)
			_, err = tx.Notes(ctx, "own-"+other)
			require.ErrorIs(t, err, store.ErrNotFound)
			if hasTool {
				_, err = tx.ToolResult(ctx, toolResult)
				require.ErrorIs(t, err, store.ErrNotFound)
			}
			if hasCompaction {
				_, err = tx.Compaction(ctx, compactionID)
				require.ErrorIs(t, err, store.ErrNotFound)
			}
			return nil
		}))
	case k < 97:
		// Raw SQL on the services' pool, with the tenant set as InTx sets
		// it but no tenant filter: the policy alone keeps it to its rows.
		w.count("raw-tenant")
		inTx(t, w.sys.store.Pool(), tenant, func(tx pgx.Tx) []string {
			for _, table := range []string{"sessions", "messages", "tool_results", "compactions", "session_notes", "turns"} {
				require.Zero(t, count(t, tx, "SELECT count(*) FROM "+table+" WHERE tenant_id <> $1", tenant), "%s sees other tenants' %s", tenant, table)
			}
			return nil
		})
	default:
		// Raw SQL on the services' pool with no tenant: nothing to see or write.
		w.count("raw-no-tenant")
		var n int64
		require.NoError(t, w.sys.store.Pool().QueryRow(ctx, "SELECT (SELECT count(*) FROM sessions) + (SELECT count(*) FROM messages) + (SELECT count(*) FROM api_keys)").Scan(&n))
		require.Zero(t, n, "a query naming no tenant sees rows")
		_, err := w.sys.store.Pool().Exec(ctx, "INSERT INTO sessions (tenant_id, session_id) VALUES ($1, 'forged')", other)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr) && pgErr.Code == "42501", "an insert naming no tenant is refused by the policy: %v", err)
	}
}

// readAnyByID asks, with tenant's key, for a random row of table of any
// tenant at path+id: found when it is tenant's, not found otherwise.
func (w *workload) readAnyByID(r *rand.Rand, tenant, table, path string) {
	id, ok := w.anyID(r, table)
	if !ok {
		return
	}
	status, raw := w.call(tenant, http.MethodGet, path+id, nil)
	if w.owner(table, id) == tenant {
		require.Equal(w.t, http.StatusOK, status, string(raw))
	} else {
		require.Equal(w.t, http.StatusNotFound, status, "tenant %s read another tenant's %s %s: %s", tenant, table, id, raw)
	}
}

// anyIDOf picks an id of table belonging to tenant.
func (w *workload) anyIDOf(tenant, table string) (string, bool) {
	var id string
	err := w.sys.admin.QueryRow(context.Background(), "SELECT id FROM "+table+" WHERE tenant_id = $1 ORDER BY random() LIMIT 1", tenant).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false
	}
	require.NoError(w.t, err)
	return id, true
}

// run sends n requests from workers goroutines, then waits until every
// ingested turn is applied.
func (w *workload) run(n, workers int, seed uint64) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Go(func() {
			for next.Add(1) <= int64(n) && !w.t.Failed() {
				w.step(r)
			}
		})
	}
	wg.Wait()
	require.Eventually(w.t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, s := range w.sessions {
			got, err := w.sys.store.GetSession(context.Background(), s.tenant, s.id)
			if err != nil || got.AppliedSeq < s.seq {
				return false
			}
		}
		return true
	}, 90*time.Second, 100*time.Millisecond, "every ingested turn is applied")
}

func newWorkload(t *testing.T, sys *system) *workload {
	return &workload{t: t, sys: sys, sessions: map[string]*session{}, owners: map[string]string{}, client: apitest.Client(t)}
}

// foreignMarkers reads every row of every tenant table as the administrator
// and reports rows carrying another tenant's marker: data written into the
// wrong tenant.
func foreignMarkers(t *testing.T, admin *pgxpool.Pool) []string {
	t.Helper()
	var out []string
	for _, table := range tenantTables(t, admin) {
		rows, err := admin.Query(context.Background(), "SELECT tenant_id, x::text FROM "+pgx.Identifier{table}.Sanitize()+" x")
		require.NoError(t, err)
		for rows.Next() {
			var tenant, text string
			require.NoError(t, rows.Scan(&tenant, &text))
			for _, other := range tenants {
				if other != tenant && strings.Contains(text, marker(other)) {
					out = append(out, fmt.Sprintf("%s: a row of %s holds %s's data", table, tenant, other))
				}
			}
		}
		require.NoError(t, rows.Err())
	}
	return out
}

// TestTenantsNeverSeeEachOther interleaves 1,000 random requests of three
// tenants over a pool of three connections shared by every service: turns
// ingested over HTTP and applied by the accountant from the bus, sessions
// (read and listed), contexts, tool results, compactions (requested, listed, read), notes, store
// reads by another tenant's keys, and raw SQL with and without a tenant. No
// answer holds another tenant's data, no id of another tenant is found, no
// row is written into the wrong tenant, and afterwards the probe finds no
// row of another tenant visible or writable through the services' role. The
// probe can fail: with the policy dropped it sees the foreign rows.
func TestTenantsNeverSeeEachOther(t *testing.T) {
	t.Parallel()
	sys := startSystem(t, 3)
	w := newWorkload(t, sys)
	w.run(1000, 6, 1)
	sys.stop()

	var summary []string
	w.counts.Range(func(k, v any) bool {
		summary = append(summary, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("requests: %s", strings.Join(summary, " "))

	for _, s := range w.sessions {
		got, err := sys.store.GetSession(context.Background(), s.tenant, s.id)
		require.NoError(t, err)
		require.Equal(t, s.seq, got.AppliedSeq, "%s/%s", s.tenant, s.id)
		require.Equal(t, 2*s.seq, got.MessageCount, "%s/%s: its own messages, no one else's", s.tenant, s.id)
		require.Equal(t, "model-"+marker(s.tenant), got.Model)
	}
	require.Empty(t, foreignMarkers(t, sys.admin))

	violations, covered := probe(t, sys.store.Pool(), sys.admin, tenants)
	require.Empty(t, violations)
	for _, table := range []string{"tenants", "api_keys", "sessions", "turns", "messages", "tool_results", "content_replacements",
		"compactions", "session_notes", "context_snapshots", "llm_usage"} {
		var n int
		require.NoError(t, sys.admin.QueryRow(context.Background(), "SELECT count(DISTINCT tenant_id) FROM "+table).Scan(&n))
		require.Equal(t, len(tenants), n, "the workload wrote %s rows of every tenant", table)
	}
	t.Logf("probe: %d tenant tables hold rows of several tenants, none visible across them", covered)

	t.Run("the probe sees foreign rows with the policy dropped", func(t *testing.T) {
		_, err := sys.admin.Exec(context.Background(), "DROP POLICY tenant_isolation ON sessions; ALTER TABLE sessions DISABLE ROW LEVEL SECURITY")
		require.NoError(t, err)
		violations, _ := probe(t, sys.store.Pool(), sys.admin, tenants)
		require.Contains(t, violations, fmt.Sprintf("sessions: with no tenant set, %d rows are visible", len(w.sessions)))
		for _, a := range tenants {
			require.Contains(t, violations, fmt.Sprintf("sessions: tenant %s sees %d rows of other tenants", a, len(w.sessions)-w.sessionsOf(a)))
		}
		for _, v := range violations {
			require.True(t, strings.HasPrefix(v, "sessions: "), "only the table without its policy leaks: %s", v)
		}
	})
}

func (w *workload) sessionsOf(tenant string) int {
	n := 0
	for _, s := range w.sessions {
		if s.tenant == tenant {
			n++
		}
	}
	return n
}
