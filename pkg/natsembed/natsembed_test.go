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

func TestStartJetStream(t *testing.T) {
	t.Parallel()
	s := start(t, natsembed.Options{})

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
	a := start(t, natsembed.Options{})
	b := start(t, natsembed.Options{})
	require.NotEqual(t, a.ClientURL(), b.ClientURL())
	require.NotContains(t, a.ClientURL(), ":4222")

	dir := a.StoreDir()
	require.DirExists(t, dir)
	a.Shutdown()
	require.NoDirExists(t, dir, "a temporary store is removed on Shutdown")
}

func TestStoreDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := natsembed.Start(natsembed.Options{StoreDir: dir, MaxPayload: 1 << 20})
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
	s := start(t, natsembed.Options{ConfigFile: conf, MaxPayload: 1 << 20})

	_, err := nats.Connect(s.ClientURL())
	require.ErrorIs(t, err, nats.ErrAuthorization, "the file's users are required")
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("svc", "pw"))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.EqualValues(t, 1<<20, nc.MaxPayload(), "the options win over the file")

	_, err = natsembed.Start(natsembed.Options{ConfigFile: filepath.Join(t.TempDir(), "missing.conf")})
	require.Error(t, err)
}
