package tokenaccounting

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Outcome is what Apply did with an event.
type Outcome string

// Apply's outcomes.
const (
	OutcomeApplied   Outcome = "applied"
	OutcomeWaiting   Outcome = "waiting"
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeRejected: a late event, refused and counted on its session.
	OutcomeRejected Outcome = "rejected"
)

// Apply records ev and applies it, and every waiting successor it unblocks,
// in one transaction. It is idempotent: a redelivered event changes nothing.
// An *turn.InputError means the event can never apply; bad content found
// while applying rejects that event alone and is not returned. When another
// transaction holds the session longer than Config.SessionLockWait, Apply
// returns an error wrapping store.ErrSessionBusy and changes nothing: try
// again later.
//
// A transaction makes few round trips: BEGIN with the tenant, the session
// lock, the reads that decide (known message hashes, frozen offload
// decisions), then every write of the event pipelined, then COMMIT.
func (s *Service) Apply(ctx context.Context, ev turn.Event) error {
	return s.apply(ctx, ev, 0)
}

// apply is Apply for an event that arrived encoded in size bytes (0: not
// known, the tenant's turn_bytes is not checked).
func (s *Service) apply(ctx context.Context, ev turn.Event, size int) error {
	start := s.now()
	set, err := s.settings.For(ctx, ev.TenantID)
	if errors.Is(err, store.ErrUnknownTenant) {
		return turn.Refuse(turn.ReasonUnknownTenant, "tenant %q does not exist", ev.TenantID)
	}
	if err != nil {
		return fmt.Errorf("tokenaccounting.Apply %s: %w", ev.EventID, err)
	}
	var outcome Outcome
	var waitedApplied int
	err = s.store.InTx(ctx, ev.TenantID, func(tx *store.Tx) error {
		waitedApplied = 0
		sess, err := tx.LockSessionWithin(ctx, ev.SessionID, ev.Agent(), s.cfg.SessionLockWait)
		if errors.Is(err, store.ErrUnknownTenant) {
			return turn.Refuse(turn.ReasonUnknownTenant, "tenant %q does not exist", ev.TenantID)
		}
		if err != nil {
			return err
		}
		if w := set.Limits.SeqWindow; w > 0 && ev.Seq > sess.AppliedSeq+w {
			// Refused before anything is written (a new session is not
			// even created): kept, it would let the gap timeout move the
			// session that far ahead, and every later turn would be late.
			s.cfg.Limits.Record(ctx, limits.LimitSeqWindow)
			return turn.Refuse(turn.ReasonSeqTooFar, "seq %d of session %s is more than the tenant's seq_window of %d ahead of the applied seq %d", ev.Seq, ev.SessionID, w, sess.AppliedSeq)
		}
		switch {
		case ev.Seq <= sess.AppliedSeq:
			prev, err := tx.TurnBySeq(ctx, ev.SessionID, ev.Seq)
			if errors.Is(err, store.ErrNotFound) {
				// The gap timeout gave this seq up, so no row holds it:
				// the refusal takes it, which makes a redelivery a
				// duplicate, and is counted on the session.
				outcome = OutcomeRejected
				return s.reject(ctx, tx, &sess, ev, false, turn.Refuse(turn.ReasonLate, "seq %d of session %s arrived after the session moved past it (the gap timeout gave it up)", ev.Seq, ev.SessionID))
			}
			if err != nil {
				return err
			}
			if prev.EventID != ev.EventID {
				return turn.Refuse(turn.ReasonSeqConflict, "seq %d of session %s is taken (%s, %s)", ev.Seq, ev.SessionID, prev.Status, prev.EventID)
			}
			outcome = OutcomeDuplicate
			return nil
		case ev.Seq > sess.AppliedSeq+1:
			// Out of order: keep the event until its predecessors arrive.
			payload, err := turn.Marshal(ev)
			if err != nil {
				return fmt.Errorf("encode waiting event: %w", err)
			}
			inserted, prev, err := tx.InsertTurn(ctx, store.Turn{SessionID: ev.SessionID, EventID: ev.EventID, Seq: ev.Seq, Status: store.TurnPending, Payload: payload})
			if err != nil {
				return err
			}
			if !inserted {
				if prev.EventID != ev.EventID {
					return turn.Refuse(turn.ReasonSeqConflict, "seq %d of session %s already belongs to event %s", ev.Seq, ev.SessionID, prev.EventID)
				}
				outcome = OutcomeDuplicate
				return nil
			}
			sess.WaitingTurns++
			outcome = OutcomeWaiting
			return tx.SaveSessions(ctx, sess)
		default:
			outcome = OutcomeApplied
			waitedApplied, err = s.applyInOrder(ctx, tx, set, &sess, ev, size, false)
			return err
		}
	})
	if err != nil {
		return fmt.Errorf("tokenaccounting.Apply %s: %w", ev.EventID, err)
	}
	s.metrics.outcome(ctx, outcome, s.now().Sub(start))
	s.metrics.appliedAfterWaiting(ctx, waitedApplied)
	return nil
}

