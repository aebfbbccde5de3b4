package retain_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/retain"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

const day = 24 * time.Hour

// env is a database with tenants, their retention settings, and a clock.
type env struct {
	st      *store.Store
	admin   *pgxpool.Pool
	now     time.Time
	metrics *telemetrytest.Reader
}

// setup creates the tenants, each with its settings document ("" for none).
func setup(t *testing.T, tenants map[string]string) *env {
	t.Helper()
	st := pgtest.New(t)
	ctx := context.Background()
	for tenant, doc := range tenants {
		require.NoError(t, st.EnsureTenant(ctx, tenant, tenant))
		if doc != "" {
			require.NoError(t, st.SetTenantSettings(ctx, tenant, []byte(doc)))
		}
	}
	return &env{st: st, admin: pgtest.Admin(t, st), now: time.Now().Truncate(time.Millisecond), metrics: telemetrytest.New(t)}
}

// sweeper is a sweeper of its own (its own settings cache), on e's clock.
func (e *env) sweeper(t *testing.T, batch int) *retain.Sweeper {
	t.Helper()
	s, _ := e.sweeperWith(t, erasure.Config{Batch: batch})
	return s
}

// sweeperWith is sweeper with its eraser configured by ecfg, and the
// eraser, which tells the sweeper of the erasures it finishes as the
// gateway's does.
func (e *env) sweeperWith(t *testing.T, ecfg erasure.Config) (*retain.Sweeper, *erasure.Eraser) {
	t.Helper()
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), e.st.TenantSettings, time.Minute)
	require.NoError(t, err)
	log := bustest.Logger(t)
	var s *retain.Sweeper
	ecfg.Finished = func(ctx context.Context, er store.Erasure) { s.Finished(ctx, er) }
	eraser := erasure.New(ecfg, e.st, nil, log)
	s, err = retain.New(retain.Config{Batch: ecfg.Batch, Now: func() time.Time { return e.now }}, e.st, settings, eraser, log, e.metrics.Meter())
	require.NoError(t, err)
	return s, eraser
}

func (e *env) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := e.admin.Exec(context.Background(), sql, args...)
	require.NoError(t, err, sql)
}

func (e *env) count(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, e.admin.QueryRow(context.Background(), sql, args...).Scan(&n), sql)
	return n
}

func (e *env) session(t *testing.T, tenant, id string, created, updated time.Time) {
	t.Helper()
	e.exec(t, `INSERT INTO sessions (tenant_id, session_id, created_at, updated_at) VALUES ($1, $2, $3, $4)`, tenant, id, created, updated)
	e.exec(t, `INSERT INTO messages (tenant_id, session_id, uuid, position, seq, role, content, content_hash, estimate_tokens, bytes_through)
		VALUES ($1, $2, $2 || '-m1', 0, 1, 'user', '[]', '\x00', 1, 2)`, tenant, id)
}

func (e *env) toolResult(t *testing.T, tenant, session, id string, created time.Time) {
	t.Helper()
	e.exec(t, `INSERT INTO tool_results (tenant_id, id, session_id, message_uuid, tool_use_id, content, size_chars, created_at)
		VALUES ($1, $2, $3, $3 || '-m1', $2, 'whole output', 12, $4)`, tenant, id, session, created)
}

// memory writes a memory with one revision written at each of revs, the
// last the live one.
func (e *env) memory(t *testing.T, tenant, name string, revs ...time.Time) {
	t.Helper()
	last := revs[len(revs)-1]
	e.exec(t, `INSERT INTO memories (tenant_id, scope, name, revision, type, description, body, created_at, updated_at)
		VALUES ($1, 'project:x', $2, $3, 'project', 'd', 'b', $4, $5)`, tenant, name, len(revs), revs[0], last)
	for i, at := range revs {
		e.exec(t, `INSERT INTO memory_revisions (tenant_id, scope, name, revision, op, actor, type, description, body, created_at)
			VALUES ($1, 'project:x', $2, $3::bigint, CASE WHEN $3::bigint = 1 THEN 'created' ELSE 'updated' END, 'api', 'project', 'd', 'b', $4)`, tenant, name, i+1, at)
	}
}

