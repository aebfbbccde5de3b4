package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"
)

// Headers of a dead letter. The original message's own headers are kept,
// except the server's "Nats-" ones.
const (
	HeaderDeadLetterReason     = "Mnemos-Dead-Letter-Reason"
	HeaderDeadLetterConsumer   = "Mnemos-Dead-Letter-Consumer"
	HeaderDeadLetterDeliveries = "Mnemos-Dead-Letter-Deliveries"
	HeaderOriginalSubject      = "Mnemos-Original-Subject"
	HeaderOriginalMsgID        = "Mnemos-Original-Msg-Id"
	HeaderOriginalStream       = "Mnemos-Original-Stream"
	HeaderOriginalSequence     = "Mnemos-Original-Sequence"
)

// maxReasonLen bounds the reason header: it travels inside the message.
const maxReasonLen = 1024

// Handler processes one message. It returns nil when the message is done, a
// Permanent error when it can never be processed, and any other error to have
// it delivered again later. A handler must be idempotent: a message may be
// delivered more than once.
type Handler func(ctx context.Context, m Message) error

// Message is a message delivered to a Handler. It is only valid during the
// call.
type Message struct {
	// Subject is the full subject, namespace included; Bus.ParseSubject
	// splits it.
	Subject string
	Data    []byte
	Header  nats.Header
	// MsgID is the id the message was published with (Nats-Msg-Id).
	MsgID string
	// NumDelivered counts deliveries of this message, this one included.
	NumDelivered int

	msg jetstream.Msg
}

// InProgress tells the server the handler is still working on the message,
// which restarts its AckWait. Long handlers call it periodically. On a
// Message not received from the bus (a test's), it does nothing.
func (m Message) InProgress() error {
	if m.msg == nil {
		return nil
	}
	if err := m.msg.InProgress(); err != nil {
		return fmt.Errorf("bus.Message.InProgress: %w", err)
	}
	return nil
}

// Result is what became of a delivery.
type Result string

// Results of a delivery.
const (
	// Acked: the handler succeeded and the message was acknowledged.
	Acked Result = "acked"
	// Retried: the message will be delivered again after a delay.
	Retried Result = "retried"
	// DeadLettered: the message was copied to the dead-letter stream and
	// terminated.
	DeadLettered Result = "dead_lettered"
)

// Outcome describes one delivery, for metrics.
type Outcome struct {
	Consumer     string
	Subject      string // full subject
	Result       Result
	NumDelivered int
	// Duration is the time spent in the handler.
	Duration time.Duration
	// Err is the handler's error, or why the message was dead-lettered.
	Err error
	// SettleErr is set when acknowledging or dead-lettering failed; the
	// server will deliver the message again.
	SettleErr error
}

// ConsumerSpec describes a durable consumer and how Run drives it.
type ConsumerSpec struct {
	// Stream is the unprefixed stream name, e.g. StreamTurns. Required.
	Stream string
	// Durable is the consumer's name; instances sharing it share the work.
	// Required.
	Durable string
	// FilterSubject is the unprefixed filter, e.g. "turn.completed.>".
	// Required.
	FilterSubject string
	// MaxDeliver is how many deliveries a failing message gets before it is
	// dead-lettered. Default 8.
	MaxDeliver int
	// AckWait is how long the server waits for a verdict before delivering
	// the message again; long handlers call Message.InProgress. Default 30s.
	AckWait time.Duration
	// Workers is how many handlers run at once. Default 8.
	Workers int
	// MaxAckPending bounds the messages delivered and not yet settled,
	// across all instances. 0 means the server's default.
	MaxAckPending int
	// MaxBytes, when set, bounds the bytes of the messages the runner
	// holds, so that many Workers cost memory only when their messages
	// are small: a message waits for its handler until the messages
	// handlers hold leave room for it (one larger than MaxBytes waits for
	// all of them), and one fetch from the server brings at most MaxBytes.
	// Below the largest message the server takes (with room for its
	// subject), it is raised to that. 0: only Workers bounds them.
	MaxBytes int
	// Backoff is the delay before redelivery after the attempt-th failed
	// delivery. Default DefaultBackoff.
	Backoff func(attempt int) time.Duration
	// OnOutcome, if set, is called after every delivery by the worker that
	// processed it, so concurrently. It must be fast and must not block.
	OnOutcome func(Outcome)
	// Classify, if set, sees every error a handler returns before the
	// runner acts on it, and may mark it: a service passes
	// TransientIf(store.IsUnavailable) so that an outage of its database is
	// retried in place instead of spending the message's deliveries.
	Classify func(error) error
}

