// Package bus is Mnemos' event bus over NATS JetStream.
//
// Services never call each other: they publish events on subjects of the
// form "<kind>.<tenant>.<session>" and consume them with Run, which maps a
// handler's result to an acknowledgement, a delayed retry or a dead letter.
// Every publish carries a message id for deduplication and the W3C trace
// context in its headers, so a trace follows an event from producer to
// consumer.
//
// A Bus may be confined to a namespace (Config.Namespace), which prefixes
// every subject and stream name; tests sharing one server use it to stay
// apart. Functions that take a subject to publish on expect the full
// subject, namespace included (Bus.Subject builds it); a ConsumerSpec names
// streams and filters without the namespace.
package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// instrumentationName names the tracer of this package.
const instrumentationName = "github.com/mnemos-ai/mnemos/pkg/bus"

// Config configures a connection to the bus.
type Config struct {
	// URL of the NATS server(s), comma separated. Required unless
	// InProcess is set; then it may carry the credentials to present.
	URL string
	// InProcess, when set, is a NATS server running in this process
	// (natsembed.Server): the bus connects to it directly, through no port,
	// instead of dialling URL.
	InProcess nats.InProcessConnProvider
	// Name identifies the connection on the server (e.g. "mnemos-extractor").
	Name string
	// Namespace, when set, prefixes every subject ("<ns>.<subject>") and
	// every stream name ("<NS>_<name>"). Letters, digits, '_' and '-' only.
	Namespace string
	// TracerProvider creates the publish and process spans. Nil disables
	// tracing.
	TracerProvider trace.TracerProvider
	// Meter counts every runner's redeliveries, dead letters and handling
	// time, and reports each consumer's pending messages. Nil: not counted.
	Meter metric.Meter
	// ConsumerInfoInterval is how often a runner reads its consumer's
	// pending counts (DefaultConsumerInfoInterval).
	ConsumerInfoInterval time.Duration
	// Replicas is how many copies of each stream a NATS cluster keeps
	// (EnsureStreams). 0 or 1: one; 3 survives the loss of a server.
	Replicas int
	// Logger receives connection events and message outcomes. Nil means
	// slog.Default().
	Logger *slog.Logger
	// DuplicateWindow is how long the streams remember message ids to drop
	// a second publish of the same id (EnsureStreams). 0 means two minutes.
	DuplicateWindow time.Duration
	// AckWait is how long a publish waits for the stream's acknowledgement
	// before it fails and may be sent again (its message id makes a second
	// copy harmless). 0 means DefaultAckWait. An acknowledgement can be lost
	// for good: a node killed after it took the message, a reply dropped
	// while the connection moved to another node.
	AckWait time.Duration
	// AfterHandled, when set, is called with the consumer's durable name
	// after a handler succeeded and before its message is acknowledged: the
	// point where a crash leaves work committed but unacknowledged. It is a
	// test hook (pkg/faults); production leaves it nil.
	AfterHandled func(consumer string)
}

// Bus is a connection to JetStream. It is safe for concurrent use.
type Bus struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	ns     string
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	log    *slog.Logger
	closed chan struct{} // closed when the connection is closed for good

	metrics         *busMetrics
	infoEvery       time.Duration
	replicas        int
	duplicateWindow time.Duration
	ackWait         time.Duration
	afterHandled    func(consumer string)
}

// DefaultAckWait is how long a publish waits for its acknowledgement unless
// Config.AckWait says otherwise: the JetStream client's own default for a
// request without a deadline.
const DefaultAckWait = 5 * time.Second

