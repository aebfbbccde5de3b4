package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/memory/extraction"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/extractor"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/gateway/proxy"
	"github.com/mnemos-ai/mnemos/services/sessionmemory"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// mnemos is Mnemos in front of an upstream: the gateway with the
// accountant, the relay, the compactor, the session-memory service and the
// extractor on real NATS and Postgres, the model work done by the builtin
// provider as when no model is configured.
type mnemos struct {
	store   *store.Store
	api     *httptest.Server
	metrics *telemetrytest.Reader
	// accountant and compactor run until the test ends, or holds them.
	accountant, compactor *service
}

// service runs one of Mnemos's services. A test holds it to let the events
// it consumes wait in the bus, as they do when it falls behind under load,
// and releases it to catch up.
type service struct {
	t    *testing.T
	name string
	ctx  context.Context // the system's: ends with the test
	run  func(context.Context) error
	mu   sync.Mutex
	stop func() // ends the current run and waits for it; nil while held
}

func newService(t *testing.T, ctx context.Context, name string, run func(context.Context) error) *service {
	s := &service{t: t, name: name, ctx: ctx, run: run}
	s.release()
	return s
}

// hold stops the service and waits until it stopped.
func (s *service) hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

// release runs the service again.
func (s *service) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.run(ctx); err != nil && ctx.Err() == nil {
			s.t.Errorf("%s: %v", s.name, err)
		}
	}()
	s.stop = func() { cancel(); <-done }
}

// startMnemos runs the gateway in front of upstreamURL, with the
// accountant, the relay, the compactor, the session-memory service and the
// extractor behind it, for the tenant whose key is apiKey, until the test
// ends.
func startMnemos(t *testing.T, upstreamURL, apiKey string, extras ...extra) *mnemos {
	t.Helper()
	return startMnemosOn(t, pgtest.New(t), bustest.New(t), upstreamURL, apiKey, extras...)
}

// extra is a service a test adds to Mnemos's: it may set the gateway's
// config before the gateway is made, and what it returns runs beside the
// other services until the test ends.
type extra func(t *testing.T, st *store.Store, b *bus.Bus, settings *tenantcfg.Cache, gcfg *gateway.Config) func(context.Context) error

// startMnemosOn is startMnemos on the store and bus given: a test that
// takes Postgres or NATS away reaches them through a link.
func startMnemosOn(t *testing.T, st *store.Store, b *bus.Bus, upstreamURL, apiKey string, extras ...extra) *mnemos {
	t.Helper()
	return startMnemosWith(t, st, b, upstreamURL, apiKey, builtin.New(map[llm.Task]builtin.Handler{
		llm.TaskCompaction: compaction.BuiltinSummarizer,
		llm.TaskNotes:      sessionnotes.Builtin,
		llm.TaskExtraction: extraction.Builtin,
	}), extras...)
}

