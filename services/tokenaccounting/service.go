// Package tokenaccounting is the token-accounting service (DESIGN §3). It
// consumes turn.completed events, stores each session's messages exactly
// once and in seq order, keeps the session's token count, offloads oversized
// tool results, and announces threshold changes, compaction requests and
// accounted turns through the outbox.
package tokenaccounting

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Config of the token-accounting target.
type Config struct {
	Tokens  tokens.Config
	Offload accounting.Offload
	// MaxEventBytes bounds one encoded turn event.
	MaxEventBytes int
	// GapTimeout is how long an event waits for a missing predecessor before
	// the accountant gives up on the missing seqs and moves on.
	GapTimeout time.Duration
	// Workers handle events concurrently (different sessions in parallel).
	Workers int
	// MaxDeliver bounds redeliveries of an event that keeps failing.
	MaxDeliver int
}

// DefaultConfig holds DESIGN's numbers.
func DefaultConfig() Config {
	return Config{
		Tokens:        tokens.DefaultConfig(),
		Offload:       accounting.DefaultOffload(),
		MaxEventBytes: turn.DefaultMaxEventBytes,
		GapTimeout:    30 * time.Second,
		Workers:       16,
		MaxDeliver:    8,
	}
}

// Service is the accountant.
type Service struct {
	cfg     Config
	store   *store.Store
	bus     *bus.Bus
	log     *slog.Logger
	now     func() time.Time
	metrics serviceMetrics
}

// New builds the service. meter may be nil.
func New(cfg Config, st *store.Store, b *bus.Bus, log *slog.Logger, meter metric.Meter) (*Service, error) {
	if meter == nil {
		meter = noop.NewMeterProvider().Meter("")
	}
	m, err := newMetrics(meter)
	if err != nil {
		return nil, fmt.Errorf("tokenaccounting.New: %w", err)
	}
	return &Service{cfg: cfg, store: st, bus: b, log: log, now: time.Now, metrics: m}, nil
}

// Run consumes turn events until ctx ends, then drains in-flight work.
func (s *Service) Run(ctx context.Context) error {
	runner, err := s.bus.Run(ctx, bus.ConsumerSpec{
		Stream:        bus.StreamTurns,
		Durable:       "token-accounting",
		FilterSubject: bus.KindTurnCompleted + ".>",
		Workers:       s.cfg.Workers,
		MaxDeliver:    s.cfg.MaxDeliver,
	}, s.Handle)
	if err != nil {
		return fmt.Errorf("tokenaccounting.Run: %w", err)
	}
	s.log.Info("token-accounting consuming", "subject", bus.KindTurnCompleted+".>", "workers", s.cfg.Workers)

	sweep := time.NewTicker(max(s.cfg.GapTimeout/4, 100*time.Millisecond))
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			return runner.Stop(stopCtx)
		case <-sweep.C:
			if err := s.SweepGaps(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("gap sweep failed; next tick retries", "err", err)
			}
		}
	}
}

// Handle is the bus handler for one turn.completed message.
func (s *Service) Handle(ctx context.Context, m bus.Message) error {
	_, tenant, session, err := s.bus.ParseSubject(m.Subject)
	if err != nil {
		s.metrics.rejected(ctx, "bad_subject")
		return bus.Permanent(fmt.Errorf("subject %q: %w", m.Subject, err))
	}
	ev, err := turn.Decode(m.Data, turn.DecodeOptions{MaxBytes: s.cfg.MaxEventBytes, Tenant: tenant, Session: session})
	if err != nil {
		ie, _ := turn.AsInputError(err)
		if ie != nil {
			s.metrics.rejected(ctx, string(ie.Reason))
		}
		return bus.Permanent(err)
	}
	if err := s.Apply(ctx, ev); err != nil {
		if ie, ok := turn.AsInputError(err); ok {
			s.metrics.rejected(ctx, string(ie.Reason))
			return bus.Permanent(err)
		}
		return err
	}
	return nil
}

// Outcome is what Apply did with an event.
type Outcome string

// Apply's outcomes.
const (
	OutcomeApplied   Outcome = "applied"
	OutcomeWaiting   Outcome = "waiting"
	OutcomeDuplicate Outcome = "duplicate"
)

