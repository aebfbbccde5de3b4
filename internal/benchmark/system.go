// Package benchmark drives Mnemos on one machine and measures it next to the
// raw speed of the same machine's JetStream and Postgres, so that figures
// read as ratios that carry from machine to machine: turns/s end to end,
// ingest-to-accounted latency in a burst and at a sustained rate below
// saturation, context-assembly latency at several session sizes, and the
// Messages API proxy next to calling its upstream directly. Both
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
// local port, one limiter for both; and a scripted Anthropic upstream, on a
// local port of its own, that the gateway's Messages API proxy sends to.
type System struct {
	// Store is the services' (their role, under row-level security);
	// Owner a pool of the schema's owner, for the raw Postgres baseline.
	Store *store.Store
	Owner *pgxpool.Pool
	Bus   *bus.Bus
	// Accountant applies events directly too, to build sessions quickly.
	Accountant *tokenaccounting.Service
	// API is the gateway's base URL; Upstream the scripted upstream's,
	// which serves whichever upstream UseUpstream set last.
	API      string
	Upstream string

	upstream atomic.Pointer[upstream.Upstream]
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	srv, up  *http.Server
	gateway  *gateway.Gateway
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
	lc := &net.ListenConfig{}
	upLn, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("benchmark: listen: %w", err)
	}
	gcfg := gateway.DefaultConfig()
	gcfg.Limits = limiter
	gcfg.Upstream = proxy.Upstream{URL: "http://" + upLn.Addr().String(), Key: "bench-upstream-key"}
	gw, err := gateway.New(gcfg, st, b, settings, log.With("service", "gateway"), nil)
	if err != nil {
		_ = upLn.Close() // nothing was served on it
		return nil, fmt.Errorf("benchmark: %w", err)
	}
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		_ = upLn.Close() // nothing was served on it
		return nil, fmt.Errorf("benchmark: listen: %w", err)
	}
	mux := http.NewServeMux()
	gw.Register(mux)
	relay := outbox.New(outbox.DefaultConfig(), st, b, log.With("service", "outbox-relay"))

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &System{
		Store: st, Owner: owner, Bus: b, Accountant: acc, API: "http://" + ln.Addr().String(), Upstream: gcfg.Upstream.URL,
		cancel: cancel, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, gateway: gw,
	}
	s.UseUpstream(upstream.New(upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens}))
	s.up = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.upstream.Load().ServeHTTP(w, r)
	})}
	for name, run := range map[string]func(context.Context) error{"accountant": acc.Run, "compactor": comp.Run} {
		s.wg.Go(func() {
			if err := run(runCtx); err != nil {
				log.Error("benchmark: "+name, "err", err)
			}
		})
	}
	s.wg.Go(func() { _ = relay.Run(runCtx) })
	for srv, l := range map[*http.Server]net.Listener{s.srv: ln, s.up: upLn} {
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

// Close stops the services and waits for them.
func (s *System) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx) // the benchmark is over either way
	s.gateway.Drain()
	_ = s.up.Shutdown(ctx)
	s.cancel()
	s.wg.Wait()
}
