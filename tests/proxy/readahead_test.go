package proxy_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/bus/bustest"
	"github.com/mnemos-ai/mnemos/pkg/llm/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/pkg/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// snapshotReads closes seen when, once armed, a batch reads the context
// snapshot of session: the last statement of the proxy's context read.
type snapshotReads struct {
	session string
	armed   atomic.Bool
	once    sync.Once
	seen    chan struct{}
}

func (s *snapshotReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (s *snapshotReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *snapshotReads) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (s *snapshotReads) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	if s.armed.Load() && d.Err == nil && strings.Contains(d.SQL, "ContextSnapshotGet") &&
		len(d.Args) == 2 && d.Args[1] == s.session {
		s.once.Do(func() { close(s.seen) })
	}
}

func (s *snapshotReads) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// heldBody sends the first bytes of a request's body, then holds the rest
// until release is closed.
type heldBody struct {
	io.ReadCloser
	first   int
	release <-chan struct{}
}

func (b *heldBody) Read(p []byte) (int, error) {
	if b.first > 0 {
		n, err := b.ReadCloser.Read(p[:min(len(p), b.first)])
		b.first -= n
		return n, err
	}
	<-b.release
	return b.ReadCloser.Read(p)
}

// A session named in a header has its context read while the request's
// body is still arriving: the read's round trip does not wait for the body.
func TestTheContextIsReadWhileTheBodyArrives(t *testing.T) {
	t.Parallel()
	reads := &snapshotReads{session: "early", seen: make(chan struct{})}
	st, err := store.Open(context.Background(), store.Config{URL: pgtest.URL(t), MaxConns: 16, Tracer: reads})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	up := upstream.Start(t, upstream.Config{Script: echo})
	m := startMnemosOn(t, st, bustest.New(t), up.URL, key)
	cv := converse(m.api.URL, key, "early")
	padding := strings.Repeat("a line of the user's long request ", 1_000) // 34 KB, many times the client's write buffer
	for i, text := range []string{"first " + padding, "second"} {
		_, err := cv.round(t, text)
		require.NoError(t, err)
		waitApplied(t, m.store, "early", int64(i+1)) // the second round's render leaves the session in the context cache
	}

	release := make(chan struct{})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	defer let()
	hold := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		r.Body = &heldBody{ReadCloser: r.Body, first: 16 << 10, release: release}
		return next(r)
	})
	reads.armed.Store(true)
	answered := make(chan error, 1)
	go func() {
		msgs := append(cv.msgs, userText("third"))
		got, err := cv.c.Messages.New(context.Background(), sdk.MessageNewParams{Model: model, MaxTokens: 256, Messages: msgs}, hold)
		if err == nil && (len(got.Content) != 1 || got.Content[0].Text != "noted") {
			err = io.ErrUnexpectedEOF
		}
		answered <- err
	}()
	select {
	case <-reads.seen:
	case err := <-answered:
		t.Fatalf("the round ended before its body was sent whole: %v", err)
	case <-time.After(10 * time.Second):
		let()
		t.Fatal("the context was not read until the body had arrived whole")
	}
	let()
	require.NoError(t, <-answered)
	waitApplied(t, m.store, "early", 3)
	require.Equal(t, []string{"first " + padding, "noted", "second", "noted", "third", "noted"}, storedTexts(t, m.store, "early"))
}