// TransientIf returns a Classify hook that marks the errors for which
// outage reports true as Transient, and leaves the others as they are.
func TransientIf(outage func(error) bool) func(error) error {
	return func(err error) error {
		if err != nil && !IsTransient(err) && !IsPermanent(err) && outage(err) {
			return Transient(err)
		}
		return err
	}
}

func (s ConsumerSpec) withDefaults() (ConsumerSpec, error) {
	switch {
	case s.Stream == "":
		return s, errors.New("ConsumerSpec.Stream is required")
	case s.Durable == "":
		return s, errors.New("ConsumerSpec.Durable is required")
	case s.FilterSubject == "":
		return s, errors.New("ConsumerSpec.FilterSubject is required")
	}
	if s.MaxDeliver <= 0 {
		s.MaxDeliver = 8
	}
	if s.AckWait <= 0 {
		s.AckWait = 30 * time.Second
	}
	if s.Workers <= 0 {
		s.Workers = 8
	}
	if s.Backoff == nil {
		s.Backoff = DefaultBackoff
	}
	return s, nil
}

// Runner runs a Handler over a durable consumer. Stop it with Stop.
type Runner struct {
	b      *Bus
	spec   ConsumerSpec
	stream string // stream name on the server
	h      Handler
	log    *slog.Logger

	cons jetstream.Consumer
	cc   jetstream.ConsumeContext
	msgs chan jetstream.Msg // consume callback → workers; unbuffered
	// held is the budget of spec.MaxBytes for the messages handed to the
	// workers; nil without one.
	held *semaphore.Weighted
	wg   sync.WaitGroup // workers

	// pending is the consumer's unsettled messages at the latest reading
	// of its info, -1 before the first.
	pending atomic.Int64

	// ctx is the parent of every handler's context. It is cancelled on a
	// hard stop, or once the runner has stopped.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// Run creates or updates the durable consumer described by spec (explicit
// acknowledgement, from the first message of the stream) and processes its
// messages with h on spec.Workers goroutines until Stop.
//
// For each delivery: nil acknowledges the message; a Permanent error
// dead-letters it; another error (or a panic) has it delivered again after
// spec.Backoff, until its MaxDeliver-th delivery, which is dead-lettered. To
// dead-letter is to publish a copy on "deadletter.<subject>" with the reason
// in headers, then terminate the message. When that publish fails the
// message is retried instead: a message is never dropped.
//
// ctx bounds the consumer's creation; handlers run under a context that keeps
// ctx's values but not its cancellation.
func (b *Bus) Run(ctx context.Context, spec ConsumerSpec, h Handler) (*Runner, error) {
	if h == nil {
		return nil, errors.New("bus.Run: nil handler")
	}
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("bus.Run: %w", err)
	}
	if spec.MaxBytes > 0 {
		// A fetch's limit below the next message would stall the consumer.
		spec.MaxBytes = max(spec.MaxBytes, int(b.MaxPayload())+messageOverhead)
	}
	stream := b.StreamName(spec.Stream)
	cons, err := b.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable:       spec.Durable,
		FilterSubject: b.prefix(spec.FilterSubject),
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait:       spec.AckWait,
		// The runner counts deliveries itself: with a server-side limit, a
		// message whose dead letter failed to publish would never be
		// delivered again, and never reach the dead-letter stream.
		MaxDeliver:    -1,
		MaxAckPending: spec.MaxAckPending,
	})
	if err != nil {
		return nil, fmt.Errorf("bus.Run: jetstream.CreateOrUpdateConsumer %s/%s: %w", stream, spec.Durable, err)
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Runner{
		b:      b,
		spec:   spec,
		stream: stream,
		h:      h,
		log:    b.log.With("stream", stream, "consumer", spec.Durable),
		cons:   cons,
		msgs:   make(chan jetstream.Msg),
		ctx:    runCtx,
		cancel: cancel,
		done:   make(chan struct{}),
	}
	r.pending.Store(-1)
	for range spec.Workers {
		r.wg.Go(r.work)
	}
	// Fetch little ahead of the workers: a message waiting in the client's
	// buffer is already running down its AckWait.
	var fetch jetstream.PullConsumeOpt = jetstream.PullMaxMessages(2 * spec.Workers)
	if spec.MaxBytes > 0 {
		r.held = semaphore.NewWeighted(int64(spec.MaxBytes))
		fetch = jetstream.PullMaxMessagesWithBytesLimit(2*spec.Workers, spec.MaxBytes)
	}
	cc, err := cons.Consume(r.deliver, fetch,
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			r.log.Warn("bus: consume", "err", err)
		}),
	)
	if err != nil {
		cancel()
		close(r.msgs)
		r.wg.Wait()
		return nil, fmt.Errorf("bus.Run: jetstream.Consume %s/%s: %w", stream, spec.Durable, err)
	}
	r.cc = cc
	go r.wait()
	go r.watchPending(b.infoEvery)
	return r, nil
}