// column reads the one column of what sql selects.
func column[T any](t *testing.T, e *env, sql string, args ...any) []T {
	t.Helper()
	rows, err := e.admin.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	require.NoError(t, err, sql)
	return out
}

func (e *env) revisions(t *testing.T, tenant, name string) []int64 {
	t.Helper()
	return column[int64](t, e, `SELECT revision FROM memory_revisions WHERE tenant_id = $1 AND name = $2 ORDER BY 1`, tenant, name)
}

func TestToolResultsExpire(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string]string{"acme": `{"retention": {"tool_results_days": 30}}`, "globex": ""})
	for _, tenant := range []string{"acme", "globex"} {
		e.session(t, tenant, "s1", e.now.Add(-200*day), e.now)
		for i := range 5 {
			e.toolResult(t, tenant, "s1", fmt.Sprintf("old-%d", i), e.now.Add(-30*day-time.Minute-time.Duration(i)*time.Hour))
		}
		e.toolResult(t, tenant, "s1", "just-under", e.now.Add(-30*day+time.Minute))
		e.toolResult(t, tenant, "s1", "new", e.now.Add(-day))
	}
	res, err := e.sweeper(t, 2).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, map[string]int64{retain.KindToolResults: 5}, res.Deleted, "five old ones, in batches of two")
	require.Equal(t, 1, res.Tenants)
	require.Zero(t, res.Failed)
	require.EqualValues(t, 5, e.metrics.Sum("mnemos.retention.deleted", "kind", retain.KindToolResults))
	count, _ := e.metrics.Histogram("mnemos.retention.sweep.duration", "", "")
	require.EqualValues(t, 1, count)

	require.EqualValues(t, 2, e.count(t, `SELECT count(*) FROM tool_results WHERE tenant_id = 'acme' AND id IN ('just-under', 'new')`))
	require.EqualValues(t, 2, e.count(t, `SELECT count(*) FROM tool_results WHERE tenant_id = 'acme'`))
	require.EqualValues(t, 7, e.count(t, `SELECT count(*) FROM tool_results WHERE tenant_id = 'globex'`), "retention off: untouched")
	require.EqualValues(t, 2, e.count(t, `SELECT count(*) FROM sessions`), "the sessions stay")

	res, err = e.sweeper(t, 2).Sweep(context.Background())
	require.NoError(t, err)
	require.Empty(t, res.Deleted, "nothing more is due")
}

func TestMemoryRevisionsExpire(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string]string{
		"acme":    `{"retention": {"memory_revisions_days": 30, "memory_revisions_keep": 2}}`,
		"initech": `{"retention": {"memory_revisions_days": 30}}`,
		"globex":  "",
	})
	old, under, recent := e.now.Add(-100*day), e.now.Add(-30*day+time.Minute), e.now.Add(-day)
	for _, tenant := range []string{"acme", "initech", "globex"} {
		e.memory(t, tenant, "six-old", old, old, old, old, old, old)
		e.memory(t, tenant, "mixed", old, under, old.Add(day), recent)
		e.memory(t, tenant, "one-old", old)
	}
	res, err := e.sweeper(t, 3).Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Failed)

	// acme keeps the last two of each memory and what is under 30 days.
	require.Equal(t, []int64{5, 6}, e.revisions(t, "acme", "six-old"))
	require.Equal(t, []int64{2, 3, 4}, e.revisions(t, "acme", "mixed"), "1 is old and beyond the last two; 2 is just under the age")
	require.Equal(t, []int64{1}, e.revisions(t, "acme", "one-old"), "the live revision stays")
	// initech keeps none but the live one and what is under 30 days.
	require.Equal(t, []int64{6}, e.revisions(t, "initech", "six-old"))
	require.Equal(t, []int64{2, 4}, e.revisions(t, "initech", "mixed"))
	require.Equal(t, []int64{1}, e.revisions(t, "initech", "one-old"))
	// globex has retention off.
	require.EqualValues(t, 11, e.count(t, `SELECT count(*) FROM memory_revisions WHERE tenant_id = 'globex'`))

	require.Equal(t, map[string]int64{retain.KindMemoryRevisions: 4 + 1 + 5 + 2}, res.Deleted)
	require.EqualValues(t, 12, e.metrics.Sum("mnemos.retention.deleted", "kind", retain.KindMemoryRevisions))
	require.EqualValues(t, 9, e.count(t, `SELECT count(*) FROM memories`), "the memories stay")
}