// applyInOrder applies ev, the session's next seq, then every waiting event
// that follows it without a gap. It returns how many of the events it
// applied had been kept waiting (ev among them when waited).
func (s *Service) applyInOrder(ctx context.Context, tx *store.Tx, set tenantcfg.Settings, sess *sessionstate.Session, ev turn.Event, size int, waited bool) (int, error) {
	n := 0
	for {
		if err := s.applyEvent(ctx, tx, set, sess, ev, size, waited); err != nil {
			return n, err
		}
		if waited {
			n++
		}
		next, nextSize, ok, err := s.nextWaiting(ctx, tx, sess)
		if err != nil || !ok {
			return n, err
		}
		ev, size, waited = next, nextSize, true
	}
}

// nextWaiting returns the waiting event that is the session's next seq, if
// any, with the size of its stored encoding.
func (s *Service) nextWaiting(ctx context.Context, tx *store.Tx, sess *sessionstate.Session) (turn.Event, int, bool, error) {
	if sess.WaitingTurns == 0 {
		return turn.Event{}, 0, false, nil
	}
	next, err := tx.NextPendingTurn(ctx, sess.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		sess.WaitingTurns = 0 // the counter said otherwise; the table is the truth
		return turn.Event{}, 0, false, nil
	}
	if err != nil {
		return turn.Event{}, 0, false, fmt.Errorf("next waiting event: %w", err)
	}
	if next.Seq != sess.AppliedSeq+1 {
		return turn.Event{}, 0, false, nil
	}
	var ev turn.Event
	if err := json.Unmarshal(next.Payload, &ev); err != nil {
		return turn.Event{}, 0, false, fmt.Errorf("decode waiting event %s: %w", next.EventID, err)
	}
	sess.WaitingTurns--
	return ev, len(next.Payload), true, nil
}

// turnMessages counts an event's messages: its input messages and its response.
func turnMessages(ev turn.Event) int {
	n := len(ev.InputMessages)
	if ev.Response != nil {
		n++
	}
	return n
}

// overTurnLimits checks one event against the tenant's caps on a turn's
// messages and encoded size; size 0 is not checked. A refusal is counted.
func (s *Service) overTurnLimits(ctx context.Context, lim limits.Config, ev turn.Event, size int) *turn.InputError {
	ie, limit := turnLimitRefusal(lim, ev, size)
	if ie != nil {
		s.cfg.Limits.Record(ctx, limit)
	}
	return ie
}