// Apply records ev and applies it, and every waiting successor it unblocks,
// in one transaction. It is idempotent: a redelivered event changes nothing.
// An *turn.InputError means the event can never apply.
func (s *Service) Apply(ctx context.Context, ev turn.Event) error {
	start := s.now()
	exists, err := s.store.TenantExists(ctx, ev.TenantID)
	if err != nil {
		return err
	}
	if !exists {
		return turn.Refuse(turn.ReasonUnknownTenant, "tenant %q does not exist", ev.TenantID)
	}
	var outcome Outcome
	err = s.store.InTx(ctx, ev.TenantID, func(tx *store.Tx) error {
		sess, err := tx.LockSession(ctx, ev.SessionID, ev.Agent())
		if err != nil {
			return err
		}
		var payload []byte
		if ev.Seq > sess.AppliedSeq+1 {
			// Out of order: keep the event until its predecessors arrive.
			if payload, err = json.Marshal(ev); err != nil {
				return fmt.Errorf("encode waiting event: %w", err)
			}
		}
		inserted, prev, err := tx.InsertTurn(ctx, store.Turn{SessionID: ev.SessionID, EventID: ev.EventID, Seq: ev.Seq, Status: store.TurnPending, Payload: payload})
		if err != nil {
			return err
		}
		if !inserted {
			if prev.EventID == ev.EventID {
				outcome = OutcomeDuplicate
				return nil
			}
			return turn.Refuse(turn.ReasonSeqConflict, "seq %d of session %s already belongs to event %s", ev.Seq, ev.SessionID, prev.EventID)
		}
		if ev.Seq > sess.AppliedSeq+1 {
			outcome = OutcomeWaiting
			return nil
		}
		outcome = OutcomeApplied
		return s.applyReady(ctx, tx, &sess, ev)
	})
	if err != nil {
		return fmt.Errorf("tokenaccounting.Apply %s: %w", ev.EventID, err)
	}
	s.metrics.outcome(ctx, outcome, s.now().Sub(start))
	return nil
}

// applyReady applies ev, which is next in seq, then every waiting event that
// follows without a gap, and saves the session.
func (s *Service) applyReady(ctx context.Context, tx *store.Tx, sess *store.Session, ev turn.Event) error {
	for {
		if err := s.applyOrReject(ctx, tx, sess, ev); err != nil {
			return err
		}
		next, err := tx.NextPendingTurn(ctx, sess.SessionID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && next.Seq != sess.AppliedSeq+1) {
			break
		}
		if err != nil {
			return fmt.Errorf("next waiting event: %w", err)
		}
		if err := json.Unmarshal(next.Payload, &ev); err != nil {
			return fmt.Errorf("decode waiting event %s: %w", next.EventID, err)
		}
	}
	return tx.SaveSession(ctx, *sess)
}

// applyOrReject applies one event in a savepoint. Bad content rejects the
// event alone: it is marked, dead-lettered through the outbox, and the
// session moves past it so later good events still apply.
func (s *Service) applyOrReject(ctx context.Context, tx *store.Tx, sess *store.Session, ev turn.Event) error {
	before := *sess
	err := tx.Savepoint(ctx, func(sp *store.Tx) error { return s.applyOne(ctx, sp, sess, ev) })
	ie, bad := turn.AsInputError(err)
	if err != nil && !bad {
		return err
	}
	if err == nil {
		return nil
	}
	*sess = before
	sess.AppliedSeq = ev.Seq
	sess.RejectedTurns++
	if err := tx.FinishTurn(ctx, ev.EventID, store.TurnRejected, ie.Error(), sess.TokenCount, sess.State); err != nil {
		return err
	}
	s.metrics.rejected(ctx, string(ie.Reason))
	s.log.Warn("turn rejected", "tenant", ev.TenantID, "session", ev.SessionID, "seq", ev.Seq, "event_id", ev.EventID, "reason", ie.Reason, "detail", ie.Detail)
	payload, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode rejected event: %w", err)
	}
	return tx.Enqueue(ctx, store.OutboxEvent{
		Subject: bus.DeadLetterSubject(bus.Subject(bus.KindTurnCompleted, ev.TenantID, ev.SessionID)),
		MsgID:   "rejected:" + ev.EventID,
		Payload: payload,
		Headers: map[string]string{
			bus.HeaderDeadLetterReason:   ie.Error(),
			bus.HeaderDeadLetterConsumer: "token-accounting",
			bus.HeaderOriginalMsgID:      ev.EventID,
		},
	})
}

