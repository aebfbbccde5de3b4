package natsauth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/internal/testkit/telemetrytest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/natsembed"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
	"github.com/mnemos-ai/mnemos/services/natsauth"
)

// harness is an embedded NATS server whose auth callout the service
// answers, with the keys of a database of the test's own.
type harness struct {
	st      *store.Store
	ns      *natsembed.Server
	bus     *bus.Bus
	metrics *telemetrytest.Reader
}

// externalConfig is the configuration docs/tenant-isolation.md gives for
// a nats-server of its own, the issuer's public key put in.
const externalConfig = `authorization {
  users = [
    { user: "mnemos", password: "mnemos-secret" }   # the services
  ]
  auth_callout {
    issuer: "ISSUER"                  # the public key of MNEMOS_NATS_AUTH_CALLOUT's seed
    auth_users: [ "mnemos", "sys" ]   # connect without asking: the services, which answer
  }
}
# Optional: a system account's user (MNEMOS_NATS_SYSTEM_URL) closes a revoked key's connections.
accounts { SYS: { users: [ { user: "sys", password: "sys-secret" } ] } }
system_account: SYS
`

func setup(t *testing.T) *harness { return setupWith(t, false) }

// setupWith starts the server embedded with its auth callout (Options),
// or, when external, configured by externalConfig and without closing
// connections (as for a server of its own).
func setupWith(t *testing.T, external bool) *harness {
	t.Helper()
	ctx := context.Background()
	issuer, err := nkeys.CreateAccount()
	require.NoError(t, err)
	pub, err := issuer.PublicKey()
	require.NoError(t, err)
	opts := natsembed.Options{Listen: true, AuthCalloutIssuer: pub}
	if external {
		opts.AuthCalloutIssuer = ""
		opts.ConfigFile = filepath.Join(t.TempDir(), "nats.conf")
		require.NoError(t, os.WriteFile(opts.ConfigFile, []byte(strings.Replace(externalConfig, "ISSUER", pub, 1)), 0o600))
	}
	ns, err := natsembed.Start(opts)
	require.NoError(t, err)
	t.Cleanup(ns.Shutdown)

	// The services connect as an auth user, which needs no callout: the
	// generated one, or the configuration's.
	url := ns.ClientURL()
	if external {
		url = "nats://mnemos:mnemos-secret@" + ns.Addr()
	}
	b, err := bus.Connect(ctx, bus.Config{URL: url, Name: "mnemos-test", Logger: bustest.Logger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	require.NoError(t, b.EnsureStreams(ctx))

	h := &harness{st: pgtest.New(t), ns: ns, bus: b, metrics: telemetrytest.New(t)}
	for _, tenant := range []string{"acme", "globex"} {
		require.NoError(t, h.st.EnsureTenant(ctx, tenant, tenant))
	}
	keys, err := httpapi.NewKeys(httpapi.KeysConfig{CacheTTL: 30 * time.Second}, h.st, nil, bustest.Logger(t), h.metrics.Meter())
	require.NoError(t, err)
	cfg := natsauth.DefaultConfig()
	cfg.Issuer = issuer
	var conns natsauth.Conns = ns
	if external {
		sys, err := nats.Connect("nats://sys:sys-secret@"+ns.Addr(), nats.Name("mnemos-test-system"))
		require.NoError(t, err)
		t.Cleanup(sys.Close)
		conns = natsauth.NewSystemConns(sys)
	}
	svc, err := natsauth.New(cfg, keys, conns, b, bustest.Logger(t), h.metrics.Meter())
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { keys.Listen(runCtx) })
	wg.Go(func() { _ = svc.Run(runCtx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return h
}

// key makes a key of tenant with scopes and returns its id and secret.
func (h *harness) key(t *testing.T, tenant string, scopes ...string) (string, string) {
	t.Helper()
	k, secret, err := h.st.CreateAPIKey(context.Background(), tenant, store.NewAPIKey{Name: "nats", Scopes: scopes}, "test")
	require.NoError(t, err)
	return k.ID, secret
}

// publisher is a tenant's backend on NATS, connected with an API key.
type publisher struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	closed chan struct{}
	bustest.Refusals
}

// dial connects to the server's port as a tenant's backend does, with key
// as the password; it does not reconnect, so a connection the server
// closes stays closed.
func (h *harness) dial(tenant, key string, p *publisher) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.UserInfo(tenant, key), nats.CustomInboxPrefix(natsauth.InboxPrefix(tenant)), nats.NoReconnect(),
		nats.Timeout(5 * time.Second),
	}
	if p != nil {
		opts = append(opts,
			nats.ClosedHandler(func(*nats.Conn) { close(p.closed) }), nats.ErrorHandler(p.Handler))
	}
	return nats.Connect("nats://"+h.ns.Addr(), opts...)
}

func (h *harness) connect(t *testing.T, tenant, key string) *publisher {
	t.Helper()
	p := &publisher{closed: make(chan struct{})}
	nc, err := h.dial(tenant, key, p)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	p.nc = nc
	p.js, err = jetstream.New(nc)
	require.NoError(t, err)
	return p
}

// refused reports whether a connection with key is refused: it is closed
// at once when it is not.
func (h *harness) refused(tenant, key string) bool {
	nc, err := h.dial(tenant, key, nil)
	if err == nil {
		nc.Close()
	}
	return errors.Is(err, nats.ErrAuthorization)
}

// closedBy reports whether the server closed the connection by deadline.
func (p *publisher) closedBy(deadline time.Time) bool {
	select {
	case <-p.closed:
		return true
	case <-time.After(time.Until(deadline)):
	}
	select {
	case <-p.closed:
		return true
	default:
		return false
	}
}

// stored counts the messages of the turn stream on subjects of tenant.
func (h *harness) stored(t *testing.T, tenant string) int {
	t.Helper()
	ctx := context.Background()
	stream, err := h.bus.JetStream().Stream(ctx, h.bus.StreamName(bus.StreamTurns))
	require.NoError(t, err)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(h.bus.Subject(bus.KindTurnCompleted, tenant, ">")))
	require.NoError(t, err)
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

// TestKeysLetPublishersIntoTheirTenantsSubjects: a tenant's key with
// ingest connects and publishes on its tenant's turn subjects, and on no
// other tenant's; a key without ingest, an unknown key and no key are
// refused.
func TestKeysLetPublishersIntoTheirTenantsSubjects(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	_, ingest := h.key(t, "acme", store.ScopeIngest)
	_, readOnly := h.key(t, "acme", store.ScopeRead)

	acme := h.connect(t, "acme", ingest)
	ack, err := acme.js.Publish(ctx, h.bus.Subject(bus.KindTurnCompleted, "acme", "s1"), []byte(`{}`), jetstream.WithMsgID("acme:s1-1"))
	require.NoError(t, err)
	require.Equal(t, h.bus.StreamName(bus.StreamTurns), ack.Stream)
	require.Equal(t, 1, h.stored(t, "acme"))

	globex := h.bus.Subject(bus.KindTurnCompleted, "globex", "s1")
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = acme.js.Publish(pctx, globex, []byte(`{}`), jetstream.WithMsgID("globex:s1-1"))
	require.Error(t, err, "no ack for a publish on another tenant's subject")
	require.Eventually(t, func() bool { return acme.Refused(globex) }, 10*time.Second, 20*time.Millisecond,
		"the server refuses acme's key on globex's subject")
	require.Zero(t, h.stored(t, "globex"))
	sub, err := acme.nc.SubscribeSync(h.bus.Subject(bus.KindTurnCompleted, "acme", ">"))
	require.NoError(t, err)
	require.NoError(t, acme.nc.Flush())
	require.Eventually(t, func() bool { return acme.Refused(sub.Subject) }, 10*time.Second, 20*time.Millisecond,
		"the key may not read even its own tenant's turns")

	for name, key := range map[string]string{"a key without ingest": readOnly, "an unknown key": store.NewSecret(), "no key": ""} {
		require.True(t, h.refused("acme", key), "%s is refused", name)
	}
	require.Equal(t, int64(1), h.metrics.Sum("mnemos.nats_auth.requests", "outcome", "missing_scope"))
	require.Equal(t, int64(1), h.metrics.Sum("mnemos.nats_auth.requests", "outcome", "unknown"))
	require.Equal(t, int64(1), h.metrics.Sum("mnemos.nats_auth.requests", "outcome", "no_key"))
}

// TestRevokedKeyIsRefusedAndItsConnectionsClosed: once a key is revoked
// (or its tenant suspended), its next connection is refused and its open
// ones end, within a second; another key's connection stays.
func TestRevokedKeyIsRefusedAndItsConnectionsClosed(t *testing.T) {
	t.Parallel()
	h := setup(t)
	ctx := context.Background()
	id, secret := h.key(t, "acme", store.ScopeIngest)
	_, other := h.key(t, "acme", store.ScopeIngest)
	_, globexKey := h.key(t, "globex", store.ScopeIngest)
	open := h.connect(t, "acme", secret)
	stays := h.connect(t, "acme", other)
	globex := h.connect(t, "globex", globexKey)

	_, err := h.st.RevokeAPIKey(ctx, "acme", id, "test")
	require.NoError(t, err)
	deadline := time.Now().Add(time.Second)
	require.Eventually(t, func() bool { return h.refused("acme", secret) }, time.Second, 10*time.Millisecond,
		"the revoked key is refused within a second")
	require.True(t, open.closedBy(deadline), "the revoked key's open connection ends within a second")
	_, err = stays.js.Publish(ctx, h.bus.Subject(bus.KindTurnCompleted, "acme", "s2"), []byte(`{}`), jetstream.WithMsgID("acme:s2-1"))
	require.NoError(t, err, "another key of the tenant publishes on")
	require.Positive(t, h.metrics.Sum("mnemos.nats_auth.closed", "", ""))

	_, err = h.st.SuspendTenant(ctx, "globex", true, "test")
	require.NoError(t, err)
	require.True(t, globex.closedBy(time.Now().Add(time.Second)), "a suspended tenant's connection ends within a second")
	require.True(t, h.refused("globex", globexKey), "a suspended tenant's key is refused")
	require.False(t, stays.nc.IsClosed(), "acme's other key is untouched")
}

// TestExternalServerConfiguration: a nats-server configured as
// docs/tenant-isolation.md says lets a key with ingest publish on its
// tenant's subjects; once the key is revoked its next connection is
// refused and its open one closed, through the system account, within a
// second.
func TestExternalServerConfiguration(t *testing.T) {
	t.Parallel()
	h := setupWith(t, true)
	ctx := context.Background()
	id, secret := h.key(t, "acme", store.ScopeIngest)
	acme := h.connect(t, "acme", secret)
	_, other := h.key(t, "acme", store.ScopeIngest)
	stays := h.connect(t, "acme", other)
	_, err := acme.js.Publish(ctx, h.bus.Subject(bus.KindTurnCompleted, "acme", "s1"), []byte(`{}`), jetstream.WithMsgID("acme:s1-1"))
	require.NoError(t, err)
	require.Equal(t, 1, h.stored(t, "acme"))
	require.True(t, h.refused("acme", store.NewSecret()))

	_, err = h.st.RevokeAPIKey(ctx, "acme", id, "test")
	require.NoError(t, err)
	deadline := time.Now().Add(time.Second)
	require.Eventually(t, func() bool { return h.refused("acme", secret) }, time.Second, 10*time.Millisecond,
		"the revoked key is refused within a second")
	require.True(t, acme.closedBy(deadline), "the revoked key's open connection ends within a second")
	require.False(t, stays.nc.IsClosed(), "another key's connection stays")
}