// Stop stops fetching messages, lets the handlers finish the messages already
// fetched and waits until they are settled. When ctx ends first, handlers'
// contexts are cancelled, messages not yet handled are handed back to the
// server, and Stop returns without waiting for handlers that ignore
// cancellation; the server redelivers their messages after AckWait.
func (r *Runner) Stop(ctx context.Context) error {
	r.cc.Drain()
	select {
	case <-r.done:
	case <-ctx.Done():
		// Cancel the handlers; the drain still under way hands the
		// messages left in the buffer back to the server (see deliver).
		r.cancel()
		return fmt.Errorf("bus.Runner.Stop: %w", ctx.Err())
	}
	// Acknowledgements are buffered: make sure they reached the server.
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	if err := r.b.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("bus.Runner.Stop: nats.Flush: %w", err)
	}
	return nil
}

// Done is closed once the runner has stopped: after Stop, or when the
// consumer was deleted or the connection closed.
func (r *Runner) Done() <-chan struct{} {
	return r.done
}

// wait closes done once consuming has stopped and the workers are idle.
func (r *Runner) wait() {
	<-r.cc.Closed() // after this, deliver is never called again
	close(r.msgs)
	r.wg.Wait()
	r.cancel()
	close(r.done)
}

// deliver is the consume callback: it hands m to a free worker.
func (r *Runner) deliver(m jetstream.Msg) {
	if r.held != nil {
		if r.held.Acquire(r.ctx, r.weight(m)) != nil {
			r.release(m) // a hard stop
			return
		}
	}
	select {
	case r.msgs <- m:
	case <-r.ctx.Done():
		r.unhold(m)
		r.release(m)
	}
}

// messageOverhead is room for what a fetch counts of a message beside its
// payload: its subject and reply subject.
const messageOverhead = 64 << 10

// weight is what a message counts against spec.MaxBytes.
func (r *Runner) weight(m jetstream.Msg) int64 {
	return int64(min(max(len(m.Data()), 1), r.spec.MaxBytes))
}

// unhold gives a message's bytes back to spec.MaxBytes once no worker
// holds it.
func (r *Runner) unhold(m jetstream.Msg) {
	if r.held != nil {
		r.held.Release(r.weight(m))
	}
}

// release hands a message not yet processed back to the server on a hard
// stop, so it is redelivered now rather than after AckWait.
func (r *Runner) release(m jetstream.Msg) {
	if err := m.Nak(); err != nil {
		r.log.Warn("bus: nak on stop", "subject", m.Subject(), "err", err)
	}
}

func (r *Runner) work() {
	for m := range r.msgs {
		if r.ctx.Err() != nil {
			r.release(m) // hard stop: start no new work
		} else {
			r.process(m)
		}
		r.unhold(m)
	}
}

