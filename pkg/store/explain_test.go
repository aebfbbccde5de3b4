package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/pgtest"
)

// The tables that grow with every session: a query of them that has no
// index to use reads all of them, and costs more with every tenant's data.
var growingTables = []string{"messages", "turns", "memories"}

// namedQuery is one query of sql/queries, its parameters numbered as sqlc
// numbers them.
type namedQuery struct {
	name, file, sql string
	params          int
}

var (
	queryName = regexp.MustCompile(`(?m)^-- name: (\w+) :\w+\s*$`)
	// A parameter: sqlc.arg(x), sqlc.narg(x) or @x (not the @@ operator).
	queryParam = regexp.MustCompile(`sqlc\.n?arg\('?(\w+)'?\)|@(\w+)`)
)

// readQueries reads every named query under dir.
func readQueries(t *testing.T, dir string) []namedQuery {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []namedQuery
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		text := string(data)
		marks := queryName.FindAllStringSubmatchIndex(text, -1)
		for i, m := range marks {
			end := len(text)
			if i+1 < len(marks) {
				end = marks[i+1][0]
			}
			body := strings.TrimSpace(text[m[1]:end])
			body = strings.TrimSuffix(body, ";")
			numbers := map[string]int{}
			sql := queryParam.ReplaceAllStringFunc(body, func(p string) string {
				sub := queryParam.FindStringSubmatch(p)
				name := sub[1] + sub[2]
				if _, ok := numbers[name]; !ok {
					numbers[name] = len(numbers) + 1
				}
				return fmt.Sprintf("$%d", numbers[name])
			})
			out = append(out, namedQuery{name: text[m[2]:m[3]], file: filepath.Base(f), sql: sql, params: len(numbers)})
		}
	}
	return out
}

// names and seqScans match, for each growing table, a query naming it and
// a plan line reading it whole.
var names, seqScans = map[string]*regexp.Regexp{}, map[string]*regexp.Regexp{}

func init() {
	for _, table := range growingTables {
		names[table] = regexp.MustCompile(`(?i)\b(from|join|into|update)\s+` + table + `\b`)
		seqScans[table] = regexp.MustCompile(`Seq Scan on ` + table + `\b`)
	}
}

// touches reports the growing tables a query names.
func touches(sql string) []string {
	var out []string
	for _, table := range growingTables {
		if names[table].MatchString(sql) {
			out = append(out, table)
		}
	}
	return out
}

// TestHotQueriesUseTheirIndexes plans every query of sql/queries that reads
// or writes messages, turns or memories, with sequential scans priced out
// (enable_seqscan off) and the generic plan a prepared statement gets
// whatever its parameters: a sequential scan of one of them left in the
// plan means no index can serve the query.
func TestHotQueriesUseTheirIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.Admin(t, pgtest.New(t))
	conn, err := admin.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, set := range []string{"SET enable_seqscan = off", "SET plan_cache_mode = force_generic_plan"} {
		_, err := conn.Exec(ctx, set)
		require.NoError(t, err)
	}

	planned := 0
	for _, q := range readQueries(t, filepath.Join("..", "..", "sql", "queries")) {
		tables := touches(q.sql)
		if len(tables) == 0 {
			continue
		}
		_, err := conn.Exec(ctx, "PREPARE hot AS "+q.sql)
		require.NoError(t, err, "%s (%s): prepare", q.name, q.file)
		args := strings.TrimSuffix(strings.Repeat("NULL,", q.params), ",")
		explain := "EXPLAIN EXECUTE hot"
		if args != "" {
			explain += "(" + args + ")"
		}
		rows, err := conn.Query(ctx, explain)
		require.NoError(t, err, "%s: explain", q.name)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(t, rows.Err())
		_, err = conn.Exec(ctx, "DEALLOCATE hot")
		require.NoError(t, err)
		planned++

		for _, table := range tables {
			scan := slices.ContainsFunc(plan, seqScans[table].MatchString)
			require.False(t, scan, "%s (%s) reads %s whole:\n%s\n%s", q.name, q.file, table, q.sql, strings.Join(plan, "\n"))
		}
	}
	require.Greater(t, planned, 20, "the hot queries were found and planned")
}
