package gateway_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway"
)

// The sessions and scopes of the erasure tests. Each id is distinctive, so
// a row that still holds one is found by its text wherever the id sits: a
// column, a payload, an event id, a message uuid.
const (
	erased     = "erase-me-7f3a" // acme's session that goes
	erasedThr  = "thr-91c"       // a thread the proxy keeps under it: a session of its own
	kept       = "keep-me-2b"    // acme's session that stays
	goneScope  = "project:gone-5d"
	goneMarker = "gone-5d"
	goneBody   = "remember gone-5d" // the text of the erased scope's memories
	keptScope  = "project:stay-9e"
)

// notTiedToASession are the tenant tables no row of which holds a session's
// data, and why. Every other table with a tenant_id column must hold rows of
// the erased session once the test has set it up, so a new table fails the
// test until its erasure is thought of.
var notTiedToASession = map[string]string{
	"tenants":          "the tenant itself",
	"api_keys":         "the tenant's keys",
	"tenant_upstreams": "the tenant's model upstream",
	"limit_buckets":    "per-tenant rate limit buckets",
	"llm_usage":        "per-tenant, per-day totals of model calls: numbers, no session",
	"memories":         "a scope's (DELETE /v1/scopes/{scope}); a session's revisions of it forget the session",
	"memory_indexes":   "a scope's",
	"memory_terms":     "the stems of a scope's memories, kept with them (migration 00043)",
	"memory_vectors":   "the vectors of a scope's memories, kept with them (migration 00042)",
	"dreams":           "a scope's",
	"dream_scopes":     "a scope's",
	"run_leases":       "keyed by scope (the extractor's runs)",
	"erasures":         "the record of the erasure itself: names the session, holds none of its content",
	"audit_log":        "outlives what it records: names the session, holds none of its content",
}

// afterSessionErasure and afterScopeErasure are the tables whose rows may
// still name the erased session or scope once the erasure is done, and why.
var afterSessionErasure = map[string]string{
	"erasures":  "the erasure's record",
	"audit_log": "the erasure's audit record",
}

var afterScopeErasure = map[string]string{
	"erasures":          "the erasure's record",
	"audit_log":         "the erasure's audit record",
	"sessions":          "a session's memory_scope names the scope it writes to: the session's setting, not the scope's data",
	"turns":             "a turn event names its session's memory scope",
	"outbox":            "an event not yet relayed names its session's memory scope",
	"extractor_cursors": "a session's cursor names the scope its memories go to",
}

// eraseRound is one round of session writing to scope: the user's text,
// after the previous round's tool result when result is not empty, and a
// response calling Bash.
func eraseRound(tenant, session, scope string, seq int64, text, result string) turn.Event {
	ev := round(tenant, session, seq, text, result)
	kind, id, _ := strings.Cut(scope, ":")
	ev.MemoryScope = map[string]string{kind: id}
	return ev
}

// tenantTables reads every table with a tenant_id column from the catalog.
func tenantTables(t *testing.T, admin *pgxpool.Pool) []string {
	t.Helper()
	rows, err := admin.Query(context.Background(), `
		SELECT c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_attribute a ON a.attrelid = c.oid
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
		  AND a.attname = 'tenant_id' AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY 1`)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		out = append(out, name)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, out, "messages")
	return out
}

// naming counts the rows of tenant in table whose text names one of
// markers: as text, or hex-encoded inside a bytea.
func naming(t *testing.T, admin *pgxpool.Pool, table, tenant string, markers ...string) int64 {
	t.Helper()
	var total int64
	for _, m := range markers {
		var n int64
		err := admin.QueryRow(context.Background(), fmt.Sprintf(
			`SELECT count(*) FROM %q r WHERE r.tenant_id = $1 AND (strpos(row_to_json(r)::text, $2) > 0 OR strpos(row_to_json(r)::text, $3) > 0)`, table),
			tenant, m, hex.EncodeToString([]byte(m))).Scan(&n)
		require.NoError(t, err, table)
		total += n
	}
	return total
}