func TestIdleSessionsAreErased(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string]string{"acme": `{"retention": {"sessions_idle_days": 7}}`, "globex": ""})
	created := e.now.Add(-60 * day)
	for _, tenant := range []string{"acme", "globex"} {
		e.session(t, tenant, "idle", created, e.now.Add(-8*day))
		e.toolResult(t, tenant, "idle", "idle-tr", created)
		e.session(t, tenant, "just-under", created, e.now.Add(-7*day+time.Minute))
		e.session(t, tenant, "active", created, e.now.Add(-time.Hour))
		e.session(t, tenant, "young", e.now.Add(-time.Hour), e.now.Add(-time.Hour))
	}
	// A proxied client session whose one thread is still active stays,
	// its idle main thread with it; one whose threads are all idle goes
	// whole.
	e.session(t, "acme", "client-busy", created, e.now.Add(-30*day))
	e.session(t, "acme", "thr-busy", created, e.now.Add(-time.Hour))
	e.session(t, "acme", "client-idle", created, e.now.Add(-30*day))
	e.session(t, "acme", "thr-idle", created, e.now.Add(-30*day))
	e.exec(t, `INSERT INTO proxy_threads (tenant_id, session_id, thread_id, agent_id, kind) VALUES
		('acme', 'client-busy', 'client-busy', 'main', 'main'), ('acme', 'client-busy', 'thr-busy', 'a1', 'agent'),
		('acme', 'client-idle', 'client-idle', 'main', 'main'), ('acme', 'client-idle', 'thr-idle', 'a1', 'agent')`)

	res, err := e.sweeper(t, 1000).Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Failed)
	require.Equal(t, map[string]int64{retain.KindSessions: 2}, res.Deleted)

	left := func(tenant string) []string {
		return column[string](t, e, `SELECT session_id FROM sessions WHERE tenant_id = $1 ORDER BY 1`, tenant)
	}
	require.Equal(t, []string{"active", "client-busy", "just-under", "thr-busy", "young"}, left("acme"))
	require.Equal(t, []string{"active", "idle", "just-under", "young"}, left("globex"), "retention off: untouched")
	require.Zero(t, e.count(t, `SELECT count(*) FROM messages WHERE tenant_id = 'acme' AND session_id IN ('idle', 'client-idle', 'thr-idle')`))
	require.Zero(t, e.count(t, `SELECT count(*) FROM tool_results WHERE tenant_id = 'acme'`))
	require.EqualValues(t, 1, e.count(t, `SELECT count(*) FROM tool_results WHERE tenant_id = 'globex'`))

	// Each erasure is audited as retention's, with what it removed.
	var actor, action string
	var rows int64
	require.NoError(t, e.admin.QueryRow(context.Background(), `SELECT actor, action, (detail->>'rows')::bigint FROM audit_log WHERE tenant_id = 'acme' AND target = 'idle'`).Scan(&actor, &action, &rows))
	require.Equal(t, retain.Actor, actor)
	require.Equal(t, erasure.ActionEraseSession, action)
	require.EqualValues(t, 3, rows, "the session, its message and its tool result")
	require.EqualValues(t, 2, e.count(t, `SELECT count(*) FROM audit_log WHERE tenant_id = 'acme' AND actor = 'retention'`))
	require.EqualValues(t, 2, e.count(t, `SELECT count(*) FROM erasures WHERE tenant_id = 'acme' AND actor = 'retention' AND finished_at IS NOT NULL`))
	require.Zero(t, e.count(t, `SELECT count(*) FROM audit_log WHERE tenant_id = 'globex'`))
}

