package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/client"
	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
)

// TestASuspendedTenantIsRefusedByEveryProcess: with two gateway processes
// on one database, a tenant suspended through the operator API of one is
// refused (403 tenant_suspended) by the other within a second, though the
// other had verified its key and trusts it for 30 s; resumed, it is served
// again within a second.
func TestASuspendedTenantIsRefusedByEveryProcess(t *testing.T) {
	t.Parallel()
	bcfg := bustest.Config(t)
	bustest.Connect(t, bcfg)
	base := map[string]string{"MNEMOS_DATABASE_URL": pgtest.URL(t), "MNEMOS_NATS_URL": bcfg.URL, "MNEMOS_NAMESPACE": bcfg.Namespace, "MNEMOS_HTTP_ADDR": "127.0.0.1:0"}
	ctx := context.Background()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"operator-key", "create", "-name", "ops"}, env(base), &out, io.Discard))
	secret := regexp.MustCompile(`secret (mnmop_\S+)`).FindStringSubmatch(out.String())
	require.NotNil(t, secret, out.String())

	a := start(t, base, "-target=gateway")
	b := start(t, base, "-target=gateway")
	operator := client.NewAdmin(a.admin, secret[1])
	made, err := operator.CreateTenant(ctx, api.TenantRequest{ID: "acme"})
	require.NoError(t, err)
	tenantKey := made.Key.Secret
	_, err = client.NewAdmin(a.admin, tenantKey).ListTenants(ctx)
	e, ok := client.AsError(err)
	require.True(t, ok, "%v", err)
	require.Equal(t, 401, e.Status, "a tenant's key is no operator key")

	time.Sleep(time.Second) // b listens for announcements by now: a key it verifies is trusted for 30 s
	_, err = apiOf(t, b, tenantKey).ListSessions(ctx, client.ListOptions{})
	require.NoError(t, err)

	_, err = operator.SuspendTenant(ctx, "acme")
	require.NoError(t, err)
	refused := func(p *process) func() bool {
		return func() bool {
			_, err := apiOf(t, p, tenantKey).ListSessions(ctx, client.ListOptions{})
			e, ok := client.AsError(err)
			return ok && e.Status == 403 && e.Code == "tenant_suspended"
		}
	}
	require.Eventually(t, refused(b), time.Second, 20*time.Millisecond, "the other process refuses the suspended tenant's key within a second")
	require.Eventually(t, refused(a), time.Second, 20*time.Millisecond)
	_, err = apiOf(t, b, tenantKey).GetAuditLog(ctx, 0, 0)
	e, _ = client.AsError(err)
	require.Equal(t, "tenant_suspended", e.Code, "on every route")

	_, err = operator.ResumeTenant(ctx, "acme")
	require.NoError(t, err)
	var last error
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, last = apiOf(t, b, tenantKey).ListSessions(ctx, client.ListOptions{}); last == nil {
			break
		}
	}
	require.NoError(t, last, "resumed, the tenant is served again within a second")
}

