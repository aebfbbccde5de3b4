// Package natsembed runs a NATS server with JetStream inside the current
// process. It backs the single-process install (mnemos -target=all), the
// benchmark and the tests.
//
// By default the server opens no port at all: only this process connects,
// through Server.InProcessConn, so no other local process can read or publish
// any tenant's turns. Options.Listen opens a TCP port as well, guarded by a
// user and password generated at start (ClientURL carries them).
// Options.AuthCalloutIssuer lets other clients on that port in as an
// authorization service decides (nats-server's auth callout).
package natsembed

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// DefaultMaxPayload is the largest message the server accepts unless
// Options.MaxPayload says otherwise.
const DefaultMaxPayload int32 = 8 << 20

// readyTimeout bounds how long Start waits for the server to accept clients.
const readyTimeout = 10 * time.Second

// generatedUser is the user of the credentials Start generates.
const generatedUser = "mnemos"

// Options configures an embedded server. The zero value is ready to use: no
// port, connections from this process only, and a temporary store.
type Options struct {
	// Listen opens a TCP client port on Host:Port. Unless ConfigFile sets
	// its own authorization, the port requires a user and password
	// generated at start, which only ClientURL gives out.
	Listen bool
	// Host is the interface to listen on, with Listen. Empty means 127.0.0.1.
	Host string
	// Port is the client port, with Listen. 0 picks a random free port.
	Port int
	// StoreDir is where JetStream keeps its files. Empty means a temporary
	// directory that Shutdown removes.
	StoreDir string
	// MaxPayload is the largest message the server accepts, in bytes.
	// 0 means DefaultMaxPayload.
	MaxPayload int32
	// Debug sends the server's own log lines, debug level included, to
	// Logger. Without it the server logs nothing.
	Debug bool
	// Logger receives the server's log lines when Debug is set.
	// Nil means slog.Default().
	Logger *slog.Logger
	// SyncInterval is how often JetStream fsyncs its files in the
	// background; 0 means the server's default (two minutes). SyncAlways
	// fsyncs after every write instead: what a single node needs for an
	// acknowledged publish to survive a machine's crash, at a cost in ingest.
	SyncInterval time.Duration
	SyncAlways   bool
	// ConfigFile, when set, is a nats-server configuration file (the format
	// of `nats-server -c`) read for its authorization: users and their
	// permissions. The fields above take precedence over what it says about
	// listening, JetStream and payloads.
	ConfigFile string
	// AuthCalloutIssuer, with Listen, is the public key of an account
	// ("A…") whose seed signs the answers to the server's authorization
	// requests (nats-server's auth callout, on the subject
	// AuthCalloutSubject): every client but the generated user is then
	// let in, with the permissions the answer gives, or refused, as that
	// service decides. The generated user connects without asking, and
	// is the one that answers. Not with a ConfigFile's authorization.
	AuthCalloutIssuer string
}

// AuthCalloutSubject is where the server asks who a client is, when
// Options.AuthCalloutIssuer is set.
const AuthCalloutSubject = server.AuthCalloutSubject

// GlobalAccount is the account of the generated user and of every client
// an auth callout lets in, the account whose JetStream the services use.
const GlobalAccount = server.DEFAULT_GLOBAL_ACCOUNT

// Server is a running embedded NATS server.
type Server struct {
	ns       *server.Server
	url      string // with the generated credentials, if any; empty without Listen
	addr     string // host:port of the client port; empty without Listen
	storeDir string
	tempDir  string // removed on Shutdown; empty when the caller owns StoreDir
	shutdown sync.Once
}

// Start starts a server and waits until it accepts clients. The caller must
// call Shutdown.
func Start(opts Options) (*Server, error) {
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	port := opts.Port
	if port == 0 {
		port = server.RANDOM_PORT
	}
	maxPayload := opts.MaxPayload
	if maxPayload == 0 {
		maxPayload = DefaultMaxPayload
	}

	s := &Server{}
	storeDir := opts.StoreDir
	if storeDir == "" {
		dir, err := os.MkdirTemp("", "mnemos-nats-*")
		if err != nil {
			return nil, fmt.Errorf("natsembed.Start: os.MkdirTemp: %w", err)
		}
		storeDir, s.tempDir = dir, dir
	}

	sopts := &server.Options{}
	if opts.ConfigFile != "" {
		fromFile, err := server.ProcessConfigFile(opts.ConfigFile)
		if err != nil {
			s.removeTempDir()
			return nil, fmt.Errorf("natsembed.Start: %w", err)
		}
		sopts = fromFile
	}
	sopts.ServerName = "mnemos-embedded"
	sopts.Host, sopts.Port = host, port
	// Without a port only this process's in-process connections reach the
	// server. The monitoring port stays closed either way (HTTPPort 0).
	sopts.DontListen = !opts.Listen
	if opts.AuthCalloutIssuer != "" {
		if err := authCalloutValid(opts, sopts); err != nil {
			s.removeTempDir()
			return nil, fmt.Errorf("natsembed.Start: %w", err)
		}
	}
	var user *url.Userinfo
	if opts.Listen && !hasAuthorization(sopts) {
		// A fresh password each start, never printed: a local process that
		// finds the port still cannot connect.
		sopts.Username, sopts.Password = generatedUser, rand.Text()
		user = url.UserPassword(sopts.Username, sopts.Password)
		if opts.AuthCalloutIssuer != "" {
			sopts.AuthCallout = &server.AuthCallout{Issuer: opts.AuthCalloutIssuer, Account: GlobalAccount, AuthUsers: []string{generatedUser}}
		}
	}
	sopts.MaxPayload = maxPayload
	sopts.JetStream, sopts.StoreDir = true, storeDir
	sopts.SyncInterval, sopts.SyncAlways = opts.SyncInterval, opts.SyncAlways
	sopts.NoSigs = true // the host process owns signal handling
	ns, err := server.NewServer(sopts)
	if err != nil {
		s.removeTempDir()
		return nil, fmt.Errorf("natsembed.Start: server.NewServer: %w", err)
	}
	s.ns = ns
	if opts.Debug {
		logger := opts.Logger
		if logger == nil {
			logger = slog.Default()
		}
		ns.SetLoggerV2(serverLogger{logger.With("component", "nats-server")}, true, false, false)
	}

	go ns.Start()
	if !ns.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("natsembed.Start: server not ready for connections within %s", readyTimeout)
	}
	if !ns.JetStreamEnabled() {
		s.Shutdown()
		return nil, errors.New("natsembed.Start: JetStream did not start")
	}

	s.storeDir = storeDir
	if !opts.Listen {
		return s, nil
	}
	addr, ok := ns.Addr().(*net.TCPAddr)
	if !ok {
		s.Shutdown()
		return nil, fmt.Errorf("natsembed.Start: unexpected listener address %v", ns.Addr())
	}
	s.addr = net.JoinHostPort(dialHost(host), strconv.Itoa(addr.Port))
	s.url = (&url.URL{Scheme: "nats", User: user, Host: s.addr}).String()
	return s, nil
}