// startMnemosWith is startMnemosOn with the background services' model
// calls made by provider, and the extras added.
func startMnemosWith(t *testing.T, st *store.Store, b *bus.Bus, upstreamURL, apiKey string, provider llm.Provider, extras ...extra) *mnemos {
	t.Helper()
	log := bustest.Logger(t)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, st.EnsureTenant(ctx, tenant, "Acme"))
	require.NoError(t, st.AddAPIKey(ctx, tenant, "test", apiKey))
	metrics := telemetrytest.New(t)
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	acc, err := tokenaccounting.New(tokenaccounting.DefaultConfig(), st, b, settings, log, metrics.Meter())
	require.NoError(t, err)
	comp, err := compactor.New(compactor.DefaultConfig(), st, b, settings, provider, log, metrics.Meter())
	require.NoError(t, err)
	notes, err := sessionmemory.New(sessionmemory.DefaultConfig(), st, b, settings, provider, log, metrics.Meter())
	require.NoError(t, err)
	ext, err := extractor.New(extractor.DefaultConfig(), st, b, settings, provider, log, metrics.Meter())
	require.NoError(t, err)
	gcfg := gateway.DefaultConfig()
	gcfg.PollInterval = 20 * time.Millisecond
	gcfg.Upstream = proxy.Upstream{URL: upstreamURL, Key: upstreamKey}
	runs := map[string]func(context.Context) error{"relay": nil, "session-memory": notes.Run, "extractor": ext.Run}
	for i, e := range extras {
		runs[fmt.Sprintf("extra %d", i+1)] = e(t, st, b, settings, &gcfg)
	}
	gw, err := gateway.New(gcfg, st, b, settings, log, metrics.Meter())
	require.NoError(t, err)
	mux := http.NewServeMux()
	gw.Register(mux)
	api := httptest.NewServer(mux)
	relay := outbox.New(outbox.Config{Batch: 128, Poll: 20 * time.Millisecond}, st, b, log)
	var wg sync.WaitGroup
	runs["relay"] = relay.Run
	for name, run := range runs {
		wg.Go(func() {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}
	accountant, compactor := newService(t, ctx, "accountant", acc.Run), newService(t, ctx, "compactor", comp.Run)
	t.Cleanup(func() {
		api.Close()
		gw.Drain()
		cancel()
		wg.Wait()
		accountant.hold()
		compactor.hold()
	})
	return &mnemos{store: st, api: api, metrics: metrics, accountant: accountant, compactor: compactor}
}

// waitApplied waits until the session has applied seq.
func waitApplied(t *testing.T, st *store.Store, session string, seq int64) sessionstate.Session {
	t.Helper()
	var sess sessionstate.Session
	require.Eventually(t, func() bool {
		var err error
		sess, err = st.GetSession(context.Background(), tenant, session)
		return err == nil && sess.AppliedSeq >= seq
	}, 30*time.Second, 20*time.Millisecond, "session %s did not apply seq %d", session, seq)
	return sess
}

// thresholds is the session's token status as Mnemos reports it
// (GET /v1/sessions/{id}): its count and thresholds, each checked set.
func thresholds(t *testing.T, apiURL, apiKey, session string) events.Tokens {
	t.Helper()
	var status struct {
		Tokens events.Tokens `json:"tokens"`
	}
	getJSON(t, apiURL+"/v1/sessions/"+session, apiKey, &status)
	require.Positive(t, status.Tokens.Warning)
	require.Positive(t, status.Tokens.AutoCompact)
	return status.Tokens
}

// getJSON reads a JSON answer of Mnemos's API with the tenant's key.
func getJSON(t *testing.T, url, apiKey string, out any) {
	t.Helper()
	status, body, err := get(url, apiKey)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, "GET %s: %s", url, body)
	require.NoError(t, json.Unmarshal(body, out))
}

// awaitJSON waits until GET url with the tenant's key answers 200 with a
// JSON body for which done holds, decoded into out: what the services
// behind the gateway write, they write after the round that caused it.
func awaitJSON[T any](t *testing.T, url, apiKey string, done func(T) bool) T {
	t.Helper()
	var out T
	require.Eventually(t, func() bool {
		var v T
		status, body, err := get(url, apiKey)
		if err != nil || status != http.StatusOK || json.Unmarshal(body, &v) != nil || !done(v) {
			return false
		}
		out = v
		return true
	}, 30*time.Second, 50*time.Millisecond, "GET %s never answered as awaited", url)
	return out
}

// get answers GET url with the tenant's key: the status and the body.
func get(url, apiKey string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// startNoted runs Mnemos, on a store of its own, in front of a scripted
// upstream that answers every call "Noted.".
func startNoted(t *testing.T) (*upstream.Upstream, *store.Store, *mnemos) {
	t.Helper()
	up := upstream.Start(t, upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Final("Noted."), nil
	}})
	st := pgtest.New(t)
	return up, st, startMnemosOn(t, st, bustest.New(t), up.URL, key)
}

// compactionsBeforeTheCall counts the session's compactions the proxy
// made before a call.
func compactionsBeforeTheCall(t *testing.T, st *store.Store, session string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pgtest.Admin(t, st).QueryRow(context.Background(),
		"SELECT count(*) FROM compactions WHERE session_id = $1 AND trigger = 'preflight'", session).Scan(&n))
	return n
}
