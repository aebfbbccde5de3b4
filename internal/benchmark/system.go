// Package benchmark drives Mnemos on one machine and measures it next to the
// raw speed of the same machine's JetStream and Postgres, so that figures
// read as ratios that carry from machine to machine: turns/s end to end,
// ingest-to-accounted latency in a burst and at a sustained rate below
// saturation, context-assembly latency at several session sizes, and the
// proxy's Messages and Responses doors next to calling their upstreams
// directly. Both
// `mnemos bench` and the go benchmarks of tests/bench use it.
package benchmark

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/builtin"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/gateway/proxy"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// Tenant and APIKey are the benchmark's tenant and its key.
const (
	Tenant = "bench"
	APIKey = "mnemos-bench-key" //nolint:gosec // a benchmark's key, not a secret
)

// System is Mnemos running in this process as the serving binary wires it:
// the accountant, the compactor (with the builtin provider) and the outbox
// relay consuming and publishing on the bus, the gateway serving HTTP on a
// local port, one limiter for both; and two scripted upstreams, each on a
// local port of its own: an Anthropic one, where the gateway's proxy sends
// POST /v1/messages, and an OpenAI one, where it sends POST /v1/responses.
type System struct {
	// Store is the services' (their role, under row-level security);
	// Owner a pool of the schema's owner, for the raw Postgres baseline.
	Store *store.Store
	Owner *pgxpool.Pool
	Bus   *bus.Bus
	// Accountant applies events directly too, to build sessions quickly.
	Accountant *tokenaccounting.Service
	// API is the gateway's base URL; Upstream the scripted Anthropic
	// upstream's, which serves whichever upstream UseUpstream set last, and
	// UpstreamOpenAI the scripted OpenAI upstream's, which serves whichever
	// UseResponses set last. Neither upstream URL ends in /v1.
	API            string
	Upstream       string
	UpstreamOpenAI string

	upstream      atomic.Pointer[upstream.Upstream]
	responses     atomic.Pointer[responses.Upstream]
	cancel        context.CancelFunc
	wg            sync.WaitGroup
	srv, up, upAI *http.Server
	gateway       *gateway.Gateway
}

// Start runs the accountant, the relay and the gateway on st and b until
// Close. The benchmark tenant is created, with its limits off: the point is
// how fast the system goes, not where a tenant is stopped.
func Start(ctx context.Context, st *store.Store, owner *pgxpool.Pool, b *bus.Bus, log *slog.Logger) (*System, error) {
	if err := st.EnsureTenant(ctx, Tenant, "benchmark"); err != nil {
		return nil, fmt.Errorf("benchmark: %w", err)
	}
	if err := st.AddAPIKey(ctx, Tenant, "benchmark", APIKey); err != nil {
		return nil, fmt.Errorf("benchmark: %w", err)
	}
	if err := st.SetTenantSettings(ctx, Tenant, []byte(`{"limits": {"events_per_second": 0, "active_sessions": 0}}`)); err != nil {
		return nil, fmt.Errorf("benchmark: %w", err)
	}
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, 30*time.Second)
	if err != nil {
		return nil, fmt.Errorf("benchmark: %w", err)
	}
	limiter, err := limits.New(st, func(ctx context.Context, tenant string) (limits.Config, error) {
		s, err := settings.For(ctx, tenant)
		return s.Limits, err
	}, nil, limits.Options{})
	if err != nil {
		return nil, fmt.Errorf("benchmark: %w", err)
	}

	acfg := tokenaccounting.DefaultConfig()
	acfg.Limits = limiter
	acc, err := tokenaccounting.New(acfg, st, b, settings, log.With("service", "token-accounting"), nil)
	if err != nil {
		return nil, fmt.Errorf("benchmark: %w", err)
	}
	provider := builtin.New(map[llm.Task]builtin.Handler{llm.TaskCompaction: compaction.BuiltinSummarizer})
	comp, err := compactor.New(compactor.DefaultConfig(), st, b, settings, provider, log.With("service", "compactor"), nil)
	if err != nil {
		return nil, fmt.Errorf("benchmark: %w", err)
	}
	// The gateway's port, the Anthropic upstream's and the OpenAI one's.
	lns, err := listenLocal(ctx, 3)
	if err != nil {
		return nil, err
	}
	ln, upLn, aiLn := lns[0], lns[1], lns[2]
	gcfg := gateway.DefaultConfig()
	gcfg.Limits = limiter
	gcfg.Upstream = proxy.Upstream{URL: "http://" + upLn.Addr().String(), Key: "bench-upstream-key"}
	gcfg.UpstreamOpenAI = proxy.Upstream{URL: "http://" + aiLn.Addr().String(), Key: "bench-upstream-openai-key"}
	gw, err := gateway.New(gcfg, st, b, settings, log.With("service", "gateway"), nil)
	if err != nil {
		closeAll(lns)
		return nil, fmt.Errorf("benchmark: %w", err)
	}
	mux := http.NewServeMux()
	gw.Register(mux)
	relay := outbox.New(outbox.DefaultConfig(), st, b, log.With("service", "outbox-relay"))

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &System{
		Store: st, Owner: owner, Bus: b, Accountant: acc, API: "http://" + ln.Addr().String(),
		Upstream: gcfg.Upstream.URL, UpstreamOpenAI: gcfg.UpstreamOpenAI.URL,
		cancel: cancel, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, gateway: gw,
	}
	s.UseUpstream(upstream.New(upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens}))
	s.UseResponses(responses.New(responses.Config{Script: func(*responses.Request) (responses.Reply, error) {
		return responses.Say(responses.Text(builtAnswer)), nil
	}}))
	s.up = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.upstream.Load().ServeHTTP(w, r)
	})}
	s.upAI = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.responses.Load().ServeHTTP(w, r)
	})}
	for name, run := range map[string]func(context.Context) error{"accountant": acc.Run, "compactor": comp.Run} {
		s.wg.Go(func() {
			if err := run(runCtx); err != nil {
				log.Error("benchmark: "+name, "err", err)
			}
		})
	}
	s.wg.Go(func() { _ = relay.Run(runCtx) })
	for srv, l := range map[*http.Server]net.Listener{s.srv: ln, s.up: upLn, s.upAI: aiLn} {
		s.wg.Go(func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("benchmark: http", "err", err)
			}
		})
	}
	return s, nil
}

// UseUpstream makes u answer what is sent to the System's upstream from
// now on, the proxy's calls and direct ones alike: each measurement starts
// with a prompt cache and a record of calls of its own.
func (s *System) UseUpstream(u *upstream.Upstream) { s.upstream.Store(u) }

// UseResponses makes u answer what is sent to the System's OpenAI upstream
// from now on, as UseUpstream does for the Anthropic one.
func (s *System) UseResponses(u *responses.Upstream) { s.responses.Store(u) }

// listenLocal listens on n ports of the loopback interface; on an error
// it closes those it opened.
func listenLocal(ctx context.Context, n int) ([]net.Listener, error) {
	lc := &net.ListenConfig{}
	lns := make([]net.Listener, 0, n)
	for range n {
		ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			closeAll(lns)
			return nil, fmt.Errorf("benchmark: listen: %w", err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// closeAll closes listeners nothing was served on.
func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		_ = ln.Close() // nothing was served on it
	}
}

// Close stops the services and waits for them.
func (s *System) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx) // the benchmark is over either way
	s.gateway.Drain()
	_ = s.up.Shutdown(ctx)
	_ = s.upAI.Shutdown(ctx)
	s.cancel()
	s.wg.Wait()
}