// authCalloutValid checks Options.AuthCalloutIssuer against the rest.
func authCalloutValid(opts Options, fromFile *server.Options) error {
	switch {
	case !opts.Listen:
		return errors.New("an auth callout needs Listen: without a port no client asks to be let in")
	case hasAuthorization(fromFile):
		return errors.New("an auth callout with a configuration file's authorization: set it in the file (authorization { auth_callout { … } })")
	case !nkeys.IsValidPublicAccountKey(opts.AuthCalloutIssuer):
		return fmt.Errorf("auth callout issuer %q: want an account's public key (A…)", opts.AuthCalloutIssuer)
	}
	return nil
}

// hasAuthorization reports whether a configuration file set how clients
// authenticate; then its users are the ones that connect.
func hasAuthorization(o *server.Options) bool {
	return len(o.Users) > 0 || len(o.Nkeys) > 0 || o.Username != "" || o.Authorization != "" ||
		len(o.TrustedOperators) > 0 || len(o.TrustedKeys) > 0 || o.AuthCallout != nil
}

// StoreDir is the directory JetStream keeps its files in.
func (s *Server) StoreDir() string {
	return s.storeDir
}

// ClientURL is the URL clients of this process connect with. With Listen it
// is the port's, with the generated credentials, for example
// nats://mnemos:<password>@127.0.0.1:40211: a secret, never to be printed
// (Addr is the printable part). Without Listen it is empty: connect with
// InProcessConn (nats.InProcessServer).
func (s *Server) ClientURL() string {
	return s.url
}

// Addr is the client port's host:port, without credentials; empty without
// Listen.
func (s *Server) Addr() string {
	return s.addr
}

// InProcessConn opens a connection to the server from this process, with no
// port involved; it makes Server a nats.InProcessConnProvider.
func (s *Server) InProcessConn() (net.Conn, error) {
	conn, err := s.ns.InProcessConn()
	if err != nil {
		return nil, fmt.Errorf("natsembed: InProcessConn: %w", err)
	}
	return conn, nil
}

// CloseUser closes every open client connection of user (the name an auth
// callout gave it, or the one it connected with) and returns how many.
func (s *Server) CloseUser(user string) (int, error) {
	// One page: the connections of one user are far fewer than its limit.
	conns, err := s.ns.Connz(&server.ConnzOptions{Username: true, User: user, State: server.ConnOpen, Limit: 1 << 16})
	if err != nil {
		return 0, fmt.Errorf("natsembed: Connz: %w", err)
	}
	closed := 0
	for _, c := range conns.Conns {
		// A connection that closed meanwhile is not an error.
		if s.ns.DisconnectClientByID(c.Cid) == nil {
			closed++
		}
	}
	return closed, nil
}

// Shutdown stops the server, waits until it has stopped and removes the
// temporary store, if Start created one. It is safe to call more than once.
func (s *Server) Shutdown() {
	s.shutdown.Do(func() {
		if s.ns != nil {
			s.ns.Shutdown()
			s.ns.WaitForShutdown()
		}
		s.removeTempDir()
	})
}

func (s *Server) removeTempDir() {
	if s.tempDir == "" {
		return
	}
	// Best effort: a leftover directory under os.TempDir is harmless and
	// Shutdown has no caller to report it to.
	_ = os.RemoveAll(s.tempDir)
}

// dialHost turns a listen address into one a client can dial.
func dialHost(host string) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "127.0.0.1"
	}
	return host
}

// serverLogger adapts slog to the nats-server logger interface. Fatal lines
// are logged as errors: an embedded server must never exit the process.
type serverLogger struct {
	log *slog.Logger
}

func (l serverLogger) Noticef(format string, v ...any) { l.log.Info(fmt.Sprintf(format, v...)) }
func (l serverLogger) Warnf(format string, v ...any)   { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l serverLogger) Errorf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l serverLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l serverLogger) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l serverLogger) Fatalf(format string, v ...any) {
	l.log.Error(fmt.Sprintf(format, v...), "fatal", true)
}
