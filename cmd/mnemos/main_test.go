package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus/bustest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/claudecode/claudecodetest"
	"github.com/mnemos-ai/mnemos/pkg/faults"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/replay"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// process is one `mnemos` serving in the test, as a user would start it.
type process struct {
	http string
	done chan error
}

// start runs `mnemos args...` until the test ends and waits for its HTTP address.
func start(t *testing.T, vars map[string]string, args ...string) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	p := &process{done: make(chan error, 1)}
	go func() {
		p.done <- run(ctx, args, env(vars), pw, io.Discard)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-p.done:
			require.NoError(t, err, "mnemos %v exits cleanly on shutdown", args)
		case <-time.After(60 * time.Second):
			t.Errorf("mnemos %v did not shut down", args)
		}
	})
	addr := regexp.MustCompile(`^http\s+(http://\S+)`)
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("mnemos exited before serving HTTP: %v", <-p.done)
			}
			if m := addr.FindStringSubmatch(line); m != nil {
				p.http = m[1]
				go func() { // keep draining the banner
					for range lines {
					}
				}()
				return p
			}
		case <-deadline:
			t.Fatal("mnemos did not print its HTTP address")
		}
	}
}

func getJSON(t *testing.T, url, key string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// dryRun runs `mnemos replay --dry-run args...` and returns its lines.
func dryRun(t *testing.T, args ...string) []replay.Line {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), append([]string{"replay", "--dry-run"}, args...), env(nil), &out, io.Discard))
	var lines []replay.Line
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var l replay.Line
		require.NoError(t, json.Unmarshal([]byte(line), &l))
		lines = append(lines, l)
	}
	return lines
}

