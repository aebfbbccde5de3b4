package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/claudecodetest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// startAllInOne runs `mnemos -target=all` as `make run` does, on a fresh
// database, with the development key test-dev-key and the extra variables.
func startAllInOne(t *testing.T, extra map[string]string) *process {
	t.Helper()
	vars := map[string]string{
		"MNEMOS_DATABASE_URL":   pgtest.URL(t),
		"MNEMOS_HTTP_ADDR":      "127.0.0.1:0",
		"MNEMOS_NATS_STORE_DIR": t.TempDir(),
		"MNEMOS_DEV_API_KEY":    "test-dev-key",
	}
	maps.Copy(vars, extra)
	return start(t, vars, "-target=all")
}

// exposition is one scrape of /metrics, parsed.
type exposition map[string]*dto.MetricFamily

func scrape(t require.TestingT, base string) exposition {
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families
}

// value sums the samples of a family whose labels include every pair of
// labels (a counter's value, a histogram's count, a gauge's value), and says
// whether any sample matched.
func (e exposition) value(name string, labels ...string) (float64, bool) {
	f, ok := e[name]
	if !ok {
		return 0, false
	}
	var sum float64
	found := false
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && have[labels[i]] == labels[i+1]
		}
		if !match {
			continue
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// TestMetricsMoveAfterAReplay scrapes the one-process server's Prometheus
// endpoint, replays a transcript long enough to be compacted over HTTP, and
// scrapes again: the counters of every stage moved, and the gauges read
// from Postgres and JetStream report the new state.
func TestMetricsMoveAfterAReplay(t *testing.T) {
	t.Parallel()
	p := startAllInOne(t, map[string]string{"MNEMOS_GAUGE_INTERVAL": "100ms"})
	// Before: the gauges have been read once, with nothing in.
	var before exposition
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		before = scrape(c, p.admin)
		_, ok := before.value("mnemos_sessions", "state", "ok")
		assert.True(c, ok, "the sessions gauge is reported")
	}, 30*time.Second, 50*time.Millisecond)
	sessions, _ := before.value("mnemos_sessions")
	require.Zero(t, sessions)

	// long.jsonl peaks at 155,686 tokens; its second copy (--repeat 2)
	// crosses the 167,000-token threshold.
	path := longUntilItsCompaction(t)
	require.NoError(t, run(context.Background(), []string{"replay", "--url", p.http, "--api-key", "test-dev-key", "--session", "metered", "--repeat", "2", path}, env(nil), io.Discard, io.Discard))

	var after exposition
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		after = scrape(c, p.admin)
		n, _ := after.value("mnemos_compactions_total", "outcome", "completed")
		assert.Positive(c, n, "a compaction completed")
		pending, ok := after.value("mnemos_bus_consumer_pending", "consumer", "token-accounting")
		assert.True(c, ok)
		assert.Zero(c, pending, "the accountant consumed everything")
		backlog, ok := after.value("mnemos_outbox_pending")
		assert.True(c, ok)
		assert.Zero(c, backlog, "the outbox relayed everything")
		sessions, _ := after.value("mnemos_sessions")
		okState, _ := after.value("mnemos_sessions", "state", "ok")
		assert.GreaterOrEqual(c, sessions, 1.0, "the sessions are counted")
		assert.Equal(c, sessions, okState, "after its compaction every session is ok")
	}, 90*time.Second, 100*time.Millisecond)

	moved := []struct {
		name   string
		labels []string
	}{
		{"mnemos_turns_ingested_total", []string{"transport", "http"}},
		{"mnemos_turns_accounted_total", []string{"outcome", "applied"}},
		{"mnemos_accounting_duration_seconds", nil},
		{"mnemos_compactions_requested_total", nil},
		// The session's notes are its summary: the compaction makes no
		// model call, the notes' updates do.
		{"mnemos_compactions_total", []string{"trigger", "auto", "method", "session_memory", "outcome", "completed"}},
		{"mnemos_compactions_tokens_saved_total", []string{"method", "session_memory"}},
		{"mnemos_session_notes_updates_total", []string{"outcome", "updated"}},
		{"mnemos_llm_calls_total", []string{"task", "notes", "outcome", "ok"}},
		{"mnemos_llm_tokens_total", []string{"task", "notes", "kind", "input"}},
		{"mnemos_llm_tokens_total", []string{"task", "notes", "kind", "output"}},
		{"mnemos_llm_duration_seconds", []string{"task", "notes"}},
		{"mnemos_bus_deliveries_total", []string{"consumer", "token-accounting", "result", "acked"}},
		{"mnemos_bus_process_duration_seconds", []string{"consumer", "compactor", "result", "acked"}},
		{"http_server_request_duration_seconds", []string{"http_route", "/v1/turns", "http_request_method", "POST"}},
	}
	for _, m := range moved {
		was, _ := before.value(m.name, m.labels...)
		now, ok := after.value(m.name, m.labels...)
		require.True(t, ok, "%s%v is exposed", m.name, m.labels)
		require.Greater(t, now, was, "%s%v moved", m.name, m.labels)
	}
	dead, _ := after.value("mnemos_bus_dead_letters_total")
	require.Zero(t, dead, "nothing was dead-lettered")
}

