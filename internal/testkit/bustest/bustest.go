// Package bustest gives tests a real JetStream bus.
//
// When MNEMOS_TEST_NATS_URL is set, tests share that server, each confined
// to a namespace of its own whose streams are deleted when the test ends.
// Otherwise, when a Docker engine answers, tests share a NATS container the
// same way; failing that, each test starts an embedded server listening on a
// free loopback port with generated credentials, shut down when it ends.
package bustest

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	tcnats "github.com/testcontainers/testcontainers-go/modules/nats"

	"github.com/mnemos-ai/mnemos/internal/testkit/testenv"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/natsembed"
)

// EnvURL names the variable pointing tests at a shared NATS server.
const EnvURL = testenv.NATSURLVar

// timeout bounds setup and cleanup calls.
const timeout = 10 * time.Second

// New returns a bus for t with the Mnemos streams in place. It is closed
// when t ends.
func New(t testing.TB) *bus.Bus {
	t.Helper()
	return Connect(t, Config(t))
}

// Config returns the configuration New uses: the shared server with a fresh
// namespace, or a server of t's own. Tests adjust it (a TracerProvider, say)
// and pass it to Connect.
func Config(t testing.TB) bus.Config {
	t.Helper()
	cfg := bus.Config{Name: "bustest", Logger: Logger(t)}
	if url := sharedURL(t); url != "" {
		cfg.URL = url
		cfg.Namespace = "t" + strings.ToLower(rand.Text()[:12])
		return cfg
	}
	cfg.URL = URL(t)
	return cfg
}

// container is a NATS container shared by the tests of this process; the
// reaper removes it when the process ends.
var container = sync.OnceValues(func() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := tcnats.Run(ctx, "nats:2.11-alpine")
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx)
})

// sharedURL is the server tests share: the one named by the environment, or
// a container when Docker answers. Empty means each test embeds its own.
func sharedURL(t testing.TB) string {
	if url := os.Getenv(EnvURL); url != "" {
		return url
	}
	if !testenv.DockerAvailable() {
		return ""
	}
	url, err := container()
	require.NoError(t, err, "starting a NATS container")
	return url
}

// URL returns the shared server (see sharedURL) when there is one, or else the URL of an embedded
// server started for t.
func URL(t testing.TB) string {
	t.Helper()
	if url := sharedURL(t); url != "" {
		return url
	}
	// A port, unlike mnemos -target=all's in-process server: tests hand the
	// URL to child processes. Only on loopback, with the generated
	// credentials in the URL.
	s, err := natsembed.Start(natsembed.Options{Listen: true})
	require.NoError(t, err)
	t.Cleanup(s.Shutdown)
	return s.ClientURL()
}

// Connect connects with cfg and ensures the streams. When t ends it deletes
// the streams of cfg's namespace, if it has one, and closes the bus.
func Connect(t testing.TB, cfg bus.Config) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	b, err := bus.Connect(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if cfg.Namespace != "" {
			for _, name := range []string{bus.StreamTurns, bus.StreamEvents, bus.StreamDeadLetter} {
				err := b.JetStream().DeleteStream(ctx, b.StreamName(name))
				if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
					t.Errorf("bustest: delete stream %s: %v", b.StreamName(name), err)
				}
			}
		}
		if err := b.Close(ctx); err != nil {
			t.Errorf("bustest: close bus: %v", err)
		}
	})
	require.NoError(t, b.EnsureStreams(ctx))
	return b
}

// Run starts a runner and stops it when t ends, before the bus closes.
func Run(t testing.TB, b *bus.Bus, spec bus.ConsumerSpec, h bus.Handler) *bus.Runner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	r, err := b.Run(ctx, spec, h)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("bustest: stop runner %s: %v", spec.Durable, err)
		}
	})
	return r
}

// Logger returns a logger writing to t's output until t ends; lines logged
// later, by goroutines that outlive the test, are dropped.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{w: t.Output()}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testWriter forwards to a test's output until closed.
type testWriter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return len(p), nil
	}
	return w.w.Write(p)
}

func (w *testWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
}