// process runs the handler on one delivery and settles it.
func (r *Runner) process(jm jetstream.Msg) {
	meta, err := jm.Metadata()
	if err != nil {
		// Cannot happen on a pull consumer; terminate rather than loop.
		r.log.Error("bus: message without metadata", "subject", jm.Subject(), "err", err)
		if err := jm.Term(); err != nil {
			r.log.Error("bus: term", "subject", jm.Subject(), "err", err)
		}
		return
	}
	m := Message{
		Subject:      jm.Subject(),
		Data:         jm.Data(),
		Header:       jm.Headers(),
		MsgID:        jm.Headers().Get(jetstream.MsgIDHeader),
		NumDelivered: int(meta.NumDelivered),
		msg:          jm,
	}

	ctx := r.b.prop.Extract(r.ctx, headerCarrier(m.Header))
	ctx, span := r.b.tracer.Start(ctx, "process "+r.b.kindOf(m.Subject),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(m.Subject),
			semconv.MessagingConsumerGroupName(r.spec.Durable),
			semconv.MessagingMessageID(m.MsgID),
			semconv.MessagingMessageBodySize(len(m.Data)),
			attribute.Int("mnemos.bus.num_delivered", m.NumDelivered),
		))
	defer span.End()

	out := Outcome{Consumer: r.spec.Durable, Subject: m.Subject, NumDelivered: m.NumDelivered}
	if m.NumDelivered > r.spec.MaxDeliver {
		// An earlier delivery ended without a verdict (a crash, an expired
		// AckWait, a dead letter that failed): do not run the handler again.
		out.Err = Permanent(fmt.Errorf("delivered %d times, MaxDeliver is %d", m.NumDelivered, r.spec.MaxDeliver))
	} else {
		start := time.Now()
		out.Err = r.callUntilNotTransient(ctx, m)
		out.Duration = time.Since(start)
		if out.Err == nil && r.b.afterHandled != nil {
			r.b.afterHandled(r.spec.Durable)
		}
	}
	out.Result, out.SettleErr = r.settle(ctx, m, meta.Sequence.Stream, out.Err)
	reason := ReasonMaxDeliveries
	if IsPermanent(out.Err) && m.NumDelivered <= r.spec.MaxDeliver {
		reason = ReasonPermanent
	}

	if out.Err != nil {
		span.RecordError(out.Err)
		span.SetStatus(codes.Error, out.Err.Error())
	}
	if out.SettleErr != nil {
		span.RecordError(out.SettleErr)
	}
	span.SetAttributes(attribute.String("mnemos.bus.result", string(out.Result)))
	if out.Result == DeadLettered {
		span.SetAttributes(attribute.String("mnemos.bus.dead_letter_reason", reason))
	}
	r.b.metrics.delivery(ctx, out, reason)
	r.report(ctx, out, meta.Sequence.Stream)
}