// TestAllInOneServesReplayedTranscripts starts `mnemos -target=all` the way
// `make run` does (embedded NATS, migrations, dev tenant), replays every
// fixture into it over HTTP, and checks the served token state.
func TestAllInOneServesReplayedTranscripts(t *testing.T) {
	t.Parallel()
	p := start(t, map[string]string{
		"MNEMOS_DATABASE_URL":   pgtest.URL(t),
		"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		"MNEMOS_DEV_API_KEY":    "test-dev-key",
	}, "-target=all")

	status := getJSON(t, p.http+"/readyz", "", nil)
	require.Equal(t, http.StatusOK, status)

	for _, name := range []string{"short.jsonl", "tool_heavy.jsonl", "subagent.jsonl"} {
		path := claudecodetest.Path(t, name)
		require.NoError(t, run(context.Background(), []string{"replay", "--url", p.http, "--api-key", "test-dev-key", path}, env(nil), io.Discard, io.Discard))
		f, err := os.Open(path)
		require.NoError(t, err)
		records, err := claudecode.Parse(f)
		f.Close()
		require.NoError(t, err)
		events := replay.Events(records, replay.Options{})
		lastSeq := map[string]int64{}
		for _, ev := range events {
			lastSeq[ev.SessionID] = ev.Seq
		}
		// The served count after the last event equals the dry run's count
		// after that event's response: both start from that response's usage.
		want := map[string]int64{}
		lines, err := replay.Account(records, replay.Options{})
		require.NoError(t, err)
		for _, ev := range events {
			if ev.Seq != lastSeq[ev.SessionID] {
				continue
			}
			for _, l := range lines {
				if l.UUID == lastRecordOf(records, ev.Response.UUID) {
					want[ev.SessionID] = l.Count
				}
			}
		}
		for session, seq := range lastSeq {
			var state struct {
				AppliedSeq int64 `json:"applied_seq"`
				Tokens     struct {
					Count int64  `json:"count"`
					State string `json:"state"`
				} `json:"tokens"`
			}
			require.Eventually(t, func() bool {
				return getJSON(t, p.http+"/v1/sessions/"+session, "test-dev-key", &state) == http.StatusOK && state.AppliedSeq == seq
			}, 30*time.Second, 50*time.Millisecond, "%s: session %s applied through seq %d", name, session, seq)
			require.Equal(t, want[session], state.Tokens.Count, "%s: session %s count", name, session)
			require.Equal(t, "ok", state.Tokens.State)
		}
	}
	resp, err := http.Get(p.http + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Regexp(t, `mnemos_turns_ingested_total\{[^}]*transport="http"[^}]*\} [1-9]`, string(body), "the gateway counted the ingested turns")
	require.Regexp(t, `mnemos_turns_accounted_total\{[^}]*outcome="applied"[^}]*\} [1-9]`, string(body), "the accountant counted the applied turns")
}

// lastRecordOf finds the uuid of the last record of the response whose
// first record has uuid first.
func lastRecordOf(records []claudecode.Record, first string) string {
	var msgID, last string
	for _, r := range records {
		if r.UUID == first {
			msgID = r.MessageID
		}
		if msgID != "" && r.MessageID == msgID {
			last = r.UUID
		}
	}
	return last
}

// TestTargetsRunAsSeparateProcesses runs the gateway and the accountant as
// two targets sharing one NATS and one Postgres, and the idle targets too.
func TestTargetsRunAsSeparateProcesses(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	// A namespace of the test's own on a shared server, its streams deleted at the end.
	bcfg := bustest.Config(t)
	bustest.Connect(t, bcfg)
	base := map[string]string{"MNEMOS_DATABASE_URL": dbURL, "MNEMOS_NATS_URL": bcfg.URL, "MNEMOS_NAMESPACE": bcfg.Namespace, "MNEMOS_HTTP_ADDR": "127.0.0.1:0"}
	// `mnemos tenant create` makes a tenant and prints its key.
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"tenant", "create", "acme"}, env(base), &out, io.Discard))
	key := regexp.MustCompile(`api key (\S+)`).FindStringSubmatch(out.String())
	require.NotNil(t, key, out.String())

	gw := start(t, base, "-target=gateway")
	start(t, base, "-target=token-accounting")
	var wg sync.WaitGroup
	for target, want := range map[string]string{"compactor": "running", "session-memory": "idle", "extractor": "idle", "dreamer": "idle"} {
		wg.Go(func() {
			p := start(t, base, "-target="+target)
			var health struct {
				Targets map[string]string `json:"targets"`
			}
			require.Equal(t, http.StatusOK, getJSON(t, p.http+"/healthz", "", &health))
			require.Equal(t, want, health.Targets[target], "target %s reports healthy and %s", target, want)
			require.Equal(t, http.StatusOK, getJSON(t, p.http+"/readyz", "", nil))
		})
	}
	wg.Wait()

	path := claudecodetest.Path(t, "tool_heavy.jsonl")
	require.NoError(t, run(context.Background(), []string{"replay", "--url", gw.http, "--api-key", key[1], "--session", "split", path}, env(nil), io.Discard, io.Discard))
	var want int64 // the count after the last response
	for _, l := range dryRun(t, "--session", "split", path) {
		if l.Type == "assistant" {
			want = l.Count
		}
	}
	var state struct {
		Tokens struct {
			Count int64 `json:"count"`
		} `json:"tokens"`
	}
	require.Eventually(t, func() bool {
		return getJSON(t, gw.http+"/v1/sessions/split", key[1], &state) == http.StatusOK && state.Tokens.Count == want
	}, 30*time.Second, 50*time.Millisecond, "the accountant target applied what the gateway target accepted (want %d, have %d)", want, state.Tokens.Count)
}