// turnLimitRefusal is overTurnLimits without the counting: the refusal and
// the limit it is counted under.
func turnLimitRefusal(lim limits.Config, ev turn.Event, size int) (*turn.InputError, string) {
	if n := turnMessages(ev); lim.TurnMessages > 0 && n > lim.TurnMessages {
		return turn.Refuse(turn.ReasonTooManyMessages, "the turn has %d messages; the tenant's turn_messages limit is %d", n, lim.TurnMessages), limits.LimitTurnMessages
	}
	if lim.TurnBytes > 0 && size > lim.TurnBytes {
		return turn.Refuse(turn.ReasonTooLarge, "the event is %d bytes; the tenant's turn_bytes limit is %d", size, lim.TurnBytes), limits.LimitEventBytes
	}
	return nil, ""
}

// applyEvent stores one event's messages, moves the session's count and
// writes its events. The group commit (batch.go) decides the plain case the
// same way for many events at once: a new reason to treat a turn otherwise
// must also keep such turns out of batches (batchable). The decisions are made from reads first (planTurn, pure);
// the writes then go out in one pipeline, so bad content never leaves half
// an event.
func (s *Service) applyEvent(ctx context.Context, tx *store.Tx, set tenantcfg.Settings, sess *sessionstate.Session, ev turn.Event, size int, waited bool) error {
	if ie := s.overTurnLimits(ctx, set.Limits, ev, size); ie != nil {
		return s.reject(ctx, tx, sess, ev, waited, ie)
	}
	if ie := accounting.CheckWindow(set.Tokens, ev); ie != nil {
		return s.reject(ctx, tx, sess, ev, waited, ie)
	}
	in, err := prepare(ev)
	if err != nil {
		return err
	}
	if in.known, err = tx.MessageHashes(ctx, sess.SessionID, in.uuids); err != nil {
		return err
	}
	if ie := s.checkKnown(ctx, set.Limits, *sess, in); ie != nil {
		return s.reject(ctx, tx, sess, ev, waited, ie)
	}
	frozen := map[string]store.Replacement{}
	if len(in.toolUseIDs) > 0 {
		if frozen, err = tx.ReplacementsFor(ctx, sess.SessionID, store.ReplaceOffload, in.toolUseIDs); err != nil {
			return err
		}
	}
	in.shown, in.decisions, err = set.Offload.Apply(in.msgs,
		func(id string) (string, bool, error) { r, ok := frozen[id]; return r.Text, ok, nil },
		func(id string) string { return toolResultID(ev.TenantID, ev.SessionID, id) })
	if err != nil {
		return err
	}
	if sess.AppliedSeq == 0 && sess.EstimateFactor == 0 && sess.DenseFactor == 0 {
		// A new session starts from what the tenant's sessions learnt.
		if sess.EstimateFactor, sess.DenseFactor, err = tx.EstimatePrior(ctx); err != nil {
			return err
		}
	}
	s.checkPrefix(ctx, *sess, ev)
	if accounting.RequestOf(ev).ModelChanged(*sess) {
		// The usage was measured by another model: the context is
		// counted by its estimate until the new model reports.
		if in.contextEstimate, err = tx.ContextEstimate(ctx, *sess); err != nil {
			return err
		}
	}
	plan, err := planTurn(set, *sess, in, s.now().UTC())
	if err != nil {
		return err
	}
	if err := s.write(ctx, tx, plan, waited); err != nil {
		return err
	}
	s.noteApplied(ctx, *sess, plan)
	*sess = plan.next
	return nil
}

// noteApplied counts and logs what applying a plan to the session as it
// was before did.
func (s *Service) noteApplied(ctx context.Context, before sessionstate.Session, plan turnPlan) {
	if plan.next.CompactRequests > before.CompactRequests {
		s.metrics.compactRequested(ctx)
	}
	if plan.staleUsage {
		s.metrics.staleUsage(ctx)
	}
	if plan.thrashHeld {
		s.metrics.thrashHeld(ctx)
		s.log.Warn("thrash guard: no automatic compaction asked, too many within the last turns",
			"tenant", plan.ev.TenantID, "session", plan.ev.SessionID, "seq", plan.ev.Seq, "recent", plan.next.AutoCompactSeqs)
	}
	for _, d := range plan.decisions {
		if !d.Recorded {
			s.metrics.offloaded(ctx, int64(d.SizeChars))
		}
	}
}

