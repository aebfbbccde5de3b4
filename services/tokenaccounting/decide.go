package tokenaccounting

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// One path decides every event. A batch of one tenant's events (one event
// alone is a batch of one) is decided in one transaction: it locks the
// batch's sessions and reads what its events are decided from in one round
// trip (readBatch), decides each event in session and seq order against its
// session as the batch's earlier events left it (decider.decide: applied,
// rejected, kept waiting, a duplicate, refused, or left for a later batch),
// and sends every write in one pipeline with the COMMIT (decider.commit).
// What is counted and logged of the decisions waits for the commit.
//
// A decision that must read what the batch wrote (a seq the session holds
// already, the events waiting behind a gap, the context's estimate when the
// model changes) sends the batch's writes so far first (decider.flush): the
// reads then see the batch as the events' own transactions would have.

// decision is what a batch decided for one of its events.
type decision struct {
	q *queued
	// outcome is what became of the event; "" for one refused, held back
	// or left alone.
	outcome Outcome
	// err refuses the event: nothing of it was written.
	err error
	// hold: the event is worth the lane's next batch (its session was not
	// taken, or it is ahead of its session's next seq). alone: its session
	// was not taken and no later batch is coming; it is applied on its own.
	hold, alone bool
	// applied: the event's turn applied (not rejected); waited counts the
	// events kept waiting that applied after it.
	applied bool
	waited  int
}

// decider decides a batch's events in its transaction and holds what they
// write until it is sent.
type decider struct {
	s   *Service
	tx  *store.Tx
	set tenantcfg.Settings
	now time.Time
	// sessions are the sessions the batch locked, as its decided events
	// leave them.
	sessions map[string]sessionstate.Session
	// known and frozen are, by session, the stored message hashes and the
	// offload decisions the batch read for its events, and what its
	// decided events stored since (remember); prior is the tenant's
	// estimate prior, nil until read.
	known  map[string]map[string][]byte
	frozen map[string]map[string]store.Replacement
	prior  *[2]float64
	w      pending
	// wrote: something was written or waits to be; a batch that writes
	// nothing rolls back, so no session it created stays behind.
	wrote bool
	// effects are what the decisions count and log, once the transaction
	// committed.
	effects []func()
}

// pending are a batch's writes not sent yet.
type pending struct {
	messages []store.Message
	rows     []store.OutboxEvent
	turns    []turnRecord
	offloads []turnPlan
	sessions map[string]bool // the sessions changed
}

// turnRecord is the outcome of an event, for its turns row.
type turnRecord struct {
	ev             turn.Event
	waited         bool
	status, reason string
	count          int64
	state          string
}

// newDecider is a decider over the sessions a transaction locked.
func (s *Service) newDecider(tx *store.Tx, set tenantcfg.Settings, sessions map[string]sessionstate.Session) *decider {
	return &decider{
		s: s, tx: tx, set: set, now: s.now().UTC(), sessions: sessions,
		known: map[string]map[string][]byte{}, frozen: map[string]map[string]store.Replacement{},
	}
}

// decideBatch decides a batch of one tenant's events in one transaction and
// returns each event's decision, in session and seq order. alone: the batch
// is one event, whose session it waits for (Config.SessionLockWait) and
// creates whatever the seq; otherwise it takes the free sessions of the
// batch and creates a session only for its first turn. hold: an event
// worth a later batch, with tries left, is held back for it. A heavy
// event's messages are written at pacer's pace (nil: at once). An error
// means nothing of the batch was written.
func (s *Service) decideBatch(ctx context.Context, tenant string, batch []*queued, alone, hold bool, pacer *cpu.Pacer) ([]decision, error) {
	set, err := s.settings.For(ctx, tenant)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(batch, func(a, b *queued) int {
		return cmp.Or(cmp.Compare(a.ev.SessionID, b.ev.SessionID), cmp.Compare(a.ev.Seq, b.ev.Seq))
	})
	var decided []decision
	var effects []func()
	err = s.store.InTxWaiting(ctx, tenant, s.cfg.SessionLockWait, func(tx *store.Tx) error {
		d, err := s.readBatch(ctx, tx, set, batch, alone)
		if err != nil {
			return err
		}
		decided = make([]decision, 0, len(batch))
		for _, q := range batch {
			dec, err := d.decide(ctx, q, hold && q.tries+1 < batchTries && q.ctx.Err() == nil)
			if err != nil {
				return err
			}
			decided = append(decided, dec)
		}
		effects = d.effects
		return d.commit(ctx, pacer)
	})
	if errors.Is(err, errNothingPlanned) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	for _, f := range effects {
		f()
	}
	return decided, nil
}

