package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// TestSearchReadsItsInvertedIndexesUnderRowLevelSecurity: the ranked
// search's reads (SearchPostings, then SearchCheck of what it ranked),
// planned for a query's values as the services' role under row-level
// security on tables with rows and statistics, nothing priced out, find
// its words' postings through the primary keys of message_terms and
// memory_terms by tenant and lexeme, the documents by their keys, and
// read no big table whole. The control shows why the postings are a
// table: a text-search index on the same words, which Postgres cannot use
// while the policy applies (the match is not leakproof).
func TestSearchReadsItsInvertedIndexesUnderRowLevelSecurity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	adminURL := pgtest.AdminURL(t, url)
	fill(t, adminURL)
	admin, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(ctx) })
	_, err = admin.Exec(ctx, `
		UPDATE sessions SET memory_scope = '{"project": "p1"}', message_count = 100 WHERE session_id IN ('s1', 's2', 's3');
		UPDATE messages SET content = '[{"type": "text", "text": "the needle in the haystack"}]'
			WHERE session_id = 's2' AND position = 7;
		CREATE INDEX control_message_words ON messages USING gin (message_vector(content));
		ANALYZE`)
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	_, err = conn.Exec(ctx, `SELECT set_config('mnemos.tenant_id', 'acme', false)`)
	require.NoError(t, err)
	plan := func(sql string, args ...any) any {
		t.Helper()
		var raw []byte
		require.NoError(t, conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw))
		var p any
		require.NoError(t, json.Unmarshal(raw, &p))
		return p
	}
	// indexConds lists "index: condition" of every index a plan reads.
	indexConds := func(p any) []string {
		var out []string
		planNodes(p, func(x map[string]any) {
			if index, ok := x["Index Name"].(string); ok {
				cond, _ := x["Index Cond"].(string)
				out = append(out, index+": "+cond)
			}
		})
		return out
	}

	// The control: with sequential scans priced out, the administrator,
	// whom no policy binds, matches by the GIN index; the services' role
	// still reads the tenant's rows one by one.
	const match = `SELECT position FROM messages WHERE message_vector(content) @@ to_tsquery('english', 'needle')`
	_, err = admin.Exec(ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	var raw []byte
	require.NoError(t, admin.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+match).Scan(&raw))
	require.Contains(t, string(raw), "control_message_words", "without a policy the index serves")
	_, err = conn.Exec(ctx, `SET enable_seqscan = off`)
	require.NoError(t, err)
	control := indexConds(plan(match))
	assert.NotContains(t, strings.Join(control, "\n"), "control_message_words", "the policy keeps the match out of the index")
	_, err = conn.Exec(ctx, `RESET enable_seqscan`)
	require.NoError(t, err)

	sqls := map[string]string{}
	for _, q := range queries(t) {
		sqls[q.name] = q.sql
	}
	require.NotEmpty(t, sqls["SearchPostings"])
	require.NotEmpty(t, sqls["SearchCheck"])
	p := plan(sqls["SearchPostings"], []byte(`{"project": "p1"}`), "", true, "acme", []string{"needl", "session"}, "project:p1", true, 1000)
	assert.Empty(t, wholeScans(p))
	conds := strings.Join(indexConds(p), "\n")
	assert.Regexp(t, `message_terms_pkey: .*lexeme = `, conds)
	assert.Regexp(t, `memory_terms_pkey: .*lexeme = `, conds)
	assert.NotContains(t, conds, "control_message_words")
	p = plan(sqls["SearchCheck"], []string{"s2", ""}, []int64{7, 0}, []string{"", "a-memory"}, "acme", "project:p1", 10, "'needle'")
	assert.Empty(t, wholeScans(p))
	conds = strings.Join(indexConds(p), "\n")
	assert.Regexp(t, `messages_\S+: .*session_id = u.session_id.*position"? = u.`, conds)
	assert.Regexp(t, `memories_.*name = `, conds)
	assert.NotContains(t, conds, "control_message_words")
}
