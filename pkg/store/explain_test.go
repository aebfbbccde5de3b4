package store_test

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// bigTables are the tables that grow with every session: a statement that
// reads them must find its rows by an index.
var bigTables = []string{"messages", "turns", "memories", "message_terms", "memory_terms"}

// query is one statement sqlc generated, with its name.
type query struct{ name, sql string }

// queries reads every statement sqlc generated (internal/dbsqlc): the
// string constants that begin with its "-- name:" line, as the services
// send them.
func queries(t *testing.T) []query {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("internal", "dbsqlc", "*.sql.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	named := regexp.MustCompile(`^-- name: (\w+) :\w+`)
	var out []query
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if m := named.FindStringSubmatch(s); m != nil {
				out = append(out, query{name: m[1], sql: s})
			}
			return true
		})
	}
	return out
}

// wholeScans are the reads of a big table a plan (EXPLAIN's JSON) makes
// without narrowing them past the tenant: a sequential scan, or an index
// scan whose condition is the tenant alone (row-level security adds
// tenant_id = ... to every statement, and every index leads with it).
func wholeScans(plan any) []string {
	var found []string
	planNodes(plan, func(x map[string]any) {
		rel, _ := x["Relation Name"].(string)
		index, _ := x["Index Name"].(string)
		big := slices.Contains(bigTables, rel) || slices.ContainsFunc(bigTables, func(t string) bool { return strings.HasPrefix(index, t+"_") })
		switch {
		case x["Node Type"] == "Seq Scan" && big:
			found = append(found, rel+": sequential scan")
		case index != "" && big && tenantOnly(x["Index Cond"]):
			found = append(found, index+": the tenant alone")
		}
	})
	return found
}

// planNodes calls visit with every object of a plan (EXPLAIN's JSON
// decoded), its nodes among them.
func planNodes(plan any, visit func(map[string]any)) {
	switch x := plan.(type) {
	case map[string]any:
		visit(x)
		for _, e := range x {
			planNodes(e, visit)
		}
	case []any:
		for _, e := range x {
			planNodes(e, visit)
		}
	}
}

// tenantOnly reports whether an index condition constrains nothing but the
// tenant (or nothing at all).
func tenantOnly(cond any) bool {
	c, _ := cond.(string)
	for part := range strings.SplitSeq(strings.Trim(c, "()"), " AND ") {
		if strings.TrimSpace(part) != "" && !strings.Contains(part, "tenant_id") {
			return false
		}
	}
	return true
}

