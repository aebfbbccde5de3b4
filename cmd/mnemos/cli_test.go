package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// TestMigrateHelpTouchesNoDatabase: `mnemos migrate --help` prints its
// usage and asks for exit 0 (flag.ErrHelp, which main exits 0 on) without
// migrating: the owner's URL here answers nothing, so a migration would
// fail.
func TestMigrateHelpTouchesNoDatabase(t *testing.T) {
	t.Parallel()
	vars := env(map[string]string{"MNEMOS_MIGRATE_DATABASE_URL": "postgres://owner@127.0.0.1:1/mnemos?sslmode=disable&connect_timeout=1"})
	for _, arg := range []string{"-h", "-help", "--help"} {
		var out bytes.Buffer
		err := run(context.Background(), []string{"migrate", arg}, vars, &out, &out)
		require.ErrorIs(t, err, flag.ErrHelp, "mnemos migrate %s", arg)
		require.Contains(t, out.String(), "Usage: mnemos migrate", arg)
	}
	var out bytes.Buffer
	require.ErrorContains(t, run(context.Background(), []string{"migrate", "now"}, vars, &out, &out), `unexpected argument "now"`)
}

// TestHealthcheckTakesTheURLItsUsageNames: `mnemos healthcheck URL` asks
// the mnemos at URL (its /readyz when the URL names no path, as in
// http://host:port), and --help prints the usage.
func TestHealthcheckTakesTheURLItsUsageNames(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, url := range []string{srv.URL, srv.URL + "/", strings.TrimPrefix(srv.URL, "http://"), srv.URL + "/readyz"} {
		var out bytes.Buffer
		require.NoError(t, run(ctx, []string{"healthcheck", url}, env(nil), &out, &out), url)
		require.Contains(t, out.String(), srv.URL+"/readyz: ready", url)
	}
	var out bytes.Buffer
	require.ErrorContains(t, run(ctx, []string{"healthcheck", srv.URL + "/elsewhere"}, env(nil), &out, &out), "404", "a path given is asked as is")

	for _, arg := range []string{"-h", "--help"} {
		out.Reset()
		require.ErrorIs(t, run(ctx, []string{"healthcheck", arg}, env(nil), &out, &out), flag.ErrHelp, arg)
		require.Contains(t, out.String(), "Usage: mnemos healthcheck [URL]", arg)
	}
	require.ErrorContains(t, run(ctx, []string{"healthcheck", srv.URL, "more"}, env(nil), &out, &out), `unexpected argument "more"`)
	require.ErrorContains(t, run(ctx, []string{"healthcheck", "http://[::1"}, env(nil), &out, &out), "healthcheck")
}

// TestTenantSubcommandsHaveTheirOwnHelp: each tenant subcommand's -h shows
// its own usage and flags.
func TestTenantSubcommandsHaveTheirOwnHelp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	help := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		require.ErrorIs(t, run(ctx, args, env(nil), &out, &out), flag.ErrHelp, "%v", args)
		return out.String()
	}
	settings := help("tenant", "settings", "-h")
	require.Contains(t, settings, "Usage: mnemos tenant settings [-api URL] ID [JSON]")
	require.NotContains(t, settings, "-key", "create's flags are create's")
	require.NotContains(t, settings, "-name")
	create := help("tenant", "create", "--help")
	require.Contains(t, create, "Usage: mnemos tenant create [-api URL] [-name NAME] [-key KEY] ID")
	require.Contains(t, create, "-key")
	require.Contains(t, create, "-name")
	tenant := help("tenant", "-h")
	require.Contains(t, tenant, "mnemos tenant create")
	require.Contains(t, tenant, "mnemos tenant settings")
	require.Contains(t, tenant, "mnemos tenant upstream")
	upstream := help("tenant", "upstream", "-h")
	require.Contains(t, upstream, "-key-file")
	require.NotContains(t, upstream, "-name")

	var out bytes.Buffer
	require.ErrorContains(t, run(ctx, []string{"tenant", "rename", "acme"}, env(nil), &out, &out), `unknown tenant command "rename"`)
	require.ErrorContains(t, run(ctx, []string{"tenant", "settings", "acme", "{}", "more"}, env(nil), &out, &out), `unexpected argument "more"`)
	require.ErrorContains(t, run(ctx, []string{"tenant", "create", "no way"}, env(nil), &out, &out), "letters, digits")
}

// TestUsageListsEveryCommandAndTarget: `mnemos -h` names every command
// run dispatches to, every tenant subcommand and every target.
func TestUsageListsEveryCommandAndTarget(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.ErrorIs(t, run(context.Background(), []string{"-h"}, env(nil), &out, &out), flag.ErrHelp)
	usage := out.String()
	names := []string{"tenant create", "tenant settings", "tenant upstream", "tenant delete"}
	for _, c := range commands {
		if c.name != "tenant" {
			names = append(names, c.name)
		}
	}
	for _, cmd := range names {
		require.Contains(t, usage, "\n  mnemos "+cmd+" ", "the usage lists mnemos %s", cmd)
	}
	targets := regexp.MustCompile(`(?m)^TARGET is (.*)$`).FindStringSubmatch(usage)
	require.NotNil(t, targets, "the usage says what -target=TARGET takes:\n%s", usage)
	for _, target := range targetNames() {
		require.Regexp(t, `\b`+target+`\b`, targets[1], "the usage lists -target=%s", target)
	}
}

