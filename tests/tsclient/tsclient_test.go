// Package tsclient tests the TypeScript client of clients/typescript
// against a running gateway: that its generated types are those of the
// document this build serves, that it type-checks against them, and that
// its own tests pass against the server. It needs Node (MNEMOS_TEST_NODE,
// the node binary, 20 or later) and the package's dependencies installed
// (npm ci in clients/typescript); without MNEMOS_TEST_NODE it skips.
package tsclient_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api/apitest"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/health"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/gateway"
)

// pkgDir is the TypeScript package, from this test's directory.
const pkgDir = "../../clients/typescript"

// node is the node binary, or the test skips.
func node(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("MNEMOS_TEST_NODE")
	if bin == "" {
		t.Skip("MNEMOS_TEST_NODE (the node binary) is not set")
	}
	if _, err := os.Stat(filepath.Join(pkgDir, "node_modules", "typescript")); err != nil {
		t.Fatalf("the TypeScript client's dependencies are not installed: npm ci --prefix clients/typescript (%v)", err)
	}
	return bin
}

// run runs node with args in the package's directory and env added, and
// returns its output; a failure fails the test with that output.
func run(t *testing.T, bin string, env []string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node %v:\n%s\n%s", args, out, stderr.Bytes())
	return out
}

// TestTheGeneratedTypesAreTheDocuments: src/schema.ts is what
// openapi-typescript makes of api/openapi.yaml now.
func TestTheGeneratedTypesAreTheDocuments(t *testing.T) {
	t.Parallel()
	bin := node(t)
	got := run(t, bin, nil, "node_modules/openapi-typescript/bin/cli.js", "../../api/openapi.yaml")
	want, err := os.ReadFile(filepath.Join(pkgDir, "src", "schema.ts"))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "clients/typescript/src/schema.ts is not the document's: npm run generate in clients/typescript")
}

// TestTheClientAgainstAServer type-checks and builds the client and its
// test, then runs the test against a gateway on Postgres and NATS; every
// answer it receives is validated against the document on the way.
func TestTheClientAgainstAServer(t *testing.T) {
	t.Parallel()
	bin := node(t)
	srv := serve(t)
	run(t, bin, nil, "node_modules/typescript/bin/tsc", "-p", ".")
	out := run(t, bin, []string{"MNEMOS_URL=" + srv, "MNEMOS_API_KEY=key-ts"}, "--test", "--test-reporter=spec", "dist/test/")
	t.Logf("node --test:\n%s", out)
}

// serve starts a gateway, with the health endpoints beside it as
// cmd/mnemos serves them, behind a proxy that validates every answer
// against api/openapi.yaml, and returns the proxy's URL. The tenant "ts"
// has the key "key-ts".
func serve(t *testing.T) string {
	t.Helper()
	st := pgtest.New(t)
	b := bustest.New(t)
	ctx := context.Background()
	require.NoError(t, st.EnsureTenant(ctx, "ts", "ts"))
	require.NoError(t, st.AddAPIKey(ctx, "ts", "test", "key-ts"))
	metrics := telemetrytest.New(t)
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, time.Second)
	require.NoError(t, err)
	cfg := gateway.DefaultConfig()
	cfg.Limits, err = limits.New(st, func(ctx context.Context, tenant string) (limits.Config, error) {
		s, err := settings.For(ctx, tenant)
		return s.Limits, err
	}, metrics.Meter(), limits.Options{})
	require.NoError(t, err)
	gw, err := gateway.New(cfg, st, b, settings, bustest.Logger(t), metrics.Meter())
	require.NoError(t, err)
	mux := http.NewServeMux()
	health.Register(mux, nil, map[string]string{"gateway": "serving"})
	gw.Register(mux)
	api := httptest.NewServer(mux)
	target, err := url.Parse(api.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = apitest.Transport(t, nil)
	front := httptest.NewServer(proxy)
	t.Cleanup(func() { front.Close(); api.Close(); gw.Drain() })
	return front.URL
}