// TestTwoSweepersAtOnce: sweepers of two processes running at once delete
// everything due exactly once between them, count it once, and finish.
func TestTwoSweepersAtOnce(t *testing.T) {
	t.Parallel()
	doc := `{"retention": {"tool_results_days": 1, "sessions_idle_days": 1, "memory_revisions_days": 1}}`
	tenants := map[string]string{}
	for i := range 4 {
		tenants[fmt.Sprintf("t%d", i)] = doc
	}
	e := setup(t, tenants)
	old := e.now.Add(-10 * day)
	for tenant := range tenants {
		e.session(t, tenant, "live", old, e.now)
		for i := range 300 {
			e.toolResult(t, tenant, "live", fmt.Sprintf("tr-%d", i), old)
		}
		for i := range 3 {
			e.session(t, tenant, fmt.Sprintf("idle-%d", i), old, old)
		}
		e.memory(t, tenant, "m", old, old, old, old, old)
	}
	a, b := e.sweeper(t, 50), e.sweeper(t, 50)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	results := make([]retain.Result, 4)
	for i := range results {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			var err error
			results[i], err = s.Sweep(ctx)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	require.NoError(t, ctx.Err(), "no sweeper waited on another")
	total := map[string]int64{}
	for _, r := range results {
		require.Zero(t, r.Failed)
		for k, n := range r.Deleted {
			total[k] += n
		}
	}
	// Whatever one sweep passed by (another held the tenant), a later one does.
	res, err := a.Sweep(context.Background())
	require.NoError(t, err)
	for k, n := range res.Deleted {
		total[k] += n
	}
	require.Equal(t, map[string]int64{retain.KindToolResults: 4 * 300, retain.KindSessions: 4 * 3, retain.KindMemoryRevisions: 4 * 4}, total)
	require.EqualValues(t, 4*300, e.metrics.Sum("mnemos.retention.deleted", "kind", retain.KindToolResults))
	require.EqualValues(t, 4*3, e.metrics.Sum("mnemos.retention.deleted", "kind", retain.KindSessions))
	require.EqualValues(t, 4*3, e.count(t, `SELECT count(*) FROM audit_log WHERE actor = 'retention'`), "one audit record a session")
	require.Zero(t, e.count(t, `SELECT count(*) FROM tool_results`))
	require.EqualValues(t, 4, e.count(t, `SELECT count(*) FROM sessions`), "the live session of each tenant")
	require.EqualValues(t, 4, e.count(t, `SELECT count(*) FROM memory_revisions`), "the live revision of each memory")
}

// TestSweepWithNothingDue measures a sweep over a tenant with every rule
// on and nothing due: 20,000 sessions created long ago and active since,
// 20,000 recent tool results, 10,000 memories whose two old revisions are
// their last two (kept).
func TestSweepWithNothingDue(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string]string{"acme": `{"retention": {"sessions_idle_days": 30, "tool_results_days": 30, "memory_revisions_days": 30, "memory_revisions_keep": 2}}`})
	old, recent := e.now.Add(-100*day), e.now.Add(-day)
	e.exec(t, `INSERT INTO sessions (tenant_id, session_id, created_at, updated_at)
		SELECT 'acme', 's' || i, $1, $2 FROM generate_series(1, 20000) i`, old, recent)
	e.exec(t, `INSERT INTO tool_results (tenant_id, id, session_id, message_uuid, tool_use_id, content, size_chars, created_at)
		SELECT 'acme', 'tr' || i, 's' || (i % 100 + 1), 'm', 'tr' || i, 'x', 1, $1 FROM generate_series(1, 20000) i`, recent)
	e.exec(t, `INSERT INTO memories (tenant_id, scope, name, revision, type, description, body, created_at, updated_at)
		SELECT 'acme', 'project:x', 'm' || i, 2, 'project', 'd', 'b', $1, $1 FROM generate_series(1, 10000) i`, old)
	e.exec(t, `INSERT INTO memory_revisions (tenant_id, scope, name, revision, op, actor, type, description, body, created_at)
		SELECT 'acme', 'project:x', 'm' || i, r, 'updated', 'api', 'project', 'd', 'b', $1
		FROM generate_series(1, 10000) i, generate_series(1, 2) r`, old)
	e.exec(t, `ANALYZE sessions, tool_results, memories, memory_revisions`)
	s := e.sweeper(t, 1000)
	var took []time.Duration
	for range 5 {
		start := time.Now()
		res, err := s.Sweep(context.Background())
		took = append(took, time.Since(start))
		require.NoError(t, err)
		require.Empty(t, res.Deleted)
		require.Zero(t, res.Failed)
	}
	t.Logf("a sweep with nothing due: %v", took)
	require.EqualValues(t, 20000, e.count(t, `SELECT count(*) FROM sessions`))
	require.EqualValues(t, 20000, e.count(t, `SELECT count(*) FROM memory_revisions`))
}