// checkPrefix warns of an event whose request prefix names a hash the
// session does not hold. Nothing else of the event is wrong: it applies
// with the session's prefix, and the client hears of it in the log.
func (s *Service) checkPrefix(ctx context.Context, sess sessionstate.Session, ev turn.Event) {
	if p := ev.RequestPrefix; p != nil {
		if _, _, ok, perr := accounting.PrefixOf(sess, p); perr == nil && !ok {
			s.metrics.unknownPrefix(ctx)
			s.log.Warn("request_prefix names a hash the session does not hold; the session's prefix is kept",
				"tenant", ev.TenantID, "session", ev.SessionID, "seq", ev.Seq, "hash", p.Hash)
		}
	}
}

// turnInput is one event's messages as sent, encoded and hashed, and what
// the reads found of them.
type turnInput struct {
	ev   turn.Event
	msgs []turn.Message
	// encoded is each message's content as sent, also what is stored when
	// nothing in it is replaced; sums its hash; uuids the messages' uuids.
	encoded, sums [][]byte
	uuids         []string
	toolUseIDs    []string
	// known holds the hashes of the messages the session stored already.
	known map[string][]byte
	// shown are the messages as the context shows them (offloaded results
	// replaced), decisions the offload decisions.
	shown     []turn.Message
	decisions []accounting.Decision
	// contextEstimate is the estimate of the session's context, read when
	// the event changes the model (accounting.Start).
	contextEstimate int64
}

// prepare encodes and hashes an event's messages.
func prepare(ev turn.Event) (turnInput, error) {
	msgs := ev.Messages()
	in := turnInput{ev: ev, msgs: msgs, encoded: make([][]byte, len(msgs)), sums: make([][]byte, len(msgs)), uuids: make([]string, len(msgs))}
	for i, m := range msgs {
		enc, err := turn.Marshal(m.Content)
		if err != nil {
			return in, fmt.Errorf("encode message %s: %w", m.UUID, err)
		}
		in.encoded[i], in.sums[i], in.uuids[i] = enc, contentHash(m.Role, enc), m.UUID
		for _, b := range m.Content {
			if b.Type == turn.BlockToolResult {
				in.toolUseIDs = append(in.toolUseIDs, b.ToolUseID)
			}
		}
	}
	return in, nil
}

// checkKnown refuses an event that resends a stored message with other
// content, or whose new messages would pass the session's cap. A refusal
// over the cap is counted.
func (s *Service) checkKnown(ctx context.Context, lim limits.Config, sess sessionstate.Session, in turnInput) *turn.InputError {
	ie, limit := knownRefusal(lim, sess, in)
	if limit != "" {
		s.cfg.Limits.Record(ctx, limit)
	}
	return ie
}

// knownRefusal is checkKnown without the counting: the refusal and the
// limit it is counted under, if any.
func knownRefusal(lim limits.Config, sess sessionstate.Session, in turnInput) (*turn.InputError, string) {
	for i, m := range in.msgs {
		if prev, ok := in.known[m.UUID]; ok && !bytes.Equal(prev, in.sums[i]) {
			return turn.Refuse(turn.ReasonDuplicateUUID, "message %s was sent before with different content", m.UUID), ""
		}
	}
	if limit := int64(lim.SessionMessages); limit > 0 {
		fresh := int64(len(in.msgs) - len(in.known)) // a turn's uuids are distinct (turn.Decode)
		if sess.MessageCount+fresh > limit {
			return turn.Refuse(turn.ReasonSessionFull,
				"session %s holds %d messages; the turn's %d new ones would pass the tenant's session_messages limit of %d", in.ev.SessionID, sess.MessageCount, fresh, limit), limits.LimitSessionMessages
		}
	}
	return nil, ""
}