// digest is a digest of the rows of tenant in table that name marker ("":
// every row of the tenant), to tell that they did not change.
func digest(t *testing.T, admin *pgxpool.Pool, table, tenant, marker string) string {
	t.Helper()
	var d string
	err := admin.QueryRow(context.Background(), fmt.Sprintf(
		`SELECT coalesce(md5(string_agg(row_to_json(r)::text, '|' ORDER BY row_to_json(r)::text)), '') FROM %q r
		 WHERE r.tenant_id = $1 AND ($2 = '' OR strpos(row_to_json(r)::text, $2) > 0)`, table), tenant, marker).Scan(&d)
	require.NoError(t, err, table)
	return d
}

// digests is digest of every table but those skipped.
func digests(t *testing.T, admin *pgxpool.Pool, tables []string, tenant, marker string, skip map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, tb := range tables {
		if _, ok := skip[tb]; !ok {
			out[tb] = digest(t, admin, tb, tenant, marker)
		}
	}
	return out
}

// seedSession gives tenant's session data in every table a session's data
// lives in: through the accountant, the API and the memory store where
// they write it, and as the proxy, the recall service and the limiter write
// it where those are not run here.
func seedSession(t *testing.T, h *harness, c *client.Client, admin *pgxpool.Pool, tenant, session, thread, scope string) {
	t.Helper()
	ctx := context.Background()
	acc := h.accountant(t)
	output := strings.Repeat("build log line of "+session+"\n", 3_000)
	require.NoError(t, acc.Apply(ctx, eraseRound(tenant, session, scope, 1, "run the build of "+session, "")))
	require.NoError(t, acc.Apply(ctx, eraseRound(tenant, session, scope, 2, "what did it say?", output)))
	require.NoError(t, acc.Apply(ctx, eraseRound(tenant, session, scope, 3, "fix it", "ok")))
	if thread != "" {
		require.NoError(t, acc.Apply(ctx, eraseRound(tenant, thread, scope, 1, "a subagent's task", "")))
	}

	// A compaction requested, the context read (its snapshot and memory
	// section), a memory the session's agent wrote.
	status, body := h.do(t, "POST", "/v1/sessions/"+session+"/compact", "key-"+tenant, []byte(`{"wait": false}`))
	require.Equal(t, http.StatusAccepted, status, body)
	status, body = h.do(t, "GET", "/v1/sessions/"+session+"/context?wait=0", "key-"+tenant, nil)
	require.Equal(t, http.StatusOK, status, body)
	_, scopeID, _ := strings.Cut(scope, ":")
	remember := "remember " + scopeID + " well"
	_, err := c.PutMemory(ctx, scope, "learned", memoryMarkdown("learned", "Learned in a session", remember),
		client.WriteOptions{SessionID: session, SourceTurns: []string{session + "-e1"}, Reason: "learned"})
	require.NoError(t, err)

	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := admin.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	user := session + "-u1"
	exec(`INSERT INTO recall_sessions (tenant_id, session_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, tenant, session)
	exec(`INSERT INTO recall_surfaced (tenant_id, session_id, scope, name, revision, source, message_uuid, bytes)
	      VALUES ($1, $2, $3, 'learned', 1, 'prefetch', $4, 100) ON CONFLICT DO NOTHING`, tenant, session, scope, user)
	exec(`INSERT INTO recall_prefetches (tenant_id, session_id, message_uuid, outcome, blocks)
	      VALUES ($1, $2, $3, 'surfaced', ARRAY[$4])
	      ON CONFLICT (tenant_id, session_id, message_uuid) DO UPDATE SET outcome = 'surfaced', blocks = EXCLUDED.blocks`, tenant, session, user, "<reminder>"+remember+"</reminder>")
	exec(`INSERT INTO active_sessions (tenant_id, session_id, active_at) VALUES ($1, $2, now()) ON CONFLICT DO NOTHING`, tenant, session)
	exec(`INSERT INTO agent_requests (tenant_id, session_id, model, body, pieces) VALUES ($1, $2, 'claude-sonnet-4-5', '', 1) ON CONFLICT DO NOTHING`, tenant, session)
	exec(`INSERT INTO agent_request_pieces (tenant_id, session_id, idx, digest, body) VALUES ($1, $2, 0, '\x00', $3) ON CONFLICT DO NOTHING`,
		tenant, session, []byte(`{"messages":[{"role":"user","content":"run the build of `+session+`"}]}`))
	exec(`INSERT INTO agent_memory_writes (tenant_id, session_id, written_at, seq, position) VALUES ($1, $2, now(), 1, 2) ON CONFLICT DO NOTHING`, tenant, session)
	exec(`INSERT INTO extractor_cursors (tenant_id, session_id, scope) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, tenant, session, scope)
	exec(`INSERT INTO session_notes (tenant_id, session_id, content) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, tenant, session, "# Notes of "+session)
	exec(`INSERT INTO memory_sections (tenant_id, session_id, blocks) VALUES ($1, $2, ARRAY[$3]) ON CONFLICT DO NOTHING`, tenant, session, remember)
	// The embedder's vectors of the session's first message and of the
	// scope's memory (float32 zeros will do).
	exec(`INSERT INTO message_vectors (tenant_id, session_id, position, model, vector) VALUES ($1, $2, 0, 'scripted', $3) ON CONFLICT DO NOTHING`,
		tenant, session, make([]byte, 16))
	exec(`INSERT INTO memory_vectors (tenant_id, scope, name, revision, model, vector) VALUES ($1, $2, 'learned', 1, 'scripted', $3) ON CONFLICT DO NOTHING`,
		tenant, scope, make([]byte, 16))
	exec(`INSERT INTO context_snapshots (tenant_id, session_id, epoch, prefix_len, prefix_hash) VALUES ($1, $2, 0, 1, '\x01') ON CONFLICT DO NOTHING`, tenant, session)
	for _, th := range []string{session, thread} {
		if th == "" {
			continue
		}
		kind := "main"
		if th != session {
			kind = "agent"
		}
		exec(`INSERT INTO proxy_threads (tenant_id, session_id, thread_id, agent_id, kind) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, tenant, session, th, kind, kind)
		exec(`INSERT INTO proxy_paths (tenant_id, thread_id, position, digest) VALUES ($1, $2, 0, $3), ($1, $2, 1, $4) ON CONFLICT DO NOTHING`,
			tenant, th, []byte(th+"-0"), []byte(th+"-1"))
	}
	// What the scope's own tables hold: a dream and its state, the
	// extractor's run.
	exec(`INSERT INTO dream_scopes (tenant_id, scope) VALUES ($1, $2) ON CONFLICT DO NOTHING`, tenant, scope)
	exec(`INSERT INTO dreams (tenant_id, dream_id, scope, trigger, status, summary) VALUES ($1, $2, $3, 'manual', 'completed', $4) ON CONFLICT DO NOTHING`,
		tenant, "dream-"+scopeID, scope, "kept: "+remember)
	exec(`INSERT INTO run_leases (tenant_id, kind, key) VALUES ($1, 'extractor', $2) ON CONFLICT DO NOTHING`, tenant, scope)
	exec(`INSERT INTO llm_usage (tenant_id, day, task, provider, model, calls) VALUES ($1, current_date, 'compaction', 'builtin', 'builtin', 1) ON CONFLICT DO NOTHING`, tenant)
}