// TestVersionCommand: `mnemos version` (and --version) prints the build:
// the module's version, the revision it was built from and the Go version.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"version", "--version", "-version"} {
		var out bytes.Buffer
		require.NoError(t, run(context.Background(), []string{arg}, env(nil), &out, &out), arg)
		require.Regexp(t, `^mnemos \S+\n`, out.String(), arg)
		require.Contains(t, out.String(), runtime.Version(), arg)
	}
	var out bytes.Buffer
	require.ErrorContains(t, run(context.Background(), []string{"version", "now"}, env(nil), &out, &out), `unexpected argument "now"`)
}

// TestVersionTextNamesTheRevision: the build information's module version,
// revision, commit time and uncommitted changes are shown, and their
// absence is said.
func TestVersionTextNamesTheRevision(t *testing.T) {
	t.Parallel()
	info := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Path: "github.com/mnemos-ai/mnemos", Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	require.Equal(t, "mnemos v1.2.3\nrevision 0123456789abcdef0123456789abcdef01234567 (2026-01-02T03:04:05Z), with uncommitted changes\ngo1.26.1 "+runtime.GOOS+"/"+runtime.GOARCH+"\n", versionText(info))
	require.Equal(t, "mnemos (unknown)\nrevision unknown (built without version control information)\n"+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n", versionText(nil))
	// A benchmark report's machine line names the same revision.
	require.Equal(t, "0123456789abcdef0123456789abcdef01234567 with uncommitted changes", buildCommit(info))
	require.Empty(t, buildCommit(nil))
}

// TestASecondInstanceFailsAtOnceOnItsPort is a second `make run` in the
// same checkout: with the HTTP or the admin address taken, `mnemos
// -target=all` fails first, naming the variable to change, before it
// touches Postgres or starts the embedded NATS (whose store directory is
// not created).
func TestASecondInstanceFailsAtOnceOnItsPort(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = taken.Close() })
	dbURL := pgtest.URL(t)
	for _, variable := range []string{"MNEMOS_HTTP_ADDR", "MNEMOS_ADMIN_ADDR"} {
		storeDir := filepath.Join(t.TempDir(), "nats")
		vars := map[string]string{"MNEMOS_HTTP_ADDR": "127.0.0.1:0", "MNEMOS_ADMIN_ADDR": "127.0.0.1:0", "MNEMOS_DATABASE_URL": dbURL, "MNEMOS_NATS_STORE_DIR": storeDir}
		vars[variable] = taken.Addr().String()
		err := run(context.Background(), []string{"-target=all"}, env(vars), io.Discard, io.Discard)
		require.ErrorContains(t, err, variable, "the error names the variable to change")
		require.ErrorContains(t, err, "address already in use")
		require.NoDirExists(t, storeDir, "%s taken: the embedded NATS was not started", variable)
	}
	// Nor is a migration tried: the owner's Postgres here answers nothing,
	// and the port is what is reported.
	err = run(context.Background(), []string{"-target=all"}, env(map[string]string{
		"MNEMOS_HTTP_ADDR": taken.Addr().String(), "MNEMOS_ADMIN_ADDR": "127.0.0.1:0",
		"MNEMOS_MIGRATE_DATABASE_URL": "postgres://owner@127.0.0.1:1/mnemos?sslmode=disable&connect_timeout=1",
		"MNEMOS_NATS_STORE_DIR":       filepath.Join(t.TempDir(), "nats"),
	}), io.Discard, io.Discard)
	require.ErrorContains(t, err, "MNEMOS_HTTP_ADDR")
	require.ErrorContains(t, err, "address already in use")
}

// TestHelpExitsZeroFromTheBinary runs the built binary as a newcomer does:
// every command's -h/--help exits 0 with its usage, and nothing is
// started (the database and NATS variables point where nothing answers,
// and the embedded NATS's store directory stays absent).
func TestHelpExitsZeroFromTheBinary(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "mnemos")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	storeDir := filepath.Join(t.TempDir(), "nats")
	for _, args := range [][]string{
		{"-h"}, {"--help"}, {"migrate", "--help"}, {"healthcheck", "--help"}, {"tenant", "--help"},
		{"tenant", "create", "--help"}, {"tenant", "settings", "--help"}, {"tenant", "upstream", "--help"}, {"tenant", "delete", "--help"}, {"replay", "--help"},
		{"key", "--help"}, {"key", "create", "--help"}, {"key", "list", "--help"}, {"key", "revoke", "--help"}, {"key", "rotate", "--help"},
		{"bench", "--help"}, {"bench", "render", "--help"}, {"config", "--help"}, {"version", "--help"}, {"version"},
	} {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{
			"MNEMOS_MIGRATE_DATABASE_URL=postgres://owner@127.0.0.1:1/mnemos?sslmode=disable&connect_timeout=1",
			"MNEMOS_NATS_STORE_DIR=" + storeDir,
		}
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "mnemos %s exits 0: %s", strings.Join(args, " "), out)
		require.Regexp(t, `Usage|^mnemos `, string(out), "mnemos %s", strings.Join(args, " "))
	}
	require.NoDirExists(t, storeDir)
}