// applyOne stores an event's messages and moves the session's count.
func (s *Service) applyOne(ctx context.Context, tx *store.Tx, sess *store.Session, ev turn.Event) error {
	updateSessionInfo(sess, ev)
	limits := accounting.Limits(s.cfg.Tokens, *sess)
	tally := accounting.TallyOf(*sess)
	prevState := sess.State

	msgs := ev.Messages()
	frozen := func(toolUseID string) (string, bool, error) {
		r, err := tx.Replacement(ctx, sess.SessionID, toolUseID, store.ReplaceOffload)
		if errors.Is(err, store.ErrNotFound) {
			return "", false, nil
		}
		return r.Text, err == nil, err
	}
	shown, decisions, err := s.cfg.Offload.Apply(msgs, frozen, func(toolUseID string) string {
		return toolResultID(ev.TenantID, ev.SessionID, toolUseID)
	})
	if err != nil {
		return err
	}
	var offloaded []string
	for _, d := range decisions {
		if d.Recorded {
			continue
		}
		if err := tx.InsertToolResult(ctx, store.ToolResult{
			ID: d.ToolResultID, SessionID: sess.SessionID, MessageUUID: d.MessageUUID,
			ToolUseID: d.ToolUseID, Content: d.Original, SizeChars: int64(d.SizeChars),
		}); err != nil {
			return err
		}
		if err := tx.RecordReplacement(ctx, store.Replacement{
			SessionID: sess.SessionID, ToolUseID: d.ToolUseID, Kind: store.ReplaceOffload,
			ToolResultID: d.ToolResultID, Text: d.Replacement,
		}); err != nil {
			return err
		}
		offloaded = append(offloaded, d.ToolResultID)
		s.metrics.offloaded(ctx, int64(d.SizeChars))
	}

	uuids := make([]string, 0, len(msgs))
	for i, m := range shown {
		isResponse := ev.Response != nil && i == len(shown)-1
		added, err := s.storeMessage(ctx, tx, sess, ev.Seq, msgs[i], m, isResponse)
		if err != nil {
			return err
		}
		uuids = append(uuids, m.UUID)
		switch {
		case isResponse && ev.Usage != nil:
			tally.SetResponse(*ev.Usage, m.Content)
		case added:
			tally.Add(tokens.EstimateMessage(m))
		}
	}

	count := tally.Count()
	state := limits.State(count)
	sess.BaselineTokens, sess.HasUsage, sess.PendingTokens = tally.Baseline, tally.HasUsage, tally.Pending
	sess.TokenCount, sess.State = count, string(state)
	sess.AppliedSeq = ev.Seq
	toolCalls := 0
	if ev.Response != nil {
		toolCalls = ev.Response.ToolUseCount()
		sess.LastResponseAt = ev.OccurredAt
	}
	sess.ToolCallsTotal += int64(toolCalls)
	status := accounting.Status(limits, count)
	now := s.now().UTC()

	if string(state) != prevState {
		if err := s.enqueue(ctx, tx, bus.KindContextThreshold, ev, "threshold:"+ev.EventID, events.ContextThreshold{
			Schema: events.SchemaContextThreshold, TenantID: ev.TenantID, SessionID: ev.SessionID, Seq: ev.Seq,
			PreviousState: prevState, Tokens: status, At: now,
		}); err != nil {
			return err
		}
	}
	if limits.AboveAutoCompact(count) && sess.AutoCompactEnabled && !sess.CompactionInFlight {
		sess.CompactionInFlight = true
		sess.CompactRequests++
		if err := s.enqueue(ctx, tx, bus.KindCompactRequested, ev, fmt.Sprintf("compact:%s:%s:%d", ev.TenantID, ev.SessionID, sess.CompactRequests), events.CompactRequested{
			Schema: events.SchemaCompactRequested, TenantID: ev.TenantID, SessionID: ev.SessionID, Seq: ev.Seq,
			Request: sess.CompactRequests, Trigger: "auto", Tokens: status, At: now,
		}); err != nil {
			return err
		}
		s.metrics.compactRequested(ctx)
	}
	accounted := events.TurnAccounted{
		Schema: events.SchemaTurnAccounted, EventID: ev.EventID, TenantID: ev.TenantID, SessionID: ev.SessionID,
		Seq: ev.Seq, AgentID: ev.Agent(), MemoryScope: ev.MemoryScope, Model: ev.Model, Tokens: status,
		MessageUUIDs: uuids, ToolCalls: toolCalls, ToolCallsTotal: sess.ToolCallsTotal,
		ClosesUserTurn: ev.ClosesUserTurn(), OffloadedTools: offloaded, OccurredAt: ev.OccurredAt, AccountedAt: now,
	}
	if ev.Response != nil {
		accounted.ResponseUUID = ev.Response.UUID
	}
	if err := s.enqueue(ctx, tx, bus.KindTurnAccounted, ev, "accounted:"+ev.EventID, accounted); err != nil {
		return err
	}
	return tx.FinishTurn(ctx, ev.EventID, store.TurnApplied, "", count, string(state))
}

