package dreamer_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/dreamer"
)

// The environment of a dreamer run as a child process of the test binary.
const (
	childHolder    = "MNEMOS_DREAMER_CHILD_HOLDER"
	childDB        = "MNEMOS_DREAMER_CHILD_DB"
	childNATS      = "MNEMOS_DREAMER_CHILD_NATS"
	childNamespace = "MNEMOS_DREAMER_CHILD_NAMESPACE"
	childLLM       = "MNEMOS_DREAMER_CHILD_LLM"
)

func TestMain(m *testing.M) {
	if os.Getenv(childHolder) != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// runChild is a dreamer process: it scans and runs dreams until it is
// stopped — by a signal, or killed outright.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("holder", os.Getenv(childHolder))
	fail := func(err error) int {
		log.Error("dreamer child", "err", err)
		return 1
	}
	st, err := store.Open(ctx, store.Config{URL: os.Getenv(childDB), MaxConns: 4})
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	b, err := bus.Connect(ctx, bus.Config{URL: os.Getenv(childNATS), Namespace: os.Getenv(childNamespace), Name: "dreamer-child", Logger: log})
	if err != nil {
		return fail(err)
	}
	defer b.Close(context.WithoutCancel(ctx)) //nolint:errcheck // the process is ending
	if err := b.EnsureStreams(ctx); err != nil {
		return fail(err)
	}
	settings, err := tenantcfg.NewCache(tenantcfg.Defaults(), st.TenantSettings, 100*time.Millisecond)
	if err != nil {
		return fail(err)
	}
	provider, err := anthropic.New(anthropic.Config{APIKey: "test-key", BaseURL: os.Getenv(childLLM)})
	if err != nil {
		return fail(err)
	}
	cfg := dreamer.DefaultConfig()
	cfg.ScanEvery, cfg.Heartbeat, cfg.Holder = 100*time.Millisecond, 100*time.Millisecond, os.Getenv(childHolder)
	svc, err := dreamer.New(cfg, st, b, settings, provider, log, nil, dreamer.Options{})
	if err != nil {
		return fail(err)
	}
	if err := svc.Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// child is a dreamer running in a process of its own.
type child struct {
	holder string
	cmd    *exec.Cmd
	out    *lockedBuffer
	done   chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startChild runs a dreamer named holder in a child process until the test
// ends or it is killed.
func (h *harness) startChild(holder, llmURL string) *child {
	h.t.Helper()
	c := &child{holder: holder, out: &lockedBuffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$") //nolint:gosec // the test binary itself
	c.cmd.Env = append(os.Environ(),
		childHolder+"="+holder, childDB+"="+h.dbURL, childNATS+"="+h.busCfg.URL,
		childNamespace+"="+h.busCfg.Namespace, childLLM+"="+llmURL)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	require.NoError(h.t, c.cmd.Start())
	go func() {
		_ = c.cmd.Wait() // killed on purpose, or stopped at the end
		close(c.done)
	}()
	h.t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if h.t.Failed() {
			h.t.Logf("dreamer %s said:\n%s", holder, c.out.String())
		}
	})
	return c
}

// kill stops the process outright: no cleanup of any kind runs.
func (c *child) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Kill())
	<-c.done
}