func TestReplayDryRunExitsZeroOnEveryFixture(t *testing.T) {
	t.Parallel()
	dir := claudecodetest.Dir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		require.NotEmpty(t, dryRun(t, f), f)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	cfg, err := configFromEnv("all", env(nil))
	require.NoError(t, err)
	require.Equal(t, ":8080", cfg.HTTPAddr)
	require.True(t, cfg.Migrate, "all mode migrates")
	require.Equal(t, defaultDevAPIKey, cfg.DevAPIKey)

	_, err = configFromEnv("extractor", env(nil))
	require.ErrorContains(t, err, "MNEMOS_NATS_URL is required")
	_, err = configFromEnv("nonsense", env(nil))
	require.ErrorContains(t, err, "unknown target")
	_, err = configFromEnv("all", env(map[string]string{"MNEMOS_WORKERS": "-3", "MNEMOS_GAP_TIMEOUT": "soon"}))
	require.ErrorContains(t, err, "MNEMOS_WORKERS")
	require.ErrorContains(t, err, "MNEMOS_GAP_TIMEOUT")
	cfg, err = configFromEnv("all", env(map[string]string{"MNEMOS_DEV_API_KEY": "off"}))
	require.NoError(t, err)
	require.Empty(t, cfg.DevAPIKey)

	logged := cfg.LogValue().String()
	require.NotContains(t, logged, "mnemos-dev-key")

	require.Equal(t, limits.DefaultConfig(), cfg.Limits)
	require.Equal(t, 2*time.Minute, cfg.NATSDuplicateWindow)
	require.Empty(t, cfg.CrashAfterCommit)
	cfg, err = configFromEnv("all", env(map[string]string{
		"MNEMOS_LIMIT_EVENTS_PER_SECOND": "50", "MNEMOS_LIMIT_EVENTS_BURST": "80",
		"MNEMOS_LIMIT_ACTIVE_SESSIONS": "0", "MNEMOS_NATS_DUPLICATE_WINDOW": "2s",
		"MNEMOS_FAULT_CRASH_AFTER_COMMIT": "token-accounting:5", "MNEMOS_FAULT_CRASH_AFTER_PUBLISH": "outbox-relay:2",
	}))
	require.NoError(t, err)
	require.Equal(t, limits.Config{EventsPerSecond: 50, EventsBurst: 80, ActiveSessions: 0, ActiveMinutes: 30}, cfg.Limits)
	require.Equal(t, 2*time.Second, cfg.NATSDuplicateWindow)
	require.Equal(t, faults.Points{"token-accounting": 5}, cfg.CrashAfterCommit)
	require.Equal(t, faults.Points{"outbox-relay": 2}, cfg.CrashAfterPublish)
	require.Contains(t, cfg.LogValue().String(), "fault_crash_after_commit", "a crash hook shows in the logged configuration")
	_, err = configFromEnv("all", env(map[string]string{
		"MNEMOS_LIMIT_EVENTS_PER_SECOND": "-1", "MNEMOS_LIMIT_EVENTS_BURST": "many",
		"MNEMOS_NATS_DUPLICATE_WINDOW": "1ms", "MNEMOS_FAULT_CRASH_AFTER_COMMIT": "compactor",
	}))
	require.ErrorContains(t, err, "MNEMOS_LIMIT_EVENTS_PER_SECOND")
	require.ErrorContains(t, err, "MNEMOS_LIMIT_EVENTS_BURST")
	require.ErrorContains(t, err, "MNEMOS_NATS_DUPLICATE_WINDOW")
	require.ErrorContains(t, err, "MNEMOS_FAULT_CRASH_AFTER_COMMIT")
}

func TestMissingPostgresNamesWhatToStart(t *testing.T) {
	t.Parallel()
	_, err := resolveDatabase(context.Background(), "", "postgres://postgres@127.0.0.1:1/mnemos?sslmode=disable")
	require.ErrorContains(t, err, "docker compose up -d postgres")
	require.ErrorContains(t, err, "apt-get install -y postgresql")

	_, err = resolveDatabase(context.Background(), "postgres://postgres@127.0.0.1:1/mnemos?sslmode=disable", "")
	require.ErrorContains(t, err, "MNEMOS_DATABASE_URL=")
}