// storeMessage stores one message unless the session has it already. The
// same uuid with other content is bad input. It reports whether it was added.
func (s *Service) storeMessage(ctx context.Context, tx *store.Tx, sess *store.Session, seq int64, sent, shown turn.Message, isResponse bool) (bool, error) {
	sentJSON, err := json.Marshal(sent.Content)
	if err != nil {
		return false, fmt.Errorf("encode message %s: %w", sent.UUID, err)
	}
	sum := sha256.Sum256(append([]byte(sent.Role+"\x00"), sentJSON...))
	prev, err := tx.MessageHash(ctx, sess.SessionID, sent.UUID)
	switch {
	case err == nil && string(prev) == string(sum[:]):
		return false, nil // a resent message: stored once, counted once
	case err == nil:
		return false, turn.Refuse(turn.ReasonDuplicateUUID, "message %s was sent before with different content", sent.UUID)
	case !errors.Is(err, store.ErrNotFound):
		return false, err
	}
	shownJSON, err := json.Marshal(shown.Content)
	if err != nil {
		return false, fmt.Errorf("encode message %s: %w", sent.UUID, err)
	}
	err = tx.InsertMessage(ctx, store.Message{
		SessionID: sess.SessionID, UUID: sent.UUID, Position: sess.MessageCount, Seq: seq, Role: sent.Role,
		Content: shownJSON, ContentHash: sum[:], EstimateTokens: tokens.EstimateMessage(shown),
		IsResponse: isResponse, StopReason: sent.StopReason,
	})
	if err != nil {
		return false, err
	}
	sess.MessageCount++
	return true, nil
}

func (s *Service) enqueue(ctx context.Context, tx *store.Tx, kind string, ev turn.Event, msgID string, payload any) error {
	data, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("encode %s: %w", kind, err)
	}
	return tx.Enqueue(ctx, store.OutboxEvent{
		Subject: bus.Subject(kind, ev.TenantID, ev.SessionID),
		MsgID:   msgID,
		Payload: data,
		Headers: bus.TraceHeaders(ctx),
	})
}