// TestTwoDreamersRaceAndKilledRunsRollBack: two dreamer processes race for
// one scope and one runs; the other finds the lease held. The runner is
// killed outright mid-run (its model call hanging): its lease stays until
// it runs out and the scope's consolidation time does not move. Then the
// other process takes the scope over (the dead run's dream ends failed) and
// runs it; that run is killed through the API of this process and stops at
// once, applying nothing, freeing the lease, the time still unmoved. The
// next scan runs the scope again and completes it, moving the time.
func TestTwoDreamersRaceAndKilledRunsRollBack(t *testing.T) {
	t.Parallel()
	h := setup(t, `{"dreaming": {"min_hours": 1, "min_sessions": 1, "scan_interval_seconds": 0.2, "lease_stale_seconds": 3}}`)
	ctx := context.Background()
	for i := range 3 {
		h.seed(fmt.Sprintf("m-%d", i), fmt.Sprintf("memory number %d", i), "body")
	}
	h.session("s1", map[string]string{"user": "u-42"})
	initial := time.Now().Add(-2 * time.Hour).UTC().Truncate(time.Microsecond)
	h.consolidatedAt(initial)
	var hang atomic.Bool
	hang.Store(true)
	srv := llmtest.NewAnthropicServer(t, func(r llmtest.Request) llmtest.Reply {
		switch {
		case hang.Load():
			return llmtest.Hang()
		case len(r.Messages) == 1:
			return llmtest.Reply{ToolCalls: []llm.ToolCall{toolCall(memtools.ToolWrite, map[string]string{
				"name": "summary", "description": "What the sessions settled", "type": "project", "body": "Settled.",
			})}}
		}
		return llmtest.Text("Noted what the sessions settled.")
	})
	log := h.watch()
	children := map[string]*child{}
	for _, holder := range []string{"dreamer-a", "dreamer-b"} {
		children[holder] = h.startChild(holder, srv.URL)
	}

	// One of them takes the scope; its model call hangs.
	var first store.Dream
	require.Eventually(t, func() bool {
		ds := h.dreams()
		if len(ds) == 0 {
			return false
		}
		first = ds[0]
		return first.Status == "running" && srv.Calls() >= 1
	}, 60*time.Second, 20*time.Millisecond)
	winner := children[first.Holder]
	require.NotNil(t, winner, "held by %q", first.Holder)
	var loser *child
	for holder, c := range children {
		if holder != first.Holder {
			loser = c
		}
	}
	require.Never(t, func() bool { return len(h.dreams()) > 1 }, time.Second, 50*time.Millisecond,
		"the other dreamer keeps scanning and finds the lease held")

	// A hard stop: the process is killed; nothing of it cleans up.
	winner.kill(t)
	s := h.scopeState()
	require.Equal(t, first.Holder, s.LeaseHolder, "the lease stays until it runs out")
	require.Equal(t, first.DreamID, s.LeaseDreamID)
	require.True(t, initial.Equal(s.LastConsolidatedAt), "the consolidation time did not move")

	// The lease runs out; the other process takes the scope over and runs it.
	var second store.Dream
	require.Eventually(t, func() bool {
		ds := h.dreams()
		second = ds[0]
		return len(ds) == 2 && second.Status == "running" && srv.Calls() >= 2
	}, 60*time.Second, 20*time.Millisecond)
	require.Equal(t, loser.holder, second.Holder)
	dead := h.dream(first.DreamID, "failed")
	require.Contains(t, dead.Error, "lease ran out")
	require.Equal(t, []string{"starting", "failed"}, states(log.of(t, first.DreamID, "failed")))
	s = h.scopeState()
	require.True(t, initial.Equal(s.LastConsolidatedAt), "the consolidation time is where it was")

	// Killed through the API of this process, the run in the other stops.
	hang.Store(false) // what runs next gets answers
	var body api.Dream
	require.Equal(t, http.StatusAccepted, h.call(http.MethodPost, "/v1/dreams/"+second.DreamID+"/kill", &body))
	require.True(t, body.KillRequested)
	killed := h.dream(second.DreamID, "killed")
	require.Equal(t, "killed", killed.Error)
	require.Empty(t, killed.Written)
	require.Equal(t, []string{"starting", "killed"}, states(log.of(t, second.DreamID, "killed")))
	_, err := h.memories.Get(ctx, tenant, scope, "summary")
	require.ErrorIs(t, err, memory.ErrNotFound, "nothing of a killed run is applied")

	// The next scan runs the scope again, to the end.
	var third store.Dream
	require.Eventually(t, func() bool {
		ds := h.dreams()
		third = ds[0]
		return len(ds) == 3 && third.Status == "completed"
	}, 60*time.Second, 20*time.Millisecond)
	require.Equal(t, loser.holder, third.Holder)
	s = h.scopeState()
	require.True(t, s.LastConsolidatedAt.After(initial), "a completed consolidation moves the time")
	require.Empty(t, s.LeaseHolder)
	m, err := h.memories.Get(ctx, tenant, scope, "summary")
	require.NoError(t, err)
	revs, err := h.memories.Revisions(ctx, tenant, scope, m.Name)
	require.NoError(t, err)
	require.Equal(t, memory.ActorDreamer, revs[0].Change.Actor)
	require.Equal(t, []string{"starting", "updating", "completed"}, states(log.of(t, third.DreamID, "completed")))
	require.Never(t, func() bool { return len(h.dreams()) > 3 }, 500*time.Millisecond, 50*time.Millisecond,
		"consolidated within the hour, the scope is left alone")
}

// TestAStoppingDreamerEndsItsRunFailed: a dreamer shut down mid-run (its
// context cancelled, the way a deploy stops it) ends the dream failed,
// applying nothing, frees the lease at once and leaves the consolidation
// time where it was.
func TestAStoppingDreamerEndsItsRunFailed(t *testing.T) {
	t.Parallel()
	h := setup(t, `{"dreaming": {"min_sessions": 0}}`)
	h.seed("a", "about a", "body")
	provider, srv := scripted(t, func(llmtest.Request) llmtest.Reply { return llmtest.Hang() })
	svc := h.newService(fast("stopping"), provider, dreamer.Options{})
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	var d store.Dream
	require.Eventually(t, func() bool {
		ds := h.dreams()
		if len(ds) == 1 {
			d = ds[0]
		}
		return d.Status == "running" && srv.Calls() == 1
	}, 30*time.Second, 20*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("the dreamer did not stop")
	}
	stopped := h.dream(d.DreamID, "failed")
	require.Contains(t, stopped.Error, "the dreamer stopped")
	s := h.scopeState()
	require.Empty(t, s.LeaseHolder, "the lease is freed, not left to run out")
	require.True(t, s.LastConsolidatedAt.IsZero(), "the consolidation time did not move")
	require.Eventually(t, func() bool { return h.metrics.Sum("mnemos.dreams", "outcome", "failed") == 1 }, 10*time.Second, 10*time.Millisecond)
}