func TestTenantSettingsCommand(t *testing.T) {
	t.Parallel()
	vars := env(map[string]string{"MNEMOS_DATABASE_URL": pgtest.URL(t)})
	ctx := context.Background()
	require.NoError(t, run(ctx, []string{"tenant", "create", "-name", "Acme Corp", "acme"}, vars, io.Discard, io.Discard))

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"tenant", "settings", "acme", `{"tokens": {"auto_compact_percent": 80}}`}, vars, &out, io.Discard))
	var shown struct {
		Effective struct {
			Tokens struct {
				AutoCompactPercent float64 `json:"auto_compact_percent"`
				AutoCompactBuffer  int64   `json:"auto_compact_buffer"`
			} `json:"tokens"`
		} `json:"effective"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &shown), out.String())
	require.InDelta(t, 80, shown.Effective.Tokens.AutoCompactPercent, 0)
	require.EqualValues(t, 13_000, shown.Effective.Tokens.AutoCompactBuffer, "what the tenant did not name keeps its default")

	err := run(ctx, []string{"tenant", "settings", "acme", `{"tokens": {"auto_compact_percent": 180}}`}, vars, io.Discard, io.Discard)
	require.ErrorContains(t, err, "auto_compact_percent")
	err = run(ctx, []string{"tenant", "settings", "nobody", `{}`}, vars, io.Discard, io.Discard)
	require.ErrorContains(t, err, "unknown tenant")
}

// TestLongReplayIsCompactedUnderTheThreshold is the context window end to
// end, as `make run` serves it: one process, the builtin provider, no
// network. A transcript replayed ten times over into one session crosses the
// auto-compact threshold; the session is compacted, and its context then
// starts with the boundary and the summary and is under the threshold.
func TestLongReplayIsCompactedUnderTheThreshold(t *testing.T) {
	t.Parallel()
	p := start(t, map[string]string{
		"MNEMOS_DATABASE_URL":   pgtest.URL(t),
		"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		"MNEMOS_DEV_API_KEY":    "test-dev-key",
	}, "-target=all")
	path := claudecodetest.Path(t, "subagent.jsonl")
	require.NoError(t, run(context.Background(), []string{"replay", "--url", p.http, "--api-key", "test-dev-key", "--session", "long", "--repeat", "10", path}, env(nil), io.Discard, io.Discard))

	type compaction struct {
		Status   string `json:"status"`
		Method   string `json:"method"`
		LLMCalls int    `json:"llm_calls"`
	}
	var list struct {
		Compactions []compaction `json:"compactions"`
	}
	var session struct {
		CompactionInFlight bool `json:"compaction_in_flight"`
	}
	require.Eventually(t, func() bool {
		getJSON(t, p.http+"/v1/sessions/long/compactions", "test-dev-key", &list)
		getJSON(t, p.http+"/v1/sessions/long", "test-dev-key", &session)
		// The two reads are not one snapshot: the first compaction itself must have ended.
		ended := len(list.Compactions) > 0 && list.Compactions[0].Status != "requested" && list.Compactions[0].Status != "running"
		return ended && !session.CompactionInFlight
	}, 60*time.Second, 50*time.Millisecond, "the long session was compacted")
	require.Equal(t, "completed", list.Compactions[0].Status)
	require.Equal(t, "full", list.Compactions[0].Method)

	var ctx struct {
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"messages"`
		Tokens struct {
			Count       int64 `json:"count"`
			AutoCompact int64 `json:"autocompact_threshold"`
		} `json:"tokens"`
		ContextTokens int64  `json:"context_tokens"`
		LLMProvider   string `json:"llm_provider"`
	}
	require.Equal(t, http.StatusOK, getJSON(t, p.http+"/v1/sessions/long/context", "test-dev-key", &ctx))
	require.Equal(t, "builtin", ctx.LLMProvider)
	require.Less(t, ctx.Tokens.Count, ctx.Tokens.AutoCompact)
	require.Less(t, ctx.ContextTokens, ctx.Tokens.AutoCompact)
	require.GreaterOrEqual(t, len(ctx.Messages[0].Content), 2)
	require.True(t, strings.HasPrefix(ctx.Messages[0].Content[0].Text, "<mnemos:compact-boundary"), ctx.Messages[0].Content[0].Text)
	require.Contains(t, ctx.Messages[0].Content[1].Text, "Primary Request and Intent")
}

func TestBenchCommandPrintsItsTables(t *testing.T) {
	t.Parallel()
	var out, errs bytes.Buffer
	err := run(context.Background(), []string{"bench", "--database-url", pgtest.URL(t),
		"--rounds", "1", "--sessions", "5", "--turns-per-session", "4", "--sustain", "1s", "--samples", "3", "--sizes", "5000"},
		env(nil), &out, &errs)
	require.NoError(t, err, errs.String())
	for _, want := range []string{"Machine: ", "turns/s end to end", "at a sustained rate", "ratio to Postgres", "| 5K tokens |"} {
		require.Contains(t, out.String(), want)
	}
	require.Error(t, run(context.Background(), []string{"bench", "--sizes", "big"}, env(nil), io.Discard, io.Discard))
}