// decide decides one event of the batch. mayHold: an event worth a later
// batch is held back for it.
func (d *decider) decide(ctx context.Context, q *queued, mayHold bool) (decision, error) {
	ev := q.ev
	dec := decision{q: q}
	sess, ok := d.sessions[ev.SessionID]
	switch {
	case !ok && mayHold, ok && mayHold && ev.Seq > sess.AppliedSeq+1:
		// Its session held elsewhere (or not there yet), or its seq ahead
		// of its session: a batch or two usually mends either.
		dec.hold = true
		return dec, nil
	case !ok:
		dec.alone = true
		return dec, nil
	}
	if w := d.set.Limits.SeqWindow; w > 0 && ev.Seq > sess.AppliedSeq+w {
		// Refused before anything is written (a new session is not even
		// created): kept, it would let the gap timeout move the session
		// that far ahead, and every later turn would be late.
		d.count(q.ctx, limits.LimitSeqWindow)
		dec.err = turn.Refuse(turn.ReasonSeqTooFar, "seq %d of session %s is more than the tenant's seq_window of %d ahead of the applied seq %d", ev.Seq, ev.SessionID, w, sess.AppliedSeq)
		return dec, nil
	}
	switch {
	case ev.Seq <= sess.AppliedSeq:
		if err := d.flush(ctx); err != nil {
			return dec, err
		}
		prev, err := d.tx.TurnBySeq(ctx, ev.SessionID, ev.Seq)
		switch {
		case errors.Is(err, store.ErrNotFound):
			// The gap timeout gave this seq up, so no row holds it: the
			// refusal takes it, which makes a redelivery a duplicate, and
			// is counted on the session.
			dec.outcome = OutcomeRejected
			return dec, d.reject(q.ctx, ev, false, turn.Refuse(turn.ReasonLate, "seq %d of session %s arrived after the session moved past it (the gap timeout gave it up)", ev.Seq, ev.SessionID))
		case err != nil:
			return dec, err
		case prev.EventID != ev.EventID:
			dec.err = turn.Refuse(turn.ReasonSeqConflict, "seq %d of session %s is taken (%s, %s)", ev.Seq, ev.SessionID, prev.Status, prev.EventID)
		default:
			dec.outcome = OutcomeDuplicate
		}
		return dec, nil
	case ev.Seq > sess.AppliedSeq+1:
		// Out of order: keep the event until its predecessors arrive.
		return d.wait(ctx, dec)
	}
	dec.outcome = OutcomeApplied
	var err error
	if dec.applied, err = d.applyEvent(ctx, q.ctx, ev, q.size, q.in, false); err != nil {
		return dec, err
	}
	dec.waited, err = d.applyWaiting(ctx, q.ctx, ev.SessionID)
	return dec, err
}

// wait keeps an event ahead of its session's next seq until its
// predecessors arrive.
func (d *decider) wait(ctx context.Context, dec decision) (decision, error) {
	ev := dec.q.ev
	payload, err := turn.Marshal(ev)
	if err != nil {
		return dec, fmt.Errorf("encode waiting event: %w", err)
	}
	if err := d.flush(ctx); err != nil {
		return dec, err
	}
	inserted, prev, err := d.tx.InsertTurn(ctx, store.Turn{SessionID: ev.SessionID, EventID: ev.EventID, Seq: ev.Seq, Status: store.TurnPending, Payload: payload})
	switch {
	case err != nil:
		return dec, err
	case !inserted && prev.EventID != ev.EventID:
		dec.err = turn.Refuse(turn.ReasonSeqConflict, "seq %d of session %s already belongs to event %s", ev.Seq, ev.SessionID, prev.EventID)
	case !inserted:
		dec.outcome = OutcomeDuplicate
	default:
		d.wrote = true
		sess := d.sessions[ev.SessionID]
		sess.WaitingTurns++
		d.save(sess)
		dec.outcome = OutcomeWaiting
	}
	return dec, nil
}