// sweepUntilErased runs the gateway's sweep of erasures until acme's
// erasure of the erased session is finished; the erasure's lease must be
// short.
func sweepUntilErased(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	time.Sleep(5 * time.Millisecond)
	ctxRun, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.gw.RunErasures(ctxRun) }()
	require.Eventually(t, func() bool {
		p, err := h.store.SessionErasing(ctx, "acme", erased)
		return err == nil && !p
	}, 20*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}

// requireErased fails unless no row of acme names the erased session or
// its thread, but the erasure's records.
func requireErased(t *testing.T, admin *pgxpool.Pool) {
	t.Helper()
	for _, tb := range tenantTables(t, admin) {
		if _, ok := afterSessionErasure[tb]; !ok {
			require.Zero(t, naming(t, admin, tb, "acme", erased, erasedThr), tb)
		}
	}
}

// erasureHarness is the gateway's harness with two sessions of acme (one
// with a thread) and one of globex under the erased session's id, each in
// a scope of its own but globex's, which has acme's erased scope's name.
func erasureHarness(t *testing.T, change func(*gateway.Config)) (*harness, *client.Client, *pgxpool.Pool) {
	t.Helper()
	h := setupWith(t, change)
	admin := pgtest.Admin(t, h.store)
	acme := client.New(h.srv.URL, "key-acme", client.WithHTTPClient(h.client))
	globex := client.New(h.srv.URL, "key-globex", client.WithHTTPClient(h.client))
	seedSession(t, h, acme, admin, "acme", erased, erasedThr, goneScope)
	seedSession(t, h, acme, admin, "acme", kept, "", keptScope)
	seedSession(t, h, globex, admin, "globex", erased, erasedThr, goneScope)
	return h, acme, admin
}