// turnPlan is everything applying one event writes.
type turnPlan struct {
	ev        turn.Event
	next      sessionstate.Session
	added     []store.Message
	decisions []accounting.Decision
	outgoing  []events.Event
	// staleUsage: the response's usage was measured before the latest
	// compaction and counted by its estimate instead.
	staleUsage bool
	// thrashHeld: the session was due an automatic compaction the thrash
	// guard held back.
	thrashHeld bool
}

// planTurn decides what applying one event does to its session: the
// messages it stores (those not stored before), the session's new count,
// state and tallies, and the events it announces. It reads nothing and
// writes nothing.
func planTurn(set tenantcfg.Settings, sess sessionstate.Session, in turnInput, now time.Time) (turnPlan, error) {
	ev := in.ev
	plan := turnPlan{ev: ev, next: sess, decisions: in.decisions}
	next := &plan.next
	tally := accounting.TallyOf(*next)
	if err := accounting.Start(&tally, next, accounting.RequestOf(ev), in.contextEstimate); err != nil {
		// turn.Decode checked the prefix's shape: an event that gets here
		// with a bad one was stored by an older build.
		return plan, fmt.Errorf("request prefix: %w", err)
	}
	updateSessionInfo(next, ev)
	limits := accounting.Limits(set.Tokens, *next)
	replaced := map[string]bool{}
	for _, d := range in.decisions {
		replaced[d.MessageUUID] = true
	}
	for i, m := range in.shown {
		isResponse := ev.Response != nil && i == len(in.shown)-1
		_, resent := in.known[m.UUID]
		switch {
		case isResponse && ev.Usage != nil && stale(*next, *ev.Usage):
			// Answered from the context as it was before the latest
			// compaction: the usage measures what the compaction removed.
			tally.AddMessage(m)
			plan.staleUsage = true
		case isResponse && ev.Usage != nil:
			// Offloaded results are counted by their preview, which the
			// request may not have carried: no calibration from them.
			tally.Observe(*ev.Usage, m.Content, len(in.decisions) == 0)
			next.StaleUsageAbove = 0
		case !resent:
			tally.AddMessage(m)
		}
		if resent {
			continue // stored and counted once already
		}
		content := in.encoded[i]
		if replaced[m.UUID] {
			var err error
			if content, err = turn.Marshal(m.Content); err != nil {
				return plan, fmt.Errorf("encode message %s: %w", m.UUID, err)
			}
		}
		estimate := tokens.EstimateMessage(m)
		next.MessageBytes += store.MessageSize(content, estimate)
		plan.added = append(plan.added, store.Message{
			SessionID: next.SessionID, UUID: m.UUID, Position: next.MessageCount, Seq: ev.Seq, Role: m.Role,
			Content: content, ContentHash: in.sums[i], EstimateTokens: estimate,
			IsResponse: isResponse, StopReason: in.msgs[i].StopReason, BytesThrough: next.MessageBytes,
		})
		next.MessageCount++
	}

	count := tally.Count()
	state := limits.State(count)
	accounting.Save(next, tally)
	next.TokenCount, next.State = count, string(state)
	next.AppliedSeq = ev.Seq
	toolCalls := 0
	if ev.Response != nil {
		toolCalls = ev.Response.ToolUseCount()
		next.LastResponseAt = ev.OccurredAt
	}
	next.ToolCallsTotal += int64(toolCalls)
	status := accounting.Status(limits, count)

	if string(state) != sess.State {
		plan.outgoing = append(plan.outgoing, events.ContextThreshold{
			Schema: events.SchemaContextThreshold, TenantID: ev.TenantID, SessionID: ev.SessionID, EventID: ev.EventID, Seq: ev.Seq,
			PreviousState: sess.State, Tokens: status, At: now,
		})
	}
	switch auto := set.Compaction.AutoCompaction(*next, ev.Seq, limits.AboveAutoCompact(count)); {
	case auto.Held:
		next.ThrashHeld++
		plan.thrashHeld = true
	case auto.Ask:
		next.CompactionInFlight = true
		next.CompactRequests++
		next.AutoCompactSeqs = auto.Seqs
		plan.outgoing = append(plan.outgoing, events.CompactRequested{
			Schema: events.SchemaCompactRequested, TenantID: ev.TenantID, SessionID: ev.SessionID, Seq: ev.Seq,
			Request: next.CompactRequests, Trigger: events.TriggerAuto, Tokens: status, At: now,
		})
	}
	var offloaded []string
	for _, d := range in.decisions {
		if !d.Recorded {
			offloaded = append(offloaded, d.ToolResultID)
		}
	}
	accounted := events.TurnAccounted{
		Schema: events.SchemaTurnAccounted, EventID: ev.EventID, TenantID: ev.TenantID, SessionID: ev.SessionID,
		Seq: ev.Seq, AgentID: ev.Agent(), MemoryScope: ev.MemoryScope, Model: ev.Model, Tokens: status,
		MessageUUIDs: in.uuids, ToolCalls: toolCalls, ToolCallsTotal: next.ToolCallsTotal,
		ClosesUserTurn: ev.ClosesUserTurn(), OffloadedTools: offloaded, OccurredAt: ev.OccurredAt, AccountedAt: now,
	}
	if ev.Response != nil {
		accounted.ResponseUUID = ev.Response.UUID
	}
	plan.outgoing = append(plan.outgoing, accounted)
	return plan, nil
}