// applyWaiting applies, in seq order, the waiting events of a session that
// follow its applied seq without a gap, and returns how many it applied.
func (d *decider) applyWaiting(ctx, qctx context.Context, sid string) (int, error) {
	n := 0
	for {
		ev, size, ok, err := d.nextWaiting(ctx, sid)
		if err != nil || !ok {
			return n, err
		}
		if _, err := d.applyEvent(ctx, qctx, ev, size, nil, true); err != nil {
			return n, err
		}
		n++
	}
}

// nextWaiting returns the waiting event that is the session's next seq, if
// any, with the size of its stored encoding.
func (d *decider) nextWaiting(ctx context.Context, sid string) (turn.Event, int, bool, error) {
	sess := d.sessions[sid]
	if sess.WaitingTurns == 0 {
		return turn.Event{}, 0, false, nil
	}
	if err := d.flush(ctx); err != nil {
		return turn.Event{}, 0, false, err
	}
	next, err := d.tx.NextPendingTurn(ctx, sid)
	if errors.Is(err, store.ErrNotFound) {
		sess.WaitingTurns = 0 // the counter said otherwise; the table is the truth
		d.save(sess)
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
	d.save(sess)
	return ev, len(next.Payload), true, nil
}

// applyEvent applies ev, its session's next seq: it stores the messages
// not stored before, moves the session's count and announces its events,
// or rejects it when its content is refused. in is the event prepared, with
// its stored hashes and offload decisions among the batch's reads; nil
// (an event that waited) prepares it and reads them. waited: the event was
// kept waiting, and its turns row is there. It reports whether the event
// applied rather than being rejected.
func (d *decider) applyEvent(ctx, qctx context.Context, ev turn.Event, size int, in *turnInput, waited bool) (bool, error) {
	sid := ev.SessionID
	if ie, limit := turnLimitRefusal(d.set.Limits, ev, size); ie != nil {
		d.count(qctx, limit)
		return false, d.reject(qctx, ev, waited, ie)
	}
	if ie := accounting.CheckWindow(d.set.Tokens, ev); ie != nil {
		return false, d.reject(qctx, ev, waited, ie)
	}
	var input turnInput
	if in != nil {
		input = *in // a copy: a batch retried decides from the event as prepared
		input.known = knownOf(d.known[sid], input.uuids)
	} else {
		var err error
		if input, err = d.readInput(ctx, ev); err != nil {
			return false, err
		}
	}
	sess := d.sessions[sid]
	if ie, limit := knownRefusal(d.set.Limits, sess, input); ie != nil {
		if limit != "" {
			d.count(qctx, limit)
		}
		return false, d.reject(qctx, ev, waited, ie)
	}
	var err error
	input.shown, input.decisions, err = d.set.Offload.Apply(input.msgs,
		func(id string) (string, bool, error) { r, ok := d.frozen[sid][id]; return r.Text, ok, nil },
		func(id string) string { return toolResultID(ev.TenantID, sid, id) })
	if err != nil {
		return false, err
	}
	if sess.AppliedSeq == 0 && sess.EstimateFactor == 0 && sess.DenseFactor == 0 {
		// A new session starts from what the tenant's sessions learnt.
		if d.prior == nil {
			prose, dense, err := d.tx.EstimatePrior(ctx)
			if err != nil {
				return false, err
			}
			d.prior = &[2]float64{prose, dense}
		}
		sess.EstimateFactor, sess.DenseFactor = d.prior[0], d.prior[1]
	}
	before := sess
	d.effects = append(d.effects, func() { d.s.checkPrefix(qctx, before, ev) })
	if accounting.RequestOf(ev).ModelChanged(sess) {
		// The usage was measured by another model: the context is counted
		// by its estimate until the new model reports.
		if err := d.flush(ctx); err != nil {
			return false, err
		}
		if input.contextEstimate, err = d.tx.ContextEstimate(ctx, sess); err != nil {
			return false, err
		}
	}
	plan, err := planTurn(d.set, sess, input, d.now)
	if err != nil {
		return false, err
	}
	rows, err := outboxRows(ctx, plan)
	if err != nil {
		return false, err
	}
	d.w.messages = append(d.w.messages, plan.added...)
	d.w.rows = append(d.w.rows, rows...)
	d.w.turns = append(d.w.turns, turnRecord{ev: ev, waited: waited, status: store.TurnApplied, count: plan.next.TokenCount, state: plan.next.State})
	d.w.offloads = append(d.w.offloads, plan)
	d.save(plan.next)
	d.remember(sid, plan)
	d.effects = append(d.effects, func() { d.s.noteApplied(qctx, before, plan) })
	return true, nil
}

// readInput prepares an event that was not among the batch's reads (one
// that waited) and reads its session's hashes of its messages and the
// offload decisions made for its tool results.
func (d *decider) readInput(ctx context.Context, ev turn.Event) (turnInput, error) {
	in, err := prepare(ev)
	if err != nil {
		return in, err
	}
	if err := d.flush(ctx); err != nil {
		return in, err
	}
	sid := ev.SessionID
	if in.known, err = d.tx.MessageHashes(ctx, sid, in.uuids); err != nil {
		return in, err
	}
	if len(in.toolUseIDs) > 0 {
		frozen, err := d.tx.ReplacementsFor(ctx, sid, store.ReplaceOffload, in.toolUseIDs)
		if err != nil {
			return in, err
		}
		if d.frozen[sid] == nil {
			d.frozen[sid] = map[string]store.Replacement{}
		}
		for id, r := range frozen {
			d.frozen[sid][id] = r
		}
	}
	return in, nil
}

// reject records ev as refused, counts it on the session and dead-letters
// it through the outbox; the session moves past it (a late event's seq is
// behind already), so later good events still apply.
func (d *decider) reject(qctx context.Context, ev turn.Event, waited bool, ie *turn.InputError) error {
	payload, err := turn.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode rejected event: %w", err)
	}
	next := d.sessions[ev.SessionID]
	next.AppliedSeq = max(next.AppliedSeq, ev.Seq)
	next.RejectedTurns++
	d.w.turns = append(d.w.turns, turnRecord{ev: ev, waited: waited, status: store.TurnRejected, reason: ie.Error(), count: next.TokenCount, state: next.State})
	d.w.rows = append(d.w.rows, store.OutboxEvent{
		Subject: bus.DeadLetterSubject(bus.Subject(bus.KindTurnCompleted, ev.TenantID, ev.SessionID)),
		MsgID:   "rejected:" + ev.EventID,
		Payload: payload,
		Headers: map[string]string{
			bus.HeaderDeadLetterReason:   ie.Error(),
			bus.HeaderDeadLetterConsumer: "token-accounting",
			bus.HeaderOriginalMsgID:      ev.EventID,
		},
	})
	d.save(next)
	d.effects = append(d.effects, func() {
		d.s.metrics.rejected(qctx, string(ie.Reason))
		d.s.log.Warn("turn rejected", "tenant", ev.TenantID, "session", ev.SessionID, "seq", ev.Seq, "event_id", ev.EventID, "reason", ie.Reason, "detail", ie.Detail)
	})
	return nil
}