// TestTheCommandsActTheSameThroughTheOperatorAPI: the tenant and key
// commands with -api print what they print against the database (ids,
// secrets and times aside), and act as the operator key in the audit log.
func TestTheCommandsActTheSameThroughTheOperatorAPI(t *testing.T) {
	t.Parallel()
	base := map[string]string{"MNEMOS_DATABASE_URL": pgtest.URL(t), "MNEMOS_HTTP_ADDR": "127.0.0.1:0", "MNEMOS_NATS_STORE_DIR": t.TempDir()}
	ctx := context.Background()
	cmd := func(vars map[string]string, args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, env(vars), &out, io.Discard)
		return out.String(), err
	}
	out, err := cmd(base, "operator-key", "create", "-name", "ops")
	require.NoError(t, err)
	secret := regexp.MustCompile(`secret (mnmop_\S+)`).FindStringSubmatch(out)
	opID := regexp.MustCompile(`operator key (op_[0-9a-f]{16})`).FindStringSubmatch(out)
	require.NotNil(t, secret, out)
	p := start(t, base, "-target=all")

	_, err = cmd(base, "tenant", "list", "-api", p.admin)
	require.ErrorContains(t, err, operatorKeyEnv, "-api wants the operator key")
	withKey := maps.Clone(base)
	withKey[operatorKeyEnv] = secret[1]
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, []byte("sk-upstream\n"), 0o600))

	// script runs the same commands for tenant, with extra (-api URL, or
	// nothing) after each subcommand, and returns their outputs.
	script := func(tenant string, extra ...string) []string {
		var outs []string
		do := func(args ...string) string {
			t.Helper()
			full := append(append(args[:2:2], extra...), args[2:]...)
			out, err := cmd(withKey, full...)
			require.NoError(t, err, "%v", full)
			outs = append(outs, out)
			return out
		}
		do("tenant", "create", tenant)
		made := do("key", "create", "-name", "ci", "-scopes", "ingest,read", "-expires", "720h", tenant)
		id := regexp.MustCompile(`key (key_[0-9a-f]{16})`).FindStringSubmatch(made)[1]
		rotated := do("key", "rotate", "-overlap", "0", tenant, id)
		do("key", "revoke", tenant, regexp.MustCompile(`key (key_[0-9a-f]{16})`).FindStringSubmatch(rotated)[1])
		do("key", "list", tenant)
		do("tenant", "settings", tenant, `{"tokens": {"auto_compact_percent": 80}}`)
		do("tenant", "settings", tenant)
		do("tenant", "upstream", "-provider", "openai", "-url", "https://oai.example/v1", "-key-file", keyFile, tenant)
		do("tenant", "upstream", "-provider", "openai", "-clear", tenant)
		do("tenant", "suspend", tenant)
		do("tenant", "resume", tenant)
		do("tenant", "delete", "-yes", tenant)
		return outs
	}
	normal := strings.NewReplacer("globex", "T", "acme", "T")
	masks := []*regexp.Regexp{
		regexp.MustCompile(`key_[0-9a-f]{16}`), regexp.MustCompile(`mnm_\S+`),
		regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`), regexp.MustCompile(`created by mnemos tenant create|the tenant's first key`),
		regexp.MustCompile(`[ \t]+`),
	}
	mask := func(outs []string) []string {
		for i, o := range outs {
			o = normal.Replace(o)
			for _, m := range masks {
				o = m.ReplaceAllString(o, "_")
			}
			outs[i] = o
		}
		return outs
	}
	// The audit log is read before the tenants are erased.
	db := mask(script("globex"))
	api := mask(script("acme", "-api", p.admin))
	// Against the database the delete leaves the streams' purge to a
	// gateway's erasure sweep, and says so; through the API a running
	// mnemos purges them at once.
	const pending = "its_events_in_the_NATS_streams_are_not_purged_yet"
	last := len(db) - 1
	cut := strings.Index(db[last], pending)
	require.Positive(t, cut, "the delete against the database says the streams are left to purge: %q", db[last])
	db[last] = db[last][:cut]
	require.Equal(t, db, api)

	records, err := client.NewAdmin(p.admin, secret[1]).GetAuditLog(ctx, "acme", 0, 0)
	require.NoError(t, err)
	require.NotEmpty(t, records.Records)
	for _, r := range records.Records {
		require.Equal(t, "operator:"+opID[1], r.Actor, "%s", r.Action)
	}
	records, err = client.NewAdmin(p.admin, secret[1]).GetAuditLog(ctx, "globex", 0, 0)
	require.NoError(t, err)
	for _, r := range records.Records {
		require.Equal(t, cliActor, r.Actor, "%s", r.Action)
	}
	out, err = cmd(withKey, "tenant", "list", "-api", p.admin)
	require.NoError(t, err)
	require.Contains(t, out, "dev ", "the development tenant stays")
	require.NotContains(t, out, "acme")
}