func TestSessionErasureLeavesNoRowOfTheSession(t *testing.T) {
	t.Parallel()
	h, acme, admin := erasureHarness(t, func(cfg *gateway.Config) { cfg.Erasure.Batch = 7 })
	ctx := context.Background()
	tables := tenantTables(t, admin)

	// Every table holds rows of the erased session but those that never do.
	for _, tb := range tables {
		n := naming(t, admin, tb, "acme", erased, erasedThr)
		if why, ok := notTiedToASession[tb]; ok {
			if tb != "erasures" && tb != "audit_log" {
				require.Zero(t, n, "%s is said to hold no session's rows (%s), and holds %d", tb, why, n)
			}
			continue
		}
		require.Positive(t, n, "the test put no row of the session in %s: set one up, or say why the table holds none", tb)
	}
	keptBefore := digests(t, admin, tables, "acme", kept, afterSessionErasure)
	globexBefore := digests(t, admin, tables, "globex", "", afterSessionErasure)

	er, err := acme.DeleteSession(ctx, erased)
	require.NoError(t, err)
	require.Equal(t, "session", er.Kind)
	require.Equal(t, erased, er.Target)
	rows := map[string]int64{}
	for _, tb := range er.Tables {
		rows[tb.Table] = tb.Rows
	}
	require.Equal(t, int64(4), rows["proxy_paths"], "two paths of the session, two of its thread")
	require.Equal(t, int64(2), rows["sessions"], "the session and its thread")
	require.Positive(t, rows["messages"])
	require.Equal(t, int64(1), rows["memory_revisions:detached"])

	for _, tb := range tables {
		n := naming(t, admin, tb, "acme", erased, erasedThr)
		if _, ok := afterSessionErasure[tb]; ok {
			continue
		}
		require.Zero(t, n, "%s still holds %d rows of the erased session", tb, n)
	}
	require.Equal(t, keptBefore, digests(t, admin, tables, "acme", kept, afterSessionErasure), "the other session is untouched")
	require.Equal(t, globexBefore, digests(t, admin, tables, "globex", "", afterSessionErasure), "the other tenant is untouched")

	// The memory the session wrote is the scope's: it stays, and forgets the session.
	m, err := acme.GetMemory(ctx, goneScope, "learned")
	require.NoError(t, err)
	require.Contains(t, m.Markdown, goneBody)

	// The audit record: who, what, how many rows from which table; no content.
	log := erasureRecords(t, h, "acme")
	require.Len(t, log, 1)
	require.Equal(t, "key:"+store.KeyIDOf("key-acme"), log[0].Actor, "the key that asked")
	require.Equal(t, erasure.ActionEraseSession, log[0].Action)
	require.Equal(t, erased, log[0].Target)
	require.Contains(t, string(log[0].Detail), `"messages":`)
	require.NotContains(t, string(log[0].Detail), "build")
	require.Zero(t, naming(t, admin, "audit_log", "acme", goneBody, "run the build", "remember"))

	// Again: nothing of it is left.
	_, err = acme.DeleteSession(ctx, erased)
	require.True(t, client.IsNotFound(err), "%v", err)
	_, err = acme.DeleteSession(ctx, "never-was")
	require.True(t, client.IsNotFound(err), "%v", err)
}