// count counts a refusal under a tenant limit once the batch commits.
func (d *decider) count(qctx context.Context, limit string) {
	d.effects = append(d.effects, func() { d.s.cfg.Limits.Record(qctx, limit) })
}

// save makes sess the session as the batch leaves it, written with the
// batch.
func (d *decider) save(sess sessionstate.Session) {
	d.sessions[sess.SessionID] = sess
	if d.w.sessions == nil {
		d.w.sessions = map[string]bool{}
	}
	d.w.sessions[sess.SessionID] = true
	d.wrote = true
}

// remember makes what a decided event stores visible to the batch's later
// events of its session, as the store would show them to an event applied
// after it: its messages' hashes and its offload decisions.
func (d *decider) remember(sid string, plan turnPlan) {
	for _, m := range plan.added {
		if d.known[sid] == nil {
			d.known[sid] = map[string][]byte{}
		}
		d.known[sid][m.UUID] = m.ContentHash
	}
	for _, dec := range plan.decisions {
		if d.frozen[sid] == nil {
			d.frozen[sid] = map[string]store.Replacement{}
		}
		if _, ok := d.frozen[sid][dec.ToolUseID]; !ok {
			d.frozen[sid][dec.ToolUseID] = store.Replacement{SessionID: sid, ToolUseID: dec.ToolUseID, Kind: store.ReplaceOffload, ToolResultID: dec.ToolResultID, Text: dec.Replacement}
		}
	}
}