// TestSweepPassesByATenantAnotherHolds: a tenant whose retention lock
// another sweeper holds is passed by, untouched, and swept once free.
func TestSweepPassesByATenantAnotherHolds(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string]string{"acme": `{"retention": {"tool_results_days": 1}}`})
	e.session(t, "acme", "s1", e.now.Add(-10*day), e.now)
	e.toolResult(t, "acme", "s1", "old", e.now.Add(-10*day))
	ctx := context.Background()
	unlock, ok, err := e.st.LockRetention(ctx, "acme")
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = e.st.LockRetention(ctx, "acme")
	require.NoError(t, err)
	require.False(t, ok, "one holder at a time")

	s := e.sweeper(t, 1000)
	res, err := s.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Busy)
	require.Empty(t, res.Deleted)
	require.EqualValues(t, 1, e.count(t, `SELECT count(*) FROM tool_results`))

	unlock()
	res, err = s.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, res.Busy)
	require.Equal(t, map[string]int64{retain.KindToolResults: 1}, res.Deleted)
}

// TestSweepCountsAFailureAndGoesOn: a tenant whose stored settings no
// longer validate is counted as a failure and logged; the other tenants
// are swept all the same.
func TestSweepCountsAFailureAndGoesOn(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string]string{"acme": `{"retention": {"tool_results_days": 1}}`, "broken": `{"retention": {"tool_results_days": 1}}`})
	e.exec(t, `UPDATE tenants SET settings = '{"retention": {"tool_results_days": -3}}' WHERE tenant_id = 'broken'`)
	for _, tenant := range []string{"acme", "broken"} {
		e.session(t, tenant, "s1", e.now.Add(-10*day), e.now)
		e.toolResult(t, tenant, "s1", "old", e.now.Add(-10*day))
	}
	res, err := e.sweeper(t, 1000).Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Failed)
	require.EqualValues(t, 1, e.metrics.Sum("mnemos.retention.failures", "kind", "settings"))
	require.Equal(t, map[string]int64{retain.KindToolResults: 1}, res.Deleted)
	require.EqualValues(t, 1, e.count(t, `SELECT count(*) FROM tool_results WHERE tenant_id = 'broken'`))
}

// TestRetentionErasureCutShort: a session's erasure that retention
// started and a crash cut short is finished by the erasure sweep,
// audited as retention's, and counted once.
func TestRetentionErasureCutShort(t *testing.T) {
	t.Parallel()
	e := setup(t, map[string]string{"acme": `{"retention": {"sessions_idle_days": 1}}`})
	e.session(t, "acme", "idle", e.now.Add(-10*day), e.now.Add(-10*day))
	crash := errors.New("the worker stops")
	s, _ := e.sweeperWith(t, erasure.Config{Batch: 1000, AfterBatch: func(string, int64) error { return crash }})
	res, err := s.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, res.Failed, "the cut-short erasure is a failure of this sweep")
	require.Empty(t, res.Deleted)
	require.EqualValues(t, 1, e.count(t, `SELECT count(*) FROM erasures WHERE actor = 'retention' AND finished_at IS NULL`))

	_, eraser := e.sweeperWith(t, erasure.Config{Batch: 1000, Lease: time.Nanosecond})
	done, err := eraser.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, done)
	require.Zero(t, e.count(t, `SELECT count(*) FROM sessions`))
	require.EqualValues(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE actor = 'retention' AND target = 'idle'`))
	require.EqualValues(t, 1, e.metrics.Sum("mnemos.retention.deleted", "kind", retain.KindSessions))
}