func TestScopeErasureLeavesNoRowOfTheScope(t *testing.T) {
	t.Parallel()
	h, acme, admin := erasureHarness(t, func(cfg *gateway.Config) { cfg.Erasure.Batch = 3 })
	ctx := context.Background()
	tables := tenantTables(t, admin)
	for _, tb := range []string{"memories", "memory_revisions", "memory_indexes", "dreams", "dream_scopes", "run_leases",
		"recall_surfaced", "recall_prefetches", "memory_sections"} {
		require.Positive(t, naming(t, admin, tb, "acme", goneMarker), "the test put no row of the scope in %s", tb)
	}
	keptBefore := digests(t, admin, tables, "acme", "stay-9e", afterScopeErasure)
	globexBefore := digests(t, admin, tables, "globex", "", afterScopeErasure)

	er, err := acme.DeleteScope(ctx, goneScope)
	require.NoError(t, err)
	require.Equal(t, "scope", er.Kind)
	require.Positive(t, er.Rows)

	for _, tb := range tables {
		if _, ok := afterScopeErasure[tb]; ok {
			require.Zero(t, naming(t, admin, tb, "acme", goneBody), "%s holds the scope's memories' text", tb)
			continue
		}
		n := naming(t, admin, tb, "acme", goneMarker)
		require.Zero(t, n, "%s still holds %d rows of the erased scope", tb, n)
	}
	require.Equal(t, keptBefore, digests(t, admin, tables, "acme", "stay-9e", afterScopeErasure), "the other scope is untouched")
	require.Equal(t, globexBefore, digests(t, admin, tables, "globex", "", afterScopeErasure), "the other tenant is untouched")
	_, err = acme.GetMemory(ctx, keptScope, "learned")
	require.NoError(t, err)

	_, err = acme.DeleteScope(ctx, goneScope)
	require.True(t, client.IsNotFound(err), "%v", err)
	log := erasureRecords(t, h, "acme")
	require.Len(t, log, 2, "the erasure, and the second request that found nothing")
	require.Equal(t, erasure.ActionEraseScope, log[0].Action)
	require.Equal(t, goneScope, log[0].Target)
}

func TestErasureCutShortIsResumed(t *testing.T) {
	t.Parallel()
	var crash atomic.Bool
	crash.Store(true)
	h, _, admin := crashingHarness(t, &crash)
	ctx := context.Background()

	// The worker stops after its first batch: the request fails, the
	// erasure is recorded unfinished, and the session takes no turn.
	status, body := h.do(t, "DELETE", "/v1/sessions/"+erased, "key-acme", nil)
	require.Equal(t, http.StatusInternalServerError, status, body)
	var deleted string
	require.NoError(t, admin.QueryRow(ctx, `SELECT deleted::text FROM erasures WHERE tenant_id = 'acme' AND finished_at IS NULL`).Scan(&deleted))
	require.Regexp(t, `^\{"recall_prefetches": [1-5]\}$`, deleted, "the first batch is counted, and nothing after it ran")
	pending, err := h.store.SessionErasing(ctx, "acme", erased)
	require.NoError(t, err)
	require.True(t, pending)
	status, body = h.do(t, "POST", "/v1/turns", "key-acme", encode(t, event(erased, 4)))
	require.Equal(t, http.StatusConflict, status, body)
	require.Equal(t, "session_erasing", body["error"].(map[string]any)["code"])
	status, _ = h.do(t, "POST", "/v1/turns", "key-globex", encode(t, event(erased, 4)))
	require.Equal(t, http.StatusAccepted, status, "another tenant's session of the same id is not being erased")
	require.Positive(t, naming(t, admin, "messages", "acme", erased), "the first batch did not reach the messages")

	// The sweep finishes it, counting every row once.
	crash.Store(false)
	sweepUntilErased(t, h)
	requireErased(t, admin)
	log := erasureRecords(t, h, "acme")
	require.Len(t, log, 1)
	require.Contains(t, string(log[0].Detail), `"proxy_paths": 4`, "each batch's rows are counted once, across the crash")

	// Turns are taken again: they start a new session.
	status, body = h.do(t, "POST", "/v1/turns", "key-acme", encode(t, event(erased, 1)))
	require.Equal(t, http.StatusAccepted, status, body)
}

