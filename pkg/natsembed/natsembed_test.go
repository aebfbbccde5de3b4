package natsembed_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/natsembed"
)

func start(t *testing.T, opts natsembed.Options) *natsembed.Server {
	t.Helper()
	s, err := natsembed.Start(opts)
	require.NoError(t, err)
	t.Cleanup(s.Shutdown)
	return s
}

// TestInProcessByDefault: the zero Options open no port; this process
// connects through InProcessConn and has JetStream.
func TestInProcessByDefault(t *testing.T) {
	t.Parallel()
	s := start(t, natsembed.Options{})
	require.Empty(t, s.Addr(), "no client port")
	require.Empty(t, s.ClientURL(), "no URL to dial")

	nc, err := nats.Connect("", nats.InProcessServer(s))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.EqualValues(t, natsembed.DefaultMaxPayload, nc.MaxPayload())
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	require.NoError(t, err)
	ack, err := js.Publish(ctx, "t.x", []byte("hello"))
	require.NoError(t, err)
	require.EqualValues(t, 1, ack.Sequence)
}

// TestListenRequiresTheGeneratedCredentials: with Listen, a client without
// the credentials (a raw CONNECT {}) is refused; ClientURL carries them and
// Addr does not.
func TestListenRequiresTheGeneratedCredentials(t *testing.T) {
	t.Parallel()
	s := start(t, natsembed.Options{Listen: true})
	require.NotEmpty(t, s.Addr())
	require.NotContains(t, s.Addr(), "@")

	_, err := nats.Connect("nats://" + s.Addr())
	require.ErrorIs(t, err, nats.ErrAuthorization, "no credentials, no connection")
	_, err = nats.Connect("nats://mnemos:guess@" + s.Addr())
	require.ErrorIs(t, err, nats.ErrAuthorization)

	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	nc.Close()
	// In-process clients present the same credentials.
	nc, err = nats.Connect(s.ClientURL(), nats.InProcessServer(s))
	require.NoError(t, err)
	nc.Close()

	other := start(t, natsembed.Options{Listen: true})
	require.NotEqual(t, s.ClientURL(), other.ClientURL(), "a password of its own each start")
}

func TestStartJetStream(t *testing.T) {
	t.Parallel()
	s := start(t, natsembed.Options{Listen: true})

	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.EqualValues(t, natsembed.DefaultMaxPayload, nc.MaxPayload())

	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	require.NoError(t, err)
	ack, err := js.Publish(ctx, "t.x", []byte("hello"))
	require.NoError(t, err)
	require.EqualValues(t, 1, ack.Sequence)
}

func TestPortsDiffer(t *testing.T) {
	t.Parallel()
	a := start(t, natsembed.Options{Listen: true})
	b := start(t, natsembed.Options{Listen: true})
	require.NotEqual(t, a.Addr(), b.Addr())
	require.NotContains(t, a.Addr(), ":4222")

	dir := a.StoreDir()
	require.DirExists(t, dir)
	a.Shutdown()
	require.NoDirExists(t, dir, "a temporary store is removed on Shutdown")
}

func TestStoreDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := natsembed.Start(natsembed.Options{Listen: true, StoreDir: dir, MaxPayload: 1 << 20})
	require.NoError(t, err)

	nc, err := nats.Connect(s.ClientURL())
	require.NoError(t, err)
	require.Equal(t, dir, s.StoreDir())
	require.EqualValues(t, 1<<20, nc.MaxPayload())
	nc.Close()

	s.Shutdown()
	s.Shutdown() // idempotent
	require.DirExists(t, dir, "a caller's StoreDir is kept")
}

func TestConfigFileAuthorization(t *testing.T) {
	t.Parallel()
	conf := filepath.Join(t.TempDir(), "nats.conf")
	require.NoError(t, os.WriteFile(conf, []byte(`authorization { users = [ { user: "svc", password: "pw" } ] }`), 0o600))
	s := start(t, natsembed.Options{Listen: true, ConfigFile: conf, MaxPayload: 1 << 20})

	require.NotContains(t, s.ClientURL(), "@", "no generated credentials besides the file's users")
	_, err := nats.Connect(s.ClientURL())
	require.ErrorIs(t, err, nats.ErrAuthorization, "the file's users are required")
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("svc", "pw"))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.EqualValues(t, 1<<20, nc.MaxPayload(), "the options win over the file")

	_, err = natsembed.Start(natsembed.Options{ConfigFile: filepath.Join(t.TempDir(), "missing.conf")})
	require.Error(t, err)
}