// SweepGaps moves sessions past seqs that have not arrived within the gap
// timeout, applying the events that waited behind them.
func (s *Service) SweepGaps(ctx context.Context) error {
	stalled, err := s.store.StalledSessions(ctx, s.now().Add(-s.cfg.GapTimeout))
	if err != nil {
		return err
	}
	for _, st := range stalled {
		err := s.store.InTx(ctx, st.TenantID, func(tx *store.Tx) error {
			sess, err := tx.LockSession(ctx, st.SessionID, turn.MainAgent)
			if err != nil {
				return err
			}
			next, err := tx.NextPendingTurn(ctx, st.SessionID)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if next.Seq > sess.AppliedSeq+1 {
				if err := tx.SkipGap(ctx, st.SessionID, sess.AppliedSeq+1, next.Seq-1); err != nil {
					return err
				}
				s.metrics.gapSkipped(ctx, next.Seq-1-sess.AppliedSeq)
				s.log.Warn("gave up waiting for missing turns", "tenant", st.TenantID, "session", st.SessionID, "from_seq", sess.AppliedSeq+1, "to_seq", next.Seq-1)
				sess.AppliedSeq = next.Seq - 1
			}
			var ev turn.Event
			if err := json.Unmarshal(next.Payload, &ev); err != nil {
				return fmt.Errorf("decode waiting event %s: %w", next.EventID, err)
			}
			return s.applyReady(ctx, tx, &sess, ev)
		})
		if err != nil {
			return fmt.Errorf("tokenaccounting.SweepGaps %s/%s: %w", st.TenantID, st.SessionID, err)
		}
	}
	return nil
}

func updateSessionInfo(sess *store.Session, ev turn.Event) {
	sess.AgentID = ev.Agent()
	if ev.Model != "" {
		sess.Model = ev.Model
	}
	if ev.ContextWindow > 0 {
		sess.ContextWindow = ev.ContextWindow
	}
	if ev.MaxOutputTokens > 0 {
		sess.MaxOutputTokens = ev.MaxOutputTokens
	}
	if len(ev.MemoryScope) > 0 {
		sess.MemoryScope = ev.MemoryScope
	}
}

// toolResultID names a stored tool result deterministically, so a retried
// transaction stores the same id.
func toolResultID(tenant, session, toolUseID string) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("mnemos:tool-result:"+tenant+"/"+session+"/"+toolUseID)).String()
}

type serviceMetrics struct {
	turns    metric.Int64Counter
	rejects  metric.Int64Counter
	latency  metric.Float64Histogram
	compacts metric.Int64Counter
	offloads metric.Int64Counter
	offChars metric.Int64Counter
	gapsSeqs metric.Int64Counter
}

func newMetrics(m metric.Meter) (serviceMetrics, error) {
	var sm serviceMetrics
	var err error
	if sm.turns, err = m.Int64Counter("mnemos.turns.accounted", metric.WithDescription("Turn events handled by the accountant, by outcome.")); err != nil {
		return sm, err
	}
	if sm.rejects, err = m.Int64Counter("mnemos.turns.rejected", metric.WithDescription("Turn events refused, by reason.")); err != nil {
		return sm, err
	}
	if sm.latency, err = m.Float64Histogram("mnemos.accounting.duration", metric.WithUnit("s"), metric.WithDescription("Time to account one turn event.")); err != nil {
		return sm, err
	}
	if sm.compacts, err = m.Int64Counter("mnemos.compactions.requested", metric.WithDescription("Automatic compactions requested.")); err != nil {
		return sm, err
	}
	if sm.offloads, err = m.Int64Counter("mnemos.tool_results.offloaded", metric.WithDescription("Tool results stored outside the context.")); err != nil {
		return sm, err
	}
	if sm.offChars, err = m.Int64Counter("mnemos.tool_results.offloaded_chars", metric.WithDescription("Characters of tool results stored outside the context.")); err != nil {
		return sm, err
	}
	if sm.gapsSeqs, err = m.Int64Counter("mnemos.turns.gap_skipped", metric.WithDescription("Turn seqs given up on after the gap timeout.")); err != nil {
		return sm, err
	}
	return sm, nil
}

func (m serviceMetrics) outcome(ctx context.Context, o Outcome, d time.Duration) {
	m.turns.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", string(o))))
	m.latency.Record(ctx, d.Seconds())
}

func (m serviceMetrics) rejected(ctx context.Context, reason string) {
	m.rejects.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}

func (m serviceMetrics) compactRequested(ctx context.Context) { m.compacts.Add(ctx, 1) }

func (m serviceMetrics) offloaded(ctx context.Context, chars int64) {
	m.offloads.Add(ctx, 1)
	m.offChars.Add(ctx, chars)
}

func (m serviceMetrics) gapSkipped(ctx context.Context, n int64) { m.gapsSeqs.Add(ctx, n) }