func TestConcurrentErasuresOfOneSessionAgree(t *testing.T) {
	t.Parallel()
	_, acme, admin := erasureHarness(t, func(cfg *gateway.Config) { cfg.Erasure.Batch = 2 })
	ctx := context.Background()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := acme.DeleteSession(ctx, erased)
			errs <- err
		}()
	}
	var ok int
	for range 2 {
		err := <-errs
		if err == nil {
			ok++
			continue
		}
		require.True(t, client.IsNotFound(err), "%v", err)
	}
	require.Positive(t, ok, "one request at least found the session")
	// Whether the two joined one erasure or the second came after the
	// first, every row was counted once.
	var sessions int64
	require.NoError(t, admin.QueryRow(ctx, `SELECT sum(coalesce((deleted ->> 'sessions')::bigint, 0)) FROM erasures WHERE tenant_id = 'acme'`).Scan(&sessions))
	require.Equal(t, int64(2), sessions)
	requireErased(t, admin)
}

// TestErasureOfASessionThatKeepsGrowing: rows written while the erasure
// runs go in its next pass; when every pass finds new ones, the request
// answers 503 and the erasure stays recorded for the sweep, which
// finishes it once they stop.
func TestErasureOfASessionThatKeepsGrowing(t *testing.T) {
	t.Parallel()
	var admin atomic.Pointer[pgxpool.Pool]
	var growing atomic.Bool
	growing.Store(true)
	h, _, pool := erasureHarness(t, func(cfg *gateway.Config) {
		cfg.Erasure.MaxPasses = 3
		cfg.Erasure.Lease = time.Millisecond
		cfg.Erasure.AfterBatch = func(step string, _ int64) error {
			if step == "active_sessions" && growing.Load() {
				// As the limiter does for a turn that arrives meanwhile.
				_, err := admin.Load().Exec(context.Background(),
					`INSERT INTO active_sessions (tenant_id, session_id, active_at) VALUES ('acme', $1, now())`, erased)
				return err
			}
			return nil
		}
	})
	admin.Store(pool)
	ctx := context.Background()

	status, body := h.do(t, "DELETE", "/v1/sessions/"+erased, "key-acme", nil)
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	pending, err := h.store.SessionErasing(ctx, "acme", erased)
	require.NoError(t, err)
	require.True(t, pending, "the erasure stays recorded")
	require.Equal(t, int64(1), naming(t, pool, "active_sessions", "acme", erased), "the row written during the last pass")

	growing.Store(false)
	sweepUntilErased(t, h)
	requireErased(t, pool)
	var rows int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT (deleted ->> 'active_sessions')::bigint FROM erasures WHERE tenant_id = 'acme'`).Scan(&rows))
	require.Equal(t, int64(4), rows, "the seeded row and the three written during the passes")
}

// erasureRecords are the tenant's audit records of erasures, oldest first
// (the log also holds its keys' making).
func erasureRecords(t *testing.T, h *harness, tenant string) []store.AuditRecord {
	t.Helper()
	all, err := h.store.AuditLog(context.Background(), tenant, 0, 1000)
	require.NoError(t, err)
	var out []store.AuditRecord
	for i := len(all) - 1; i >= 0; i-- {
		if strings.HasPrefix(all[i].Action, "erase") {
			out = append(out, all[i])
		}
	}
	return out
}

// TestTenantErasureLeavesNoRowOfTheTenant: a tenant's erasure, cut short
// after its first batch as by a crash and finished by the sweep, leaves no
// row of the tenant in any table the catalog lists (its audit records
// only, which hold no content), stops its keys first, and changes no row of
// another tenant.
func TestTenantErasureLeavesNoRowOfTheTenant(t *testing.T) {
	t.Parallel()
	var crash atomic.Bool
	h, _, admin := crashingHarness(t, &crash)
	ctx := context.Background()
	tables := tenantTables(t, admin)
	globexBefore := digests(t, admin, tables, "globex", "", nil)
	for _, tb := range tables {
		if _, leaves := notTiedToASession[tb]; !leaves {
			var n int64
			require.NoError(t, admin.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q WHERE tenant_id = 'acme'`, tb)).Scan(&n))
			require.Positive(t, n, "acme has rows in %s before its erasure", tb)
		}
	}

	crash.Store(true)
	_, err := h.gw.Eraser().EraseTenant(ctx, "acme", "operator")
	require.ErrorIs(t, err, errCrash)
	var deleted string
	require.NoError(t, admin.QueryRow(ctx, `SELECT deleted::text FROM erasures WHERE tenant_id = 'acme' AND kind = 'tenant' AND finished_at IS NULL`).Scan(&deleted))
	require.Regexp(t, `^\{"api_keys": 1\}$`, deleted, "the keys go first, and nothing after the first batch ran")
	require.Eventually(t, func() bool {
		status, _ := h.do(t, "GET", "/v1/sessions", "key-acme", nil)
		return status == http.StatusUnauthorized
	}, 5*time.Second, 50*time.Millisecond, "the tenant's key is refused once its erasure began")

	crash.Store(false)
	ctxRun, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.gw.RunErasures(ctxRun) }()
	require.Eventually(t, func() bool {
		var n int64
		return admin.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE tenant_id = 'acme'`).Scan(&n) == nil && n == 0
	}, 30*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	for _, tb := range tables {
		var n int64
		require.NoError(t, admin.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %q WHERE tenant_id = 'acme'`, tb)).Scan(&n))
		if tb == "audit_log" {
			require.Zero(t, naming(t, admin, tb, "acme", goneBody, "run the build", "build log line"), "the audit log holds no content")
			continue
		}
		require.Zero(t, n, "a row of acme is left in %s", tb)
	}
	require.Equal(t, globexBefore, digests(t, admin, tables, "globex", "", nil), "the other tenant is untouched")

	var action, actor, detail string
	require.NoError(t, admin.QueryRow(ctx, `SELECT action, actor, detail::text FROM audit_log WHERE tenant_id = 'acme' ORDER BY id DESC LIMIT 1`).Scan(&action, &actor, &detail))
	require.Equal(t, erasure.ActionEraseTenant, action)
	require.Equal(t, "operator", actor)
	require.Contains(t, detail, `"messages":`, "the record counts the rows, by table")

	_, err = h.gw.Eraser().EraseTenant(ctx, "acme", "operator")
	require.ErrorIs(t, err, store.ErrUnknownTenant, "erasing it again finds no tenant")
}

// errCrash is what a worker that stops after a batch fails with.
var errCrash = errors.New("the worker stopped")

// crashingHarness is the erasure harness with batches of 5, a short lease,
// and workers that stop after their first batch while crash is set.
func crashingHarness(t *testing.T, crash *atomic.Bool) (*harness, *client.Client, *pgxpool.Pool) {
	t.Helper()
	return erasureHarness(t, func(cfg *gateway.Config) {
		cfg.Erasure.Batch = 5
		cfg.Erasure.Lease = time.Millisecond
		cfg.Erasure.AfterBatch = func(string, int64) error {
			if crash.Load() {
				return errCrash
			}
			return nil
		}
	})
}