// Connect connects to NATS and checks that JetStream is available. The
// connection reconnects forever, with backoff, until Close.
func Connect(ctx context.Context, cfg Config) (*Bus, error) {
	url := cfg.URL
	if url == "" && cfg.InProcess != nil {
		// nats.Connect wants a server URL even when it never dials one; this
		// one names what the connection goes to in its log lines.
		url = "nats://in-process"
	}
	if url == "" {
		return nil, errors.New("bus.Connect: URL is required")
	}
	if err := validNamespace(cfg.Namespace); err != nil {
		return nil, fmt.Errorf("bus.Connect: %w", err)
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "bus")

	if cfg.Replicas < 0 || cfg.Replicas > 5 {
		return nil, fmt.Errorf("bus.Connect: Replicas %d: want 1 to 5", cfg.Replicas)
	}
	infoEvery := cfg.ConsumerInfoInterval
	if infoEvery <= 0 {
		infoEvery = DefaultConsumerInfoInterval
	}

	b := &Bus{
		ns:        cfg.Namespace,
		tracer:    tp.Tracer(instrumentationName),
		prop:      propagation.TraceContext{},
		log:       logger,
		closed:    make(chan struct{}),
		infoEvery: infoEvery,
		replicas:  max(cfg.Replicas, 1),

		duplicateWindow: cfg.DuplicateWindow,
		ackWait:         cmp.Or(cfg.AckWait, DefaultAckWait),
		afterHandled:    cfg.AfterHandled,
	}
	if cfg.AckWait < 0 {
		return nil, fmt.Errorf("bus.Connect: AckWait %s: want 0 or more", cfg.AckWait)
	}
	if b.duplicateWindow <= 0 {
		b.duplicateWindow = DefaultDuplicateWindow
	}
	nc, err := nats.Connect(url,
		nats.InProcessServer(cfg.InProcess),
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(func(attempts int) time.Duration {
			return backoff(attempts, 100*time.Millisecond, 5*time.Second)
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				logger.Error("nats async error", "subject", sub.Subject, "err", err)
				return
			}
			logger.Error("nats async error", "err", err)
		}),
		nats.ClosedHandler(func(*nats.Conn) { close(b.closed) }),
	)
	if err != nil {
		return nil, fmt.Errorf("bus.Connect: nats.Connect: %w", err)
	}
	b.nc = nc

	// Without a timeout, an asynchronous publish whose acknowledgement is
	// lost waits forever, and so does whoever waits for it (the outbox
	// relay, holding its rows locked).
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(b.ackWait), jetstream.WithDefaultTimeout(b.ackWait))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus.Connect: jetstream.New: %w", err)
	}
	if err := awaitJetStream(ctx, js, logger); err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus.Connect: %w", err)
	}
	b.js = js
	b.metrics = newBusMetrics(cfg.Meter)
	return b, nil
}

// jetStreamWait bounds how long Connect waits for JetStream to answer. A
// cluster that just lost or regained a node elects its leaders for a few
// seconds, and drops the requests sent meanwhile: a process started then
// waits for it rather than exit.
const jetStreamWait = time.Minute

// awaitJetStream asks JetStream for the account's information until it
// answers, each try with its own short deadline, for at most jetStreamWait.
// An account without JetStream is an answer: it fails at once.
func awaitJetStream(ctx context.Context, js jetstream.JetStream, logger *slog.Logger) error {
	deadline := time.Now().Add(jetStreamWait)
	for attempt := 1; ; attempt++ {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.AccountInfo(tctx)
		cancel()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
			ctx.Err() != nil, time.Now().After(deadline):
			return fmt.Errorf("jetstream.AccountInfo: %w", err)
		}
		logger.Warn("JetStream does not answer yet; trying again", "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("jetstream.AccountInfo: %w", ctx.Err())
		case <-time.After(backoff(attempt, 200*time.Millisecond, 5*time.Second)):
		}
	}
}

// Close drains the connection, so buffered publishes and acknowledgements
// reach the server and subscriptions finish their pending messages, and waits
// until it is closed. Stop runners first. When ctx ends first the connection
// is closed at once and ctx's error returned.
func (b *Bus) Close(ctx context.Context) error {
	b.metrics.close()
	if err := b.nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		b.nc.Close()
		return fmt.Errorf("bus.Close: nats.Drain: %w", err)
	}
	select {
	case <-b.closed:
		return nil
	case <-ctx.Done():
		b.nc.Close()
		return fmt.Errorf("bus.Close: %w", ctx.Err())
	}
}

// JetStream returns the JetStream context, for what the bus does not wrap.
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// Conn returns the underlying NATS connection.
func (b *Bus) Conn() *nats.Conn { return b.nc }

// MaxPayload is the largest message the server accepts, headers included.
func (b *Bus) MaxPayload() int64 { return b.nc.MaxPayload() }