// TestTenantUpstream: `mnemos tenant upstream` gives a tenant its own
// upstream per provider from a key file (anthropic unless -provider names
// another), shows its URL and never the key, and -clear takes one
// provider's away; bad flags are refused before anything is stored.
func TestTenantUpstream(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	vars := env(map[string]string{"MNEMOS_DATABASE_URL": dbURL})
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"tenant", "create", "globex"}, vars, &out, &out))

	const secret, openaiSecret = "sk-upstream-never-printed", "sk-openai-never-printed"
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, []byte(secret+"\n"), 0o600))
	openaiKeyFile := filepath.Join(t.TempDir(), "openai-key")
	require.NoError(t, os.WriteFile(openaiKeyFile, []byte(openaiSecret+"\n"), 0o600))
	out.Reset()
	require.NoError(t, run(ctx, []string{"tenant", "upstream", "-url", "https://llm.globex.example/", "-key-file", keyFile, "globex"}, vars, &out, &out))
	require.Contains(t, out.String(), "tenant globex anthropic upstream https://llm.globex.example (key held, not shown)")
	require.NotContains(t, out.String(), secret)
	out.Reset()
	require.NoError(t, run(ctx, []string{"tenant", "upstream", "-provider", "openai", "-url", "https://oai.globex.example/v1", "-key-file", openaiKeyFile, "globex"}, vars, &out, &out))
	require.Contains(t, out.String(), "tenant globex openai upstream https://oai.globex.example/v1 (key held, not shown)")
	require.NotContains(t, out.String(), openaiSecret)

	st, err := store.Open(ctx, store.Config{URL: dbURL, MaxConns: 1})
	require.NoError(t, err)
	defer st.Close()
	up, err := st.TenantUpstream(ctx, "globex", store.ProviderAnthropic)
	require.NoError(t, err)
	require.Equal(t, store.Upstream{URL: "https://llm.globex.example", Key: secret}, up)
	require.NotContains(t, fmt.Sprint(up), secret, "an upstream prints without its key")
	up, err = st.TenantUpstream(ctx, "globex", store.ProviderOpenAI)
	require.NoError(t, err)
	require.Equal(t, store.Upstream{URL: "https://oai.globex.example/v1", Key: openaiSecret}, up, "the openai upstream is held beside the anthropic one")

	for _, bad := range [][]string{
		{"-url", "ftp://x", "-key-file", keyFile, "globex"},
		{"-url", "https://x", "globex"},
		{"-clear", "-url", "https://x", "-key-file", keyFile, "globex"},
		{"-url", "https://x", "-key-file", filepath.Join(t.TempDir(), "missing"), "globex"},
		{"-provider", "gemini", "-url", "https://x", "-key-file", keyFile, "globex"},
		{"-provider", "", "-clear", "globex"},
	} {
		require.Error(t, run(ctx, append([]string{"tenant", "upstream"}, bad...), vars, &out, &out), "%v", bad)
	}
	err = run(ctx, []string{"tenant", "upstream", "-provider", "OpenAI", "-clear", "globex"}, vars, &out, &out)
	require.EqualError(t, err, `tenant upstream: -provider: unknown provider "OpenAI": want anthropic or openai`)
	up, err = st.TenantUpstream(ctx, "globex", store.ProviderAnthropic)
	require.NoError(t, err)
	require.Equal(t, "https://llm.globex.example", up.URL, "a refused command changed nothing")
	_, err = st.TenantUpstream(ctx, "globex", store.ProviderOpenAI)
	require.NoError(t, err, "a refused -clear took nothing away")

	out.Reset()
	require.NoError(t, run(ctx, []string{"tenant", "upstream", "-provider", "openai", "-clear", "globex"}, vars, &out, &out))
	require.Contains(t, out.String(), "tenant globex uses the process's openai upstream (MNEMOS_UPSTREAM_OPENAI_URL)")
	_, err = st.TenantUpstream(ctx, "globex", store.ProviderOpenAI)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.TenantUpstream(ctx, "globex", store.ProviderAnthropic)
	require.NoError(t, err, "clearing openai's leaves anthropic's")

	out.Reset()
	require.NoError(t, run(ctx, []string{"tenant", "upstream", "-clear", "globex"}, vars, &out, &out))
	require.Contains(t, out.String(), "tenant globex uses the process's anthropic upstream (MNEMOS_UPSTREAM_ANTHROPIC_URL)")
	_, err = st.TenantUpstream(ctx, "globex", store.ProviderAnthropic)
	require.ErrorIs(t, err, store.ErrNotFound)
}