// write sends a plan's writes in one pipeline: the offloaded results and
// their replacements, the new messages, the outbox rows, the turn and the
// session.
func (s *Service) write(ctx context.Context, tx *store.Tx, plan turnPlan, waited bool) error {
	rows, err := outboxRows(ctx, plan)
	if err != nil {
		return err
	}
	added := plan.added
	if pacer := cpu.PacerFrom(ctx); pacer != nil {
		// A heavy event: its messages go in pages, resting between them,
		// so Postgres inserts them at a fraction of a core. One
		// transaction still holds them all: bad content leaves none.
		for len(added) > pacedInsertRows {
			page := added[:pacedInsertRows]
			if err := tx.Pipeline(ctx, func(p *store.Tx) error { return insertMessages(ctx, p, page) }); err != nil {
				return err
			}
			added = added[pacedInsertRows:]
			if err := pacer.Pause(ctx); err != nil {
				return err
			}
		}
	}
	return tx.Pipeline(ctx, func(p *store.Tx) error { return queueWrites(ctx, p, plan, rows, added, waited) })
}

// outboxRows encodes the events a plan announces.
func outboxRows(ctx context.Context, plan turnPlan) ([]store.OutboxEvent, error) {
	rows := make([]store.OutboxEvent, len(plan.outgoing))
	for i, e := range plan.outgoing {
		var err error
		if rows[i], err = outbox.Emit(ctx, e); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// queueWrites queues a plan's writes on a pipelined transaction, with rows
// its outbox rows and added the messages not written yet.
func queueWrites(ctx context.Context, p *store.Tx, plan turnPlan, rows []store.OutboxEvent, added []store.Message, waited bool) error {
	if err := queueOffloads(ctx, p, plan); err != nil {
		return err
	}
	if err := insertMessages(ctx, p, added); err != nil {
		return err
	}
	for _, e := range rows {
		if err := p.Enqueue(ctx, e); err != nil {
			return err
		}
	}
	if err := recordTurn(ctx, p, plan.ev, waited, store.TurnApplied, "", plan.next.TokenCount, plan.next.State); err != nil {
		return err
	}
	return p.SaveSessions(ctx, plan.next)
}

// queueOffloads queues a plan's new offload decisions: each result stored
// whole and its replacement.
func queueOffloads(ctx context.Context, p *store.Tx, plan turnPlan) error {
	for _, d := range plan.decisions {
		if d.Recorded {
			continue
		}
		if err := p.InsertToolResult(ctx, store.ToolResult{
			ID: d.ToolResultID, SessionID: plan.next.SessionID, MessageUUID: d.MessageUUID,
			ToolUseID: d.ToolUseID, Content: d.Original, SizeChars: int64(d.SizeChars),
		}); err != nil {
			return err
		}
		if err := p.RecordReplacement(ctx, store.Replacement{
			SessionID: plan.next.SessionID, ToolUseID: d.ToolUseID, Kind: store.ReplaceOffload,
			ToolResultID: d.ToolResultID, Text: d.Replacement,
		}); err != nil {
			return err
		}
	}
	return nil
}

// pacedInsertRows is how many messages a heavy event inserts between rests:
// a few milliseconds of Postgres's work.
const pacedInsertRows = 200

// insertMessages queues the inserts of msgs on a pipelined transaction.
func insertMessages(ctx context.Context, p *store.Tx, msgs []store.Message) error {
	for _, m := range msgs {
		if _, err := p.InsertMessage(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// stale reports whether a response's usage was measured on the context as it
// was before the session's latest compaction: its input is at or above the
// midpoint between the sizes before and after it. Such usage says nothing of
// the compacted context, so the response is counted by its estimate until a
// request built on the compacted context reports.
func stale(s sessionstate.Session, u turn.Usage) bool {
	return s.StaleUsageAbove > 0 && u.InputSide() >= s.StaleUsageAbove
}

// reject records ev as refused, counts it on the session and dead-letters it
// through the outbox; the session moves past it (a late event's seq is
// behind already), so later good events still apply.
func (s *Service) reject(ctx context.Context, tx *store.Tx, sess *sessionstate.Session, ev turn.Event, waited bool, ie *turn.InputError) error {
	payload, err := turn.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode rejected event: %w", err)
	}
	next := *sess
	next.AppliedSeq = max(next.AppliedSeq, ev.Seq)
	next.RejectedTurns++
	err = tx.Pipeline(ctx, func(p *store.Tx) error {
		if err := recordTurn(ctx, p, ev, waited, store.TurnRejected, ie.Error(), next.TokenCount, next.State); err != nil {
			return err
		}
		if err := p.Enqueue(ctx, store.OutboxEvent{
			Subject: bus.DeadLetterSubject(bus.Subject(bus.KindTurnCompleted, ev.TenantID, ev.SessionID)),
			MsgID:   "rejected:" + ev.EventID,
			Payload: payload,
			Headers: map[string]string{
				bus.HeaderDeadLetterReason:   ie.Error(),
				bus.HeaderDeadLetterConsumer: "token-accounting",
				bus.HeaderOriginalMsgID:      ev.EventID,
			},
		}); err != nil {
			return err
		}
		return p.SaveSessions(ctx, next)
	})
	if err != nil {
		return err
	}
	*sess = next
	s.metrics.rejected(ctx, string(ie.Reason))
	s.log.Warn("turn rejected", "tenant", ev.TenantID, "session", ev.SessionID, "seq", ev.Seq, "event_id", ev.EventID, "reason", ie.Reason, "detail", ie.Detail)
	return nil
}

// recordTurn writes the outcome of an event: a new row for one applied on
// arrival, an update of the row of one that waited.
func recordTurn(ctx context.Context, tx *store.Tx, ev turn.Event, waited bool, status, reason string, count int64, state string) error {
	if waited {
		return tx.FinishTurn(ctx, ev.EventID, status, reason, count, state)
	}
	return tx.RecordAppliedTurn(ctx, ev.SessionID, ev.EventID, ev.Seq, status, reason, count, state)
}

// contentHash identifies a message's content as the backend sent it.
func contentHash(role string, encoded []byte) []byte {
	h := sha256.New()
	h.Write([]byte(role))
	h.Write([]byte{0})
	h.Write(encoded)
	return h.Sum(nil)
}
