package proxy_test

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// link is a TCP connection to a server that a test can cut: Mnemos reaches
// its Postgres or its NATS through it, and the test takes the server away
// (every connection closed, new ones refused) and brings it back, as a
// network partition or a restart would, while the server itself and the
// other tests using it carry on.
type link struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	up    bool
	conns map[net.Conn]struct{}
}

// newLink listens on loopback and forwards to target (host:port) until t ends.
func newLink(t *testing.T, target string) *link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &link{ln: ln, target: target, up: true, conns: map[net.Conn]struct{}{}}
	go l.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		l.cut()
	})
	return l
}

// linkTo makes a link to the server of rawURL (a postgres:// or nats://
// URL) and returns it with rawURL pointed at it.
func linkTo(t *testing.T, rawURL string) (*link, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	l := newLink(t, u.Host)
	u.Host = l.ln.Addr().String()
	return l, u.String()
}

func (l *link) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // the listener closed
		}
		go l.serve(c)
	}
}

// serve forwards one connection both ways while the link is up.
func (l *link) serve(c net.Conn) {
	if !l.track(c) {
		_ = c.Close()
		return
	}
	s, err := net.Dial("tcp", l.target)
	if err != nil || !l.track(s) {
		_ = c.Close()
		if s != nil {
			_ = s.Close()
		}
		return
	}
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	go pipe(s, c)
	pipe(c, s)
}

// track registers a connection of an up link; false when the link is cut.
func (l *link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.up {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

// cut closes every connection through the link and refuses new ones until restore.
func (l *link) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up = false
	for c := range l.conns {
		_ = c.Close()
	}
	clear(l.conns)
}

// restore lets connections through again.
func (l *link) restore() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.up = true
}