// TestHotQueriesUseTheirIndexes: every statement the services run on
// messages, turns or memories finds its rows by an index that narrows them
// past the tenant, planned as the services' role under row-level security,
// on tables with rows and statistics (fill). Each is prepared and explained
// as the generic plan a prepared statement gets (its parameters unknown),
// with sequential scans priced out: a plan that still scans a big table has
// no index it could use, and one that scans an index by the tenant alone
// reads the whole tenant.
func TestHotQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	fill(t, pgtest.AdminURL(t, url))
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; SELECT set_config('mnemos.tenant_id', 'acme', false)`)
	require.NoError(t, err)

	// The check itself: a read of a session's messages by a column no index
	// leads with is caught, and so is one of the whole tenant.
	qs := queries(t)
	require.Greater(t, len(qs), 100, "the generated statements were found")
	controls := []query{
		{name: "ControlByStopReason", sql: "SELECT count(*) FROM messages WHERE stop_reason = $1"},
		{name: "ControlWholeTenant", sql: "SELECT count(*) FROM messages WHERE seq > $1"},
	}
	for _, q := range controls {
		require.NotEmpty(t, wholeScans(explain(t, conn, q)), "%s is caught", q.name)
	}
	checked := 0
	for _, q := range qs {
		if !namesBigTable.MatchString(q.sql) {
			continue
		}
		checked++
		assert.Empty(t, wholeScans(explain(t, conn, q)), "%s reads a big table whole: give it an index, or write it so that one serves it", q.name)
	}
	require.Greater(t, checked, 30, "the statements on the big tables were checked")
}

// batchStatements are the statements a batch of turns reads and updates by
// (services/tokenaccounting's readBatch and writeBatch), which its
// transaction runs on their generic plans (InTxWaiting).
var batchStatements = []string{"SessionsLockFree", "MessageHashesOfSessions", "ReplacementsForSessions", "SessionEstimatePrior", "SessionUpdateAccounting"}

// TestBatchPlansAreIndexLookups: the generic plans of a batch's statements,
// as the planner makes them with nothing priced out, find their rows by
// index: for arrays of unknown length it assumes ten elements, and a lookup
// each beats reading a tenant's sessions. The tables hold a tenant of 20,000
// sessions with their offload decisions, where a sequential scan would cost
// hundreds of times a lookup.
func TestBatchPlansAreIndexLookups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	admin := pgtest.AdminURL(t, url)
	fill(t, admin)
	a, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	_, err = a.Exec(ctx, `
		INSERT INTO sessions (tenant_id, session_id) SELECT 'acme', 'many' || s FROM generate_series(1, 20000) s;
		INSERT INTO content_replacements (tenant_id, session_id, tool_use_id, kind, replacement)
			SELECT 'acme', 'many' || s, 'toolu_' || s || '_' || n, 'offload', 'a preview'
			FROM generate_series(1, 20000) s, generate_series(1, 3) n;
		ANALYZE`)
	a.Close(ctx)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan; SELECT set_config('mnemos.tenant_id', 'acme', false)`)
	require.NoError(t, err)

	seqScans := func(q query) []string {
		var scans []string
		planNodes(explain(t, conn, q), func(x map[string]any) {
			if x["Node Type"] == "Seq Scan" {
				scans = append(scans, x["Relation Name"].(string))
			}
		})
		return scans
	}
	// The check itself: a read of the sessions by a column no index has is caught.
	require.Equal(t, []string{"sessions"}, seqScans(query{name: "ControlByAgent", sql: "SELECT count(*) FROM sessions WHERE agent_id = $1"}))
	byName := map[string]query{}
	for _, q := range queries(t) {
		byName[q.name] = q
	}
	for _, name := range batchStatements {
		q, ok := byName[name]
		require.True(t, ok, "%s is a generated statement", name)
		assert.Empty(t, seqScans(q), "%s's generic plan reads these tables whole", name)
	}
}

// fill gives the big tables rows and statistics, as the administrator: two
// tenants of 100 sessions, each of 100 messages and 50 turns, and 1,000
// memories in 20 scopes. On empty tables every index costs the same and the
// planner's choice among them tells nothing.
func fill(t *testing.T, adminURL string) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `
		INSERT INTO tenants (tenant_id, name) VALUES ('acme', 'Acme'), ('other', 'Other') ON CONFLICT DO NOTHING;
		INSERT INTO sessions (tenant_id, session_id)
			SELECT t, 's' || s FROM unnest(ARRAY['acme', 'other']) t, generate_series(1, 100) s;
		INSERT INTO messages (tenant_id, session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, bytes_through)
			SELECT t, 's' || s, 'm' || s || '-' || p, p, p / 2 + 1, CASE WHEN p % 2 = 0 THEN 'user' ELSE 'assistant' END,
			       '[{"type": "text", "text": "a message of the session"}]', '\x00', 6, (p + 1) * 60
			FROM unnest(ARRAY['acme', 'other']) t, generate_series(1, 100) s, generate_series(0, 99) p;
		INSERT INTO turns (tenant_id, session_id, event_id, seq, status)
			SELECT t, 's' || s, 'e' || s || '-' || q, q, 'applied'
			FROM unnest(ARRAY['acme', 'other']) t, generate_series(1, 100) s, generate_series(1, 50) q;
		INSERT INTO memories (tenant_id, scope, name, revision, type, description, body, created_at, updated_at)
			SELECT t, 'project:p' || (n % 20), 'memory-' || n, 1, 'project', 'a memory', 'what it says', now(), now()
			FROM unnest(ARRAY['acme', 'other']) t, generate_series(1, 500) n;
		ANALYZE`)
	require.NoError(t, err)
}

// explain is q's generic plan, as EXPLAIN's JSON decoded.
func explain(t *testing.T, conn *pgx.Conn, q query) any {
	t.Helper()
	ctx := context.Background()
	desc, err := conn.Prepare(ctx, q.name, q.sql)
	require.NoError(t, err, q.name)
	stmt := "EXPLAIN (FORMAT JSON) EXECUTE " + pgx.Identifier{q.name}.Sanitize()
	if n := len(desc.ParamOIDs); n > 0 {
		stmt += "(" + strings.TrimSuffix(strings.Repeat("NULL,", n), ",") + ")"
	}
	var raw []byte
	require.NoError(t, conn.QueryRow(ctx, stmt).Scan(&raw), q.name)
	var plan any
	require.NoError(t, json.Unmarshal(raw, &plan))
	return plan
}