// callUntilNotTransient runs the handler, and runs it again after a pause
// while it fails with a Transient error, telling the server the message is
// in progress meanwhile. It gives up only when the runner stops.
func (r *Runner) callUntilNotTransient(ctx context.Context, m Message) error {
	pauseCap := max(r.spec.AckWait/2, time.Second)
	for attempt := 1; ; attempt++ {
		err := r.call(ctx, m)
		if !IsTransient(err) || r.ctx.Err() != nil {
			return err
		}
		pause := backoff(attempt, 100*time.Millisecond, pauseCap)
		r.log.WarnContext(ctx, "bus: handler hit a transient failure; retrying in place", "subject", m.Subject, "msg_id", m.MsgID, "attempt", attempt, "pause", pause, "err", err)
		if perr := m.InProgress(); perr != nil {
			return errors.Join(err, perr) // the server may redeliver; let settle decide
		}
		select {
		case <-r.ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

// call runs the handler, turning a panic into a retryable error.
func (r *Runner) call(ctx context.Context, m Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			r.log.ErrorContext(ctx, "bus: handler panic", "subject", m.Subject, "msg_id", m.MsgID,
				"panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panic: %v", p)
		}
	}()
	err = r.h(ctx, m)
	if r.spec.Classify != nil {
		err = r.spec.Classify(err)
	}
	return err
}

// settle acknowledges, retries or dead-letters a delivery according to the
// handler's error. The returned error is about settling, not handling.
func (r *Runner) settle(ctx context.Context, m Message, seq uint64, herr error) (Result, error) {
	switch {
	case herr == nil:
		if err := m.msg.Ack(); err != nil {
			return Acked, fmt.Errorf("ack: %w", err)
		}
		return Acked, nil

	case r.ctx.Err() != nil:
		// Hard stop: the error is likely the cancellation itself. Hand the
		// message back at once, for another instance.
		if err := m.msg.Nak(); err != nil {
			return Retried, fmt.Errorf("nak: %w", err)
		}
		return Retried, nil

	case !IsPermanent(herr) && m.NumDelivered < r.spec.MaxDeliver:
		if err := m.msg.NakWithDelay(r.spec.Backoff(m.NumDelivered)); err != nil {
			return Retried, fmt.Errorf("nak: %w", err)
		}
		return Retried, nil
	}

	if err := r.deadLetter(ctx, m, seq, herr); err != nil {
		// Keep the message: its next delivery tries the dead letter again.
		if nerr := m.msg.NakWithDelay(r.spec.Backoff(m.NumDelivered)); nerr != nil {
			return Retried, errors.Join(err, fmt.Errorf("nak: %w", nerr))
		}
		return Retried, err
	}
	if err := m.msg.Term(); err != nil {
		return DeadLettered, fmt.Errorf("term: %w", err)
	}
	return DeadLettered, nil
}

// deadLetter publishes a copy of m on "deadletter.<subject>". Its message id
// is derived from the original's stream sequence, so a repeated attempt is
// deduplicated by the server.
func (r *Runner) deadLetter(ctx context.Context, m Message, seq uint64, reason error) error {
	subject, _ := r.b.strip(m.Subject)
	hdr := make(nats.Header, len(m.Header)+7)
	for k, v := range m.Header {
		if !strings.HasPrefix(k, "Nats-") {
			hdr[k] = v
		}
	}
	hdr.Set(HeaderDeadLetterReason, headerValue(reason.Error(), maxReasonLen))
	hdr.Set(HeaderDeadLetterConsumer, r.spec.Durable)
	hdr.Set(HeaderDeadLetterDeliveries, strconv.Itoa(m.NumDelivered))
	hdr.Set(HeaderOriginalSubject, m.Subject)
	hdr.Set(HeaderOriginalStream, r.stream)
	hdr.Set(HeaderOriginalSequence, strconv.FormatUint(seq, 10))
	if m.MsgID != "" {
		hdr.Set(HeaderOriginalMsgID, m.MsgID)
	}
	// The stream is part of the id: a durable name may be reused on
	// another stream, whose sequences overlap with this one's.
	id := "dl:" + r.stream + ":" + strconv.FormatUint(seq, 10) + ":" + r.spec.Durable
	// Settle even when the handler's context was cancelled.
	if _, err := r.b.Publish(context.WithoutCancel(ctx), r.b.prefix(deadLetterPrefix+subject), id, m.Data, hdr); err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	return nil
}

// report logs an outcome worth logging (with ctx's trace) and passes it to
// OnOutcome.
func (r *Runner) report(ctx context.Context, out Outcome, seq uint64) {
	attrs := []any{"subject", out.Subject, "seq", seq, "num_delivered", out.NumDelivered}
	switch {
	case out.SettleErr != nil:
		r.log.ErrorContext(ctx, "bus: settle failed, message will be redelivered",
			append(attrs, "result", out.Result, "err", out.Err, "settle_err", out.SettleErr)...)
	case out.Result == DeadLettered:
		r.log.ErrorContext(ctx, "bus: message dead-lettered", append(attrs, "err", out.Err)...)
	case out.Result == Retried && r.ctx.Err() != nil:
		r.log.InfoContext(ctx, "bus: message handed back on stop", attrs...)
	case out.Result == Retried:
		r.log.WarnContext(ctx, "bus: handler failed, will retry", append(attrs, "err", out.Err)...)
	}
	if r.spec.OnOutcome != nil {
		r.spec.OnOutcome(out)
	}
}

// headerValue makes s safe as a header value: one line, valid UTF-8, at most
// limit bytes.
func headerValue(s string, limit int) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