// flush sends the batch's writes so far, for a read that must see them.
func (d *decider) flush(ctx context.Context) error {
	if d.w.empty() {
		return nil
	}
	w := d.w
	d.w = pending{}
	return d.tx.Pipeline(ctx, func(p *store.Tx) error { return w.queue(ctx, p, d.sessions) })
}

// commit sends the batch's writes and the COMMIT in one round trip, or
// returns errNothingPlanned for a batch that wrote nothing (roll it back).
// With a pacer, the messages go first, a page at a time, resting between
// pages, so Postgres inserts them at a fraction of a core; the one
// transaction still holds them all.
func (d *decider) commit(ctx context.Context, pacer *cpu.Pacer) error {
	if !d.wrote {
		return errNothingPlanned
	}
	if pacer != nil {
		for len(d.w.messages) > pacedInsertRows {
			page := d.w.messages[:pacedInsertRows]
			if err := d.tx.Pipeline(ctx, func(p *store.Tx) error { return p.InsertMessages(ctx, page) }); err != nil {
				return err
			}
			d.w.messages = d.w.messages[pacedInsertRows:]
			if err := pacer.Pause(ctx); err != nil {
				return err
			}
		}
	}
	return d.tx.PipelineCommit(ctx, func(p *store.Tx) error { return d.w.queue(ctx, p, d.sessions) })
}

// pacedInsertRows is how many messages a heavy event inserts between rests:
// a few milliseconds of Postgres's work.
const pacedInsertRows = 200

func (w *pending) empty() bool {
	return len(w.messages) == 0 && len(w.rows) == 0 && len(w.turns) == 0 && len(w.offloads) == 0 && len(w.sessions) == 0
}

// queue queues the writes on a pipelined transaction: every message in one
// statement, every outbox row in one (in the events' order), the turns
// applied on arrival in one and the other turns' outcomes each, each
// offload decision, then every session changed in one, as sessions holds
// them.
func (w *pending) queue(ctx context.Context, p *store.Tx, sessions map[string]sessionstate.Session) error {
	if err := p.InsertMessages(ctx, w.messages); err != nil {
		return err
	}
	if err := p.EnqueueAll(ctx, w.rows); err != nil {
		return err
	}
	var applied []store.AppliedTurn
	for _, t := range w.turns {
		if t.waited || t.status != store.TurnApplied {
			if err := recordTurn(ctx, p, t); err != nil {
				return err
			}
			continue
		}
		applied = append(applied, store.AppliedTurn{SessionID: t.ev.SessionID, EventID: t.ev.EventID, Seq: t.ev.Seq, TokenCount: t.count, State: t.state})
	}
	if err := p.RecordAppliedTurns(ctx, applied); err != nil {
		return err
	}
	for _, plan := range w.offloads {
		if err := queueOffloads(ctx, p, plan); err != nil {
			return err
		}
	}
	ids := make([]string, 0, len(w.sessions))
	for id := range w.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	changed := make([]sessionstate.Session, len(ids))
	for i, id := range ids {
		changed[i] = sessions[id]
	}
	return p.SaveSessions(ctx, changed...)
}

// recordTurn writes the outcome of an event: a new row for one decided on
// arrival, an update of the row of one that waited.
func recordTurn(ctx context.Context, p *store.Tx, t turnRecord) error {
	if t.waited {
		return p.FinishTurn(ctx, t.ev.EventID, t.status, t.reason, t.count, t.state)
	}
	return p.RecordAppliedTurn(ctx, t.ev.SessionID, t.ev.EventID, t.ev.Seq, t.status, t.reason, t.count, t.state)
}

// knownOf is the part of a session's stored hashes that names uuids.
func knownOf(stored map[string][]byte, uuids []string) map[string][]byte {
	out := map[string][]byte{}
	for _, u := range uuids {
		if h, ok := stored[u]; ok {
			out[u] = h
		}
	}
	return out
}