// namesBigTable matches a statement that names one of bigTables.
var namesBigTable = regexp.MustCompile(`\b(` + strings.Join(bigTables, "|") + `)\b`)

// TestTheSessionsGaugeCountsFromAnIndexAlone: the grouped count behind the
// sessions gauge, planned as the function that runs it runs (its owner,
// under row-level security, whose policies need each row's tenant), reads
// an index that holds both the state and the tenant, not the table.
func TestTheSessionsGaugeCountsFromAnIndexAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	fill(t, pgtest.AdminURL(t, url))
	conn, err := pgx.Connect(ctx, pgtest.OwnerURL(t, url))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	var body string
	require.NoError(t, conn.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE proname = 'mnemos_sessions_by_state'`).Scan(&body))
	_, err = conn.Exec(ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	var nodes []string
	planNodes(explain(t, conn, query{name: "SessionsByStateBody", sql: body}), func(x map[string]any) {
		if x["Relation Name"] == "sessions" {
			nodes = append(nodes, x["Node Type"].(string))
		}
	})
	require.Equal(t, []string{"Index Only Scan"}, nodes, "the count of sessions by state reads the table")
}

// TestTheRelaysFunctionsReadTheOutboxByItsKey: the relay's claim and delete
// find their rows by the outbox's key however the table looked when their
// plans were made. They run in PL/pgSQL, which plans a statement once per
// connection, and the relay keeps the outbox empty, so statistics show it
// empty: planned then, both read it whole, and between two vacuums it holds
// every row the relay has deleted (a sequential scan of it took a fifth of
// Postgres's CPU in the sustained ingest of `mnemos bench`,
// docs/performance.md). Here the plans are made on the empty, analyzed
// table, and then used on one of 3,000 rows.
func TestTheRelaysFunctionsReadTheOutboxByItsKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	admin, err := pgx.Connect(ctx, pgtest.AdminURL(t, url))
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(ctx) })
	// The check itself: a function with the claim's body but none of its
	// settings, planned the same way, is caught reading the table whole.
	_, err = admin.Exec(ctx, `
		CREATE FUNCTION control_claim(max_rows integer) RETURNS SETOF outbox
		LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = public, pg_temp AS $$
		BEGIN
			RETURN QUERY SELECT * FROM outbox ORDER BY id LIMIT max_rows FOR UPDATE SKIP LOCKED;
		END
		$$;
		GRANT EXECUTE ON FUNCTION control_claim(integer) TO `+pgx.Identifier{store.AppRole}.Sanitize())
	require.NoError(t, err)
	_, err = admin.Exec(ctx, `VACUUM (ANALYZE) outbox`)
	require.NoError(t, err)
	// The plans are kept from here on: an autovacuum's analyze of the rows
	// inserted below would have them made again on new statistics, and
	// the control would then read the key too.
	_, err = admin.Exec(ctx, `ALTER TABLE outbox SET (autovacuum_enabled = false)`)
	require.NoError(t, err)

	relay, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { relay.Close(ctx) })
	calls := []string{
		`SELECT count(*) FROM mnemos_outbox_claim(100)`,
		`SELECT count(*) FROM (SELECT mnemos_outbox_delete(ARRAY[1, 2, 3]::bigint[])) d`,
		`SELECT count(*) FROM control_claim(100)`,
	}
	for range 10 { // past the five custom plans, to the one kept
		for _, c := range calls {
			var n int
			require.NoError(t, relay.QueryRow(ctx, c).Scan(&n), c)
		}
	}
	_, err = admin.Exec(ctx, `INSERT INTO outbox (tenant_id, subject, msg_id, payload)
		SELECT 'acme', 'mnemos.turn.accounted', 'm' || n, '\x00' FROM generate_series(1, 3000) n`)
	require.NoError(t, err)

	scans := func(call string) (seq, idx int64) {
		t.Helper()
		tx, err := relay.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		// The view counts what this connection has not yet reported, the
		// earlier calls too: the call's scans are the difference.
		count := `SELECT seq_scan, coalesce(idx_scan, 0) FROM pg_stat_xact_user_tables WHERE relname = 'outbox'`
		var seq0, idx0 int64
		require.NoError(t, tx.QueryRow(ctx, count).Scan(&seq0, &idx0))
		var n int
		require.NoError(t, tx.QueryRow(ctx, call).Scan(&n), call)
		require.NoError(t, tx.QueryRow(ctx, count).Scan(&seq, &idx))
		return seq - seq0, idx - idx0
	}
	seq, _ := scans(calls[2])
	require.Equal(t, int64(1), seq, "the control's plan reads the outbox whole")
	for _, c := range calls[:2] {
		seq, idx := scans(c)
		assert.Zero(t, seq, "%s reads the outbox whole", c)
		assert.Positive(t, idx, "%s reads the outbox's key", c)
	}
}

// TestMessageSearchesMatchRowByRowAndInsertsKeepNoTextIndex: the
// generated searches (MessageSearch, MessageSearchSession), planned as the
// services' role under row-level security, match each row by
// message_search(content), whose body Postgres inlines, so no SQL function
// is set up for it. Row-level security keeps the match, which is not
// leakproof, out of any index's condition, so a text-search index on
// messages would only cost every insert: no index of messages is on an
// expression. A function Postgres cannot inline (a FROM clause, as
// message_text has) shows in the plan as a call: the check catches it.
func TestMessageSearchesMatchRowByRowAndInsertsKeepNoTextIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	adminURL := pgtest.AdminURL(t, url)
	fill(t, adminURL)
	admin, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(ctx) })
	rows, _ := admin.Query(ctx, `SELECT indexrelid::regclass::text FROM pg_index
		WHERE indrelid = 'messages'::regclass AND (indexprs IS NOT NULL OR indpred IS NOT NULL)`)
	exprIndexes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Empty(t, exprIndexes, "an index on messages' expressions: every insert evaluates it")
	_, err = admin.Exec(ctx, `
		CREATE FUNCTION control_search(content jsonb) RETURNS tsvector
		LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
			SELECT to_tsvector('simple', coalesce(string_agg(t #>> '{}', ' '), ''))
			FROM jsonb_path_query(content, 'strict $[*] ? (@.type == "text").text') AS t
		$$;
		GRANT EXECUTE ON FUNCTION control_search(jsonb) TO `+pgx.Identifier{store.AppRole}.Sanitize()+`;
		UPDATE messages SET content = '[{"type": "text", "text": "a needle"}, {"type": "tool_result", "content": "a pin"}]'
			WHERE tenant_id = 'acme' AND position = 7 AND session_id = 's1';
		ANALYZE messages`)
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan; SELECT set_config('mnemos.tenant_id', 'acme', false)`)
	require.NoError(t, err)
	// match is the condition a statement's plan matches its rows' text by.
	match := func(q query) string {
		t.Helper()
		var m string
		planNodes(explain(t, conn, q), func(x map[string]any) {
			if f, ok := x["Filter"].(string); ok && strings.Contains(f, "@@") {
				m = f
			}
		})
		require.NotEmpty(t, m, "%s matches no text", q.name)
		return m
	}
	// The check itself: a call that is not inlined stands in the plan.
	control := query{name: "ControlSearch", sql: "SELECT position FROM messages WHERE session_id = $1 AND control_search(content) @@ websearch_to_tsquery('simple', $2)"}
	require.Contains(t, match(control), "control_search(")
	searches := 0
	for _, q := range queries(t) {
		if q.name != "MessageSearch" && q.name != "MessageSearchSession" {
			continue
		}
		searches++
		m := match(q)
		assert.NotContains(t, m, "message_search(", "%s calls a function each search sets up", q.name)
		assert.Contains(t, m, "jsonb_path_query_array", "%s: the function's body stands in the plan", q.name)
	}
	require.Equal(t, 2, searches, "both searches were found")

	// What a session's search finds, through the store: the text blocks,
	// not the tool results.
	st, err := store.Open(ctx, store.Config{URL: url})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	found := func(words string) (n int) {
		t.Helper()
		require.NoError(t, st.InTx(ctx, "acme", func(tx *store.Tx) error {
			hits, err := tx.SearchSessionMessages(ctx, "s1", words, "", 200)
			n = len(hits)
			return err
		}))
		return n
	}
	assert.Equal(t, 1, found("needle"))
	assert.Equal(t, 99, found("session"))
	assert.Zero(t, found("pin"), "a tool result is not searched")
}
