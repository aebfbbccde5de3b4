package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/internal/testkit/embedtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/claudecode"
	"github.com/mnemos-ai/mnemos/pkg/faults"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/replay"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// process is one `mnemos` serving in the test, as a user would start it.
type process struct {
	http   string   // the API's base URL
	admin  string   // the operator listener's base URL
	banner []string // the lines printed up to the API's address
	done   chan error
}

// start runs `mnemos args...` until the test ends and waits for its HTTP
// addresses. The operator listener takes a free port unless vars name one.
func start(t *testing.T, vars map[string]string, args ...string) *process {
	t.Helper()
	if _, ok := vars["MNEMOS_ADMIN_ADDR"]; !ok {
		vars = maps.Clone(vars)
		vars["MNEMOS_ADMIN_ADDR"] = "127.0.0.1:0"
	}
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
	admin := regexp.MustCompile(`^admin\s+(http://\S+)`)
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
			p.banner = append(p.banner, line)
			if m := admin.FindStringSubmatch(line); m != nil {
				p.admin = m[1] // printed before the API's
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

// databaseID is store.DatabaseID of the database at url: what the
// embedded NATS names its store for.
func databaseID(t *testing.T, url string) string {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{URL: url, MaxConns: 1})
	require.NoError(t, err)
	defer st.Close()
	id, err := st.DatabaseID(context.Background())
	require.NoError(t, err)
	return id
}

// getJSON GETs url with key and decodes the answer into out (when not
// nil), the answer validated against api/openapi.yaml.
func getJSON(t *testing.T, url, key string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := apitest.Client(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// apiOf is a client of the process's API with key, every answer validated
// against api/openapi.yaml.
func apiOf(t *testing.T, p *process, key string) *client.Client {
	return client.New(p.http, key, client.WithHTTPClient(apitest.Client(t)))
}

// metricsOf reads the process's /metrics page, on its operator listener.
func metricsOf(t *testing.T, p *process) string {
	t.Helper()
	resp, err := http.Get(p.admin + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
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
	vars := map[string]string{
		"MNEMOS_DATABASE_URL":   pgtest.URL(t),
		"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		"MNEMOS_DEV_API_KEY":    "test-dev-key",
	}
	p := start(t, vars, "-target=all")

	ctx := context.Background()
	_, err := apiOf(t, p, "").Readyz(ctx)
	require.NoError(t, err)
	require.Contains(t, p.banner, "nats          in-process (embedded, JetStream store "+filepath.Join(vars["MNEMOS_NATS_STORE_DIR"], databaseID(t, vars["MNEMOS_DATABASE_URL"]))+")",
		"the embedded NATS opens no port, and keeps the database's store under MNEMOS_NATS_STORE_DIR")
	var sessions []string

	for _, name := range []string{"short.jsonl", "tool_heavy.jsonl", "subagent.jsonl"} {
		path := claudecodetest.Path(t, name)
		require.NoError(t, run(ctx, []string{"replay", "--url", p.http, "--api-key", "test-dev-key", path}, env(nil), io.Discard, io.Discard))
		f, err := os.Open(path)
		require.NoError(t, err)
		records, err := claudecode.Parse(f)
		f.Close()
		require.NoError(t, err)
		events := replay.Events(records, replay.Options{})
		lastSeq := map[string]int64{}
		for _, ev := range events {
			lastSeq[ev.SessionID] = ev.Seq
			sessions = append(sessions, ev.SessionID)
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
		mn := apiOf(t, p, "test-dev-key")
		for session, seq := range lastSeq {
			var state api.Session
			require.Eventually(t, func() bool {
				state, err = mn.GetSession(ctx, session)
				return err == nil && state.AppliedSeq == seq
			}, 30*time.Second, 50*time.Millisecond, "%s: session %s applied through seq %d", name, session, seq)
			require.Equal(t, want[session], state.Tokens.Count, "%s: session %s count", name, session)
			require.Equal(t, "ok", state.Tokens.State)
		}
	}
	body := metricsOf(t, p)
	require.Regexp(t, `mnemos_turns_ingested_total\{[^}]*transport="http"[^}]*\} [1-9]`, body, "the gateway counted the ingested turns")
	require.Regexp(t, `mnemos_turns_accounted_total\{[^}]*outcome="applied"[^}]*\} [1-9]`, body, "the accountant counted the applied turns")

	// A replayed session's history, exported and imported into another
	// session with the command line, gives the same history there.
	src := sessions[len(sessions)-1]
	file := filepath.Join(t.TempDir(), "history.jsonl")
	cli := []string{"-session", src, "-url", p.http, "-api-key", "test-dev-key"}
	require.NoError(t, run(ctx, append(append([]string{"export"}, cli...), "-o", file), env(nil), io.Discard, io.Discard))
	cli[1] = "copied"
	var said bytes.Buffer
	require.NoError(t, run(ctx, append(append([]string{"import"}, cli...), file), env(nil), &said, io.Discard))
	exported, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(exported)), "\n")
	require.Contains(t, said.String(), fmt.Sprintf("import into session copied: %d events published", len(lines)))
	var last turn.Event
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &last))
	mn := apiOf(t, p, "test-dev-key")
	require.Eventually(t, func() bool {
		s, err := mn.GetSession(ctx, "copied")
		return err == nil && s.AppliedSeq == last.Seq
	}, 30*time.Second, 50*time.Millisecond)
	var copied bytes.Buffer
	require.NoError(t, run(ctx, []string{"export", "-session", "copied", "-url", p.http, "-api-key", "test-dev-key"}, env(nil), &copied, io.Discard))
	again := strings.Split(strings.TrimSpace(copied.String()), "\n")
	require.Len(t, again, len(lines))
	for i := range lines {
		var a, b turn.Event
		require.NoError(t, json.Unmarshal([]byte(lines[i]), &a))
		require.NoError(t, json.Unmarshal([]byte(again[i]), &b))
		require.Equal(t, "copied:"+a.EventID, b.EventID)
		b.EventID, b.SessionID, b.OccurredAt = a.EventID, a.SessionID, a.OccurredAt
		require.Equal(t, a, b, "line %d", i+1)
	}

	// The gateway target serves the console: the dev key signs in, and the
	// replayed sessions are listed.
	require.Contains(t, p.banner, "console       "+p.http+"/console/ (sign in with an API key)", "the banner names the console")
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	resp, err := browser.PostForm(p.http+"/console/login", url.Values{"key": {"test-dev-key"}})
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "/console/sessions", resp.Request.URL.Path, "signed in, the console shows the sessions")
	for _, id := range sessions {
		require.Contains(t, string(page), `href="/console/sessions/`+id+`"`)
	}
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
// two targets sharing one NATS and one Postgres, and every other target too
// (servedTargets checks none is left out).
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
	up := llmtest.NewAnthropicServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Text("answered upstream") })
	proxyVars := maps.Clone(base)
	proxyVars["MNEMOS_UPSTREAM_ANTHROPIC_URL"], proxyVars["MNEMOS_UPSTREAM_ANTHROPIC_KEY"] = up.URL, "upstream-key"
	px := start(t, proxyVars, "-target=proxy")
	var wg sync.WaitGroup
	for target, want := range map[string]string{"compactor": "running", "session-memory": "running", "extractor": "running", "recall": "running", "dreamer": "running"} {
		wg.Go(func() {
			p := start(t, base, "-target="+target)
			health, err := apiOf(t, p, "").Healthz(context.Background())
			require.NoError(t, err)
			require.Equal(t, want, health.Targets[target], "target %s reports healthy and %s", target, want)
			_, err = apiOf(t, p, "").Readyz(context.Background())
			require.NoError(t, err)
		})
	}
	// The embedder, against a scripted endpoint: it embeds what the
	// gateway target accepts and the accountant target applies.
	emb := embedtest.Start(t, embedtest.Config{})
	embedVars := maps.Clone(base)
	embedVars["MNEMOS_EMBED_BASE_URL"], embedVars["MNEMOS_EMBED_MODEL"] = emb.URL+"/v1", "scripted"
	wg.Go(func() {
		p := start(t, embedVars, "-target=embedder")
		health, err := apiOf(t, p, "").Healthz(context.Background())
		require.NoError(t, err)
		require.Equal(t, "running", health.Targets["embedder"])
	})
	wg.Wait()
	started := map[string]bool{"gateway": true, "proxy": true, "token-accounting": true, "compactor": true, "session-memory": true, "extractor": true, "recall": true, "dreamer": true, "embedder": true}
	for _, target := range servedTargets() {
		require.True(t, started[target], "target %s is started by this test", target)
	}

	path := claudecodetest.Path(t, "tool_heavy.jsonl")
	require.NoError(t, run(context.Background(), []string{"replay", "--url", gw.http, "--api-key", key[1], "--session", "split", "-scope", "project=split", path}, env(nil), io.Discard, io.Discard))
	var want int64 // the count after the last response
	for _, l := range dryRun(t, "--session", "split", path) {
		if l.Type == "assistant" {
			want = l.Count
		}
	}
	var state api.Session
	require.Eventually(t, func() bool {
		var err error
		state, err = apiOf(t, gw, key[1]).GetSession(context.Background(), "split")
		return err == nil && state.Tokens.Count == want
	}, 30*time.Second, 50*time.Millisecond, "the accountant target applied what the gateway target accepted (want %d, have %d)", want, state.Tokens.Count)
	require.Eventually(t, func() bool { return len(emb.Inputs()) > 0 }, 30*time.Second, 50*time.Millisecond, "the embedder target embeds the replayed messages")

	// The proxy target serves the Messages API and nothing else; the
	// round it records is accounted and read from the gateway target.
	messages := func(p *process) *http.Response {
		req, err := http.NewRequest(http.MethodPost, p.http+"/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hello"}]}`))
		require.NoError(t, err)
		req.Header.Set("x-api-key", key[1])
		req.Header.Set("content-type", "application/json")
		req.Header.Set("X-Mnemos-Session", "proxied")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := messages(px)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Contains(t, string(body), "answered upstream")
	require.Equal(t, "upstream-key", up.Requests()[0].Header.Get("X-Api-Key"))
	require.Eventually(t, func() bool {
		s, err := apiOf(t, gw, key[1]).GetSession(context.Background(), "proxied")
		return err == nil && s.Messages == 2
	}, 30*time.Second, 50*time.Millisecond, "the proxy target's round reaches the accountant and the gateway target")
	require.Equal(t, http.StatusNotFound, messages(gw).StatusCode, "the gateway target does not proxy")
	_, err = apiOf(t, px, key[1]).GetSession(context.Background(), "proxied")
	require.ErrorContains(t, err, "404", "the proxy target serves no Mnemos route")
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
	require.Equal(t, "127.0.0.1:9464", cfg.AdminAddr, "the operator listener is on loopback unless configured")
	require.Empty(t, cfg.NATSListen, "the embedded NATS opens no port unless asked")
	require.Contains(t, cfg.LogValue().String(), "admin_addr=127.0.0.1:9464")
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
	require.Equal(t, 2*time.Minute, cfg.SessionMemoryLease)
	require.Equal(t, 2*time.Minute, cfg.ExtractorLease)
	cfg, err = configFromEnv("all", env(map[string]string{
		"MNEMOS_SESSION_MEMORY_LEASE": "10s", "MNEMOS_EXTRACTOR_LEASE": "15s",
		"MNEMOS_LIMIT_EVENTS_PER_SECOND": "50", "MNEMOS_LIMIT_EVENTS_BURST": "80",
		"MNEMOS_LIMIT_ACTIVE_SESSIONS": "0", "MNEMOS_NATS_DUPLICATE_WINDOW": "2s",
		"MNEMOS_FAULT_CRASH_AFTER_COMMIT": "token-accounting:5", "MNEMOS_FAULT_CRASH_AFTER_PUBLISH": "outbox-relay:2",
	}))
	require.NoError(t, err)
	wantLimits := limits.DefaultConfig()
	wantLimits.EventsPerSecond, wantLimits.EventsBurst, wantLimits.ActiveSessions = 50, 80, 0
	require.Equal(t, wantLimits, cfg.Limits)
	require.Equal(t, 2*time.Second, cfg.NATSDuplicateWindow)
	require.Equal(t, 10*time.Second, cfg.SessionMemoryLease)
	require.Equal(t, 15*time.Second, cfg.ExtractorLease)
	require.Equal(t, faults.Points{"token-accounting": 5}, cfg.CrashAfterCommit)
	require.Equal(t, faults.Points{"outbox-relay": 2}, cfg.CrashAfterPublish)
	require.Contains(t, cfg.LogValue().String(), "fault_crash_after_commit", "a crash hook shows in the logged configuration")
	_, err = configFromEnv("all", env(map[string]string{
		"MNEMOS_LIMIT_EVENTS_PER_SECOND": "-1", "MNEMOS_LIMIT_EVENTS_BURST": "many",
		"MNEMOS_NATS_DUPLICATE_WINDOW": "1ms", "MNEMOS_FAULT_CRASH_AFTER_COMMIT": "compactor",
		"MNEMOS_EXTRACTOR_LEASE": "500ms",
	}))
	require.ErrorContains(t, err, "MNEMOS_LIMIT_EVENTS_PER_SECOND")
	require.ErrorContains(t, err, "MNEMOS_LIMIT_EVENTS_BURST")
	require.ErrorContains(t, err, "MNEMOS_NATS_DUPLICATE_WINDOW")
	require.ErrorContains(t, err, "MNEMOS_FAULT_CRASH_AFTER_COMMIT")
	require.ErrorContains(t, err, "MNEMOS_EXTRACTOR_LEASE")
}

// TestConfigOfTheOperatorListenerAndTheNATSPort: the admin address and the
// embedded server's loopback port are validated, and no NATS password
// reaches the logged configuration.
func TestConfigOfTheOperatorListenerAndTheNATSPort(t *testing.T) {
	t.Parallel()
	cfg, err := configFromEnv("all", env(map[string]string{"MNEMOS_ADMIN_ADDR": ":9090", "MNEMOS_NATS_LISTEN": "127.0.0.1:4222"}))
	require.NoError(t, err)
	require.Equal(t, ":9090", cfg.AdminAddr)
	require.Equal(t, "127.0.0.1:4222", cfg.NATSListen)
	require.Contains(t, cfg.LogValue().String(), "127.0.0.1:4222 with generated credentials")
	for _, addr := range []string{"localhost:4222", "[::1]:4222", "127.0.0.1:0"} {
		_, err := configFromEnv("all", env(map[string]string{"MNEMOS_NATS_LISTEN": addr}))
		require.NoError(t, err, addr)
	}

	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"MNEMOS_ADMIN_ADDR": "9090"}, "MNEMOS_ADMIN_ADDR"},
		{map[string]string{"MNEMOS_ADMIN_ADDR": ":8080"}, "a port of its own"},
		{map[string]string{"MNEMOS_NATS_LISTEN": "0.0.0.0:4222"}, "loopback"},
		{map[string]string{"MNEMOS_NATS_LISTEN": ":4222"}, "loopback"},
		{map[string]string{"MNEMOS_NATS_LISTEN": "10.0.0.5:4222"}, "loopback"},
		{map[string]string{"MNEMOS_NATS_LISTEN": "127.0.0.1:http"}, "port"},
		{map[string]string{"MNEMOS_NATS_LISTEN": "127.0.0.1:4222", "MNEMOS_NATS_URL": "nats://n"}, "set one or the other"},
	} {
		_, err := configFromEnv("all", env(tc.vars))
		require.ErrorContains(t, err, tc.want, "%v", tc.vars)
	}

	cfg, err = configFromEnv("gateway", env(map[string]string{"MNEMOS_NATS_URL": "nats://svc:s3cret@nats-a:4222,nats://svc:s3cret@nats-b:4222"}))
	require.NoError(t, err)
	logged := cfg.LogValue().String()
	require.NotContains(t, logged, "s3cret")
	require.Contains(t, logged, "nats://svc:xxxxx@nats-a:4222,nats://svc:xxxxx@nats-b:4222")
}

func TestMissingPostgresNamesWhatToStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := resolveDatabases(ctx, Config{}, "postgres://postgres@127.0.0.1:1/mnemos?sslmode=disable")
	require.ErrorContains(t, err, "docker compose up -d postgres")
	require.ErrorContains(t, err, "apt-get install -y postgresql")

	_, err = resolveDatabases(ctx, Config{MigrateDatabaseURL: "postgres://postgres@127.0.0.1:1/mnemos?sslmode=disable"}, "")
	require.ErrorContains(t, err, "MNEMOS_MIGRATE_DATABASE_URL=")

	_, err = openServicesStore(ctx, databases{app: "postgres://mnemos_app@127.0.0.1:1/mnemos?sslmode=disable&connect_timeout=2"}, 1, nil)
	require.ErrorContains(t, err, "MNEMOS_DATABASE_URL")
}

// TestTheServicesRoleIsDerivedFromTheOwners: with only the owner's URL, the
// services connect to the same database as mnemos_app; the two URLs may not
// name one role.
func TestTheServicesRoleIsDerivedFromTheOwners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner := pgtest.OwnerURL(t, pgtest.URL(t))
	dbs, err := resolveDatabases(ctx, Config{MigrateDatabaseURL: owner}, "")
	require.NoError(t, err)
	require.Equal(t, owner, dbs.owner)
	require.Equal(t, store.AppRole, userOf(dbs.app))
	require.Equal(t, dbName(t, owner), dbName(t, dbs.app))

	_, err = resolveDatabases(ctx, Config{MigrateDatabaseURL: owner, DatabaseURL: owner}, "")
	require.ErrorContains(t, err, "name the same role")

	_, err = configFromEnv("all", env(map[string]string{"MNEMOS_DATABASE_URL": owner, "MNEMOS_MIGRATE": "true"}))
	require.ErrorContains(t, err, "MNEMOS_MIGRATE=true needs MNEMOS_MIGRATE_DATABASE_URL")
	cfg, err := configFromEnv("all", env(map[string]string{"MNEMOS_DATABASE_URL": owner}))
	require.NoError(t, err)
	require.False(t, cfg.Migrate, "without the owner's URL, -target=all does not migrate")
	require.ErrorContains(t, run(ctx, []string{"migrate"}, env(map[string]string{"MNEMOS_DATABASE_URL": owner}), io.Discard, io.Discard),
		"set MNEMOS_MIGRATE_DATABASE_URL")
}

// TestServicesRefuseARoleRowLevelSecurityDoesNotConfine: a superuser, or the
// owner of the tables, is refused at start with what to configure instead.
func TestServicesRefuseARoleRowLevelSecurityDoesNotConfine(t *testing.T) {
	t.Parallel()
	app := pgtest.URL(t)
	for name, c := range map[string]struct{ url, want string }{
		"superuser": {pgtest.AdminURL(t, app), "superuser"},
		"owner":     {pgtest.OwnerURL(t, app), "it owns tables"},
	} {
		err := run(context.Background(), []string{"-target=all"}, env(map[string]string{
			"MNEMOS_DATABASE_URL":   c.url,
			"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
			"MNEMOS_ADMIN_ADDR":     "127.0.0.1:0",
			"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		}), io.Discard, io.Discard)
		require.ErrorContains(t, err, "refusing to serve", name)
		require.ErrorContains(t, err, c.want, name)
		require.ErrorContains(t, err, "MNEMOS_DATABASE_URL", name)
	}
}

// TestMigrateSetsUpTheServicesRole is the deploy of an empty database:
// `mnemos migrate` as the owner creates the services' login role with the
// password of MNEMOS_DATABASE_URL, as a member of mnemos_app; the services
// then serve as it, and `mnemos tenant create` works as it too.
func TestMigrateSetsUpTheServicesRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := pgtest.AdminURL(t, pgtest.URL(t))
	suffix := rand.Text()[:10] // a name of its own on a server other test runs share
	dbName, role := "mnemos_empty_"+strings.ToLower(suffix), "mnemos_svc_"+strings.ToLower(suffix)
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+dbName)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)")
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "DROP ROLE IF EXISTS "+role)
		require.NoError(t, err)
		conn.Close(ctx)
	})
	owner := withDB(t, admin, dbName)
	svc, err := url.Parse(owner)
	require.NoError(t, err)
	svc.User = url.UserPassword(role, "s3cret'pass")
	vars := map[string]string{"MNEMOS_MIGRATE_DATABASE_URL": owner, "MNEMOS_DATABASE_URL": svc.String()}

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"migrate"}, env(vars), io.Discard, &out))
	require.Contains(t, out.String(), "the services connect as "+role)
	var member bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT pg_has_role($1, $2, 'MEMBER')", role, store.AppRole).Scan(&member))
	require.True(t, member, "the services' role is a member of "+store.AppRole)

	require.NoError(t, run(ctx, []string{"tenant", "create", "acme"}, env(vars), io.Discard, io.Discard))
	p := start(t, map[string]string{
		"MNEMOS_DATABASE_URL":   svc.String(),
		"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		"MNEMOS_DEV_API_KEY":    "test-dev-key",
	}, "-target=all")
	_, err = apiOf(t, p, "").Readyz(ctx)
	require.NoError(t, err)
	_, err = apiOf(t, p, "test-dev-key").GetSession(ctx, "none")
	require.True(t, client.IsNotFound(err), "the dev tenant's key is verified through the owner's function: %v", err)
}

func withDB(t *testing.T, u, name string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	parsed.Path = "/" + name
	return parsed.String()
}

func dbName(t *testing.T, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	return parsed.Path
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

// TestLongReplayIsCompactedFromTheSessionNotes is the context window end to
// end, as `make run` serves it: one process, the builtin provider, no
// network. The long transcript replayed twice into one session crosses the
// auto-compact threshold. Meanwhile the session-memory service has kept the
// session's notes, so the compaction is a session-memory compaction: the
// notes are the summary and no model is called for it (the compaction's
// llm_calls and mnemos_llm_calls_total{task="compaction"} stay at 0, while
// the notes' own calls are counted under task "notes"). The compactor waits
// for the notes to take in the turns before the threshold, so this does not
// depend on timing. The context then starts with the boundary and the notes
// and is under the threshold.
func TestLongReplayIsCompactedFromTheSessionNotes(t *testing.T) {
	t.Parallel()
	p := start(t, map[string]string{
		"MNEMOS_DATABASE_URL":   pgtest.URL(t),
		"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		"MNEMOS_DEV_API_KEY":    "test-dev-key",
	}, "-target=all")
	// long.jsonl peaks at 155,686 tokens; its second copy (--repeat 2)
	// crosses the 167,000-token threshold.
	path := longUntilItsCompaction(t)
	require.NoError(t, run(context.Background(), []string{"replay", "--url", p.http, "--api-key", "test-dev-key", "--session", "long", "--repeat", "2", path}, env(nil), io.Discard, io.Discard))

	mn := apiOf(t, p, "test-dev-key")
	ctx := context.Background()
	var list api.CompactionList
	var session api.Session
	require.Eventually(t, func() bool {
		// The session first: a compaction it no longer has in flight is
		// ended in the list read after it.
		var err error
		if session, err = mn.GetSession(ctx, "long"); err != nil {
			return false
		}
		if list, err = mn.ListCompactions(ctx, "long"); err != nil {
			return false
		}
		// The two reads are not one snapshot: the first compaction itself must have ended.
		ended := len(list.Compactions) > 0 && list.Compactions[0].Status != "requested" && list.Compactions[0].Status != "running"
		return ended && !session.CompactionInFlight
	}, 90*time.Second, 50*time.Millisecond, "the long session was compacted")
	first := list.Compactions[0]
	require.Equal(t, "completed", first.Status)
	require.Equal(t, "session_memory", first.Method, "the notes were the summary")
	require.Zero(t, first.LLMCalls, "no model call in the compaction")
	t.Logf("session-memory compaction: %d tokens before, %d after", first.PreTokens, first.PostTokens)

	notes, err := mn.GetNotes(ctx, "long")
	require.NoError(t, err)
	require.Contains(t, notes.Content, "# Current State\n")
	require.Greater(t, notes.Version, int64(1))

	body := metricsOf(t, p)
	require.NotRegexp(t, `mnemos_llm_calls_total\{[^}]*task="compaction"[^}]*\} [1-9]`, body, "no compaction called the model")
	require.Regexp(t, `mnemos_llm_calls_total\{[^}]*task="notes"[^}]*\} [1-9]`, body, "the notes were written through the guarded provider")
	require.Regexp(t, `mnemos_session_notes_updates_total\{[^}]*outcome="updated"[^}]*\} [1-9]`, body)
	require.Regexp(t, `mnemos_compactions_total\{[^}]*method="session_memory"[^}]*\} [1-9]`, body)

	cx, err := mn.GetContext(ctx, "long", client.ContextOptions{})
	require.NoError(t, err)
	require.Equal(t, "builtin", cx.LLMProvider)
	require.Less(t, cx.Tokens.Count, cx.Tokens.AutoCompact)
	require.Less(t, cx.ContextTokens, cx.Tokens.AutoCompact)
	require.GreaterOrEqual(t, len(cx.Messages[0].Content), 2)
	require.True(t, strings.HasPrefix(cx.Messages[0].Content[0].Text, "<mnemos:compact-boundary"), cx.Messages[0].Content[0].Text)
	require.Contains(t, cx.Messages[0].Content[0].Text, `method="session_memory"`)
	require.Contains(t, cx.Messages[0].Content[1].Text, "running notes kept during the session")
	require.Contains(t, cx.Messages[0].Content[1].Text, "# Session Title\n")
	require.Greater(t, len(cx.Messages), 5, "the messages after the notes' last one are kept")
}

// longUntilItsCompaction writes long.jsonl up to its own /compact (the
// client's compaction boundary) to a file of the test's. Replayed twice,
// its second copy crosses the threshold with no client compaction after it
// that could bring the count down before Mnemos compacts, however slowly
// the machine runs.
func longUntilItsCompaction(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(claudecodetest.Path(t, "long.jsonl"))
	require.NoError(t, err)
	var kept []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, `"compact_boundary"`) || strings.Contains(line, "<command-name>/compact") {
			break
		}
		kept = append(kept, line)
	}
	require.Less(t, len(kept), strings.Count(string(data), "\n"), "long.jsonl has its compaction")
	path := filepath.Join(t.TempDir(), "long-until-compaction.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(kept, "\n")+"\n"), 0o600))
	return path
}