// TestAllInOneExportsSpansOverOTLP configures tracing the standard way
// (OTEL_EXPORTER_OTLP_ENDPOINT) and checks that the server's spans reach an
// OTLP/HTTP receiver: the ingest route, the consume on the other side of
// NATS and a query.
func TestAllInOneExportsSpansOverOTLP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies [][]byte
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "not an OTLP/HTTP trace export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
	}))
	// Registered before the server starts, so it runs after the server has
	// shut down and flushed its spans.
	t.Cleanup(func() {
		defer receiver.Close()
		mu.Lock()
		defer mu.Unlock()
		all := bytes.Join(bodies, nil)
		for _, want := range []string{"POST /v1/turns", "process turn.completed", "SessionsLockFree", "mnemos"} {
			require.Contains(t, string(all), want, "the exported spans hold %q", want)
		}
	})
	p := startAllInOne(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.URL})
	path := claudecodetest.Path(t, "short.jsonl")
	require.NoError(t, run(context.Background(), []string{"replay", "--url", p.http, "--api-key", "test-dev-key", "--session", "traced", path}, env(nil), io.Discard, io.Discard))
	var state struct {
		AppliedSeq int64 `json:"applied_seq"`
	}
	require.Eventually(t, func() bool {
		return getJSON(t, p.http+"/v1/sessions/traced", "test-dev-key", &state) == http.StatusOK && state.AppliedSeq > 0
	}, 30*time.Second, 50*time.Millisecond)
}

// TestOperatorRoutesAreOnTheAdminListenerOnly: /metrics (which names every
// tenant) and the profiler answer on MNEMOS_ADMIN_ADDR and not on the API
// port; the probes answer on both. With MNEMOS_NATS_LISTEN the embedded NATS
// opens that loopback port, and a client without the generated credentials
// (a raw CONNECT {}) is refused.
func TestOperatorRoutesAreOnTheAdminListenerOnly(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	natsAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	p := startAllInOne(t, map[string]string{"MNEMOS_NATS_LISTEN": natsAddr})
	require.NotEqual(t, p.http, p.admin)
	var natsLine string
	for _, line := range p.banner {
		if strings.HasPrefix(line, "nats ") {
			natsLine = line
		}
	}
	require.Contains(t, natsLine, "in-process and on nats://"+natsAddr+" (credentials generated at start, not shown)")
	require.NotContains(t, natsLine, "@", "no credentials in the banner")

	status := func(url string) int {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		require.Equal(t, http.StatusNotFound, status(p.http+path), "the API port does not serve %s", path)
		require.Equal(t, http.StatusOK, status(p.admin+path), "the admin port serves %s", path)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		require.Equal(t, http.StatusOK, status(p.http+path), "load balancers probe %s on the API port", path)
		require.Equal(t, http.StatusOK, status(p.admin+path), "and on the admin port")
	}
	require.Contains(t, metricsOf(t, p), "mnemos_", "the admin port's page is the Prometheus one")

	// The NATS port is open, and refuses a client that brings no credentials.
	conn, err := net.DialTimeout("tcp", natsAddr, 5*time.Second)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	r := bufio.NewReader(conn)
	info, err := r.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(info, "INFO "), info)
	require.Contains(t, info, `"auth_required":true`)
	_, err = conn.Write([]byte("CONNECT {\"verbose\":false}\r\nPUB turn.completed.dev.sneaky 2\r\n{}\r\nPING\r\n"))
	require.NoError(t, err)
	answer, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, answer, "-ERR 'Authorization Violation'", "a CONNECT without credentials is refused")
}
