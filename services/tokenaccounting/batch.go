package tokenaccounting

import (
	"cmp"
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Group commit. A turn is a handful of small rows; in a transaction of its
// own it costs a commit and five round trips, several times what its rows
// cost Postgres. So the events of a tenant that arrive while a transaction
// of their lane (below) is under way wait, and go together in the next one:
// one statement locks (or creates) all their sessions, one reads the
// messages they resend, one their tool results' decisions, all three in
// one round trip; one pipeline writes all their messages, outbox rows and
// turns, a statement each, and each session's row; one commit. Each
// message is acknowledged only after the transaction holding its event
// committed (its handler waits for it).
// At low load an event finds nobody running and goes in a batch of its
// own, by the same few statements: batching adds no wait, it only takes
// what queued up anyway. (Handing a lone event back to the one-event path
// instead left the drain with nothing to hold: the events arriving while
// that event's transaction ran found no batch under way and went alone
// too, and the group commit stayed off under any load that began light.)
//
// Only the plain case is batched: the session's next seq, free, with no
// events waiting behind a gap, on the session's model, within the tenant's
// limits. Everything else — a duplicate, an out-of-order event, a refusal,
// a session another transaction holds, a batch whose transaction failed —
// is applied on its own afterwards by the one-event path (apply), which
// decides it exactly as it always has.
//
// Two of those usually mend themselves within a batch or two, and are held
// back for the tenant's next batch instead (at most batchTries batches in
// all): an event ahead of its session's next seq, and one whose session
// another transaction holds. The workers hand their events to the batches
// in the order their preparing ends, not quite the stream's, so under load
// a session's seq 5 may reach a batch before its seq 4. Sent on its own,
// seq 5 was kept waiting, which made seq 4 go on its own too (its session
// then has an event waiting), and each of them held the session while the
// next batch came for its seq 6: one late event cost a session several
// transactions and the workers their waits for its lock.

// errAlone tells an event's handler to apply it on its own.
var errAlone = errors.New("tokenaccounting: apply on its own")

// loneBatchBytes is the largest event that goes through the batch path
// alone; a larger one goes through the one-event path, as a large turn
// always did.
const loneBatchBytes = 256 << 10

// batchTries is how many of its tenant's batches an event held back (see
// above) goes through before it is applied on its own.
const batchTries = 3

// errNothingPlanned rolls back a batch's transaction that applies none of
// its events.
var errNothingPlanned = errors.New("tokenaccounting: nothing in the batch to apply")

// queued is an event waiting for its tenant's next batch.
type queued struct {
	ctx  context.Context
	ev   turn.Event
	size int
	at   time.Time
	// in is the event's messages encoded and hashed (prepare), done by its
	// handler before it queues, beside the other handlers: the tenant's
	// batches go one transaction at a time, and each holds its
	// transaction open only for what needs the database. nil when not
	// done (a large event: it may well go on its own) or when prepare
	// failed; readBatch then prepares it.
	in *turnInput
	// tries counts the batches that held the event back for a later one.
	tries int
	done  chan error // nil: applied in the batch; errAlone: apply it on its own
}

// prepared is prepare(ev) for an event of size bytes that will likely be
// applied in a batch, or nil.
func prepared(ev turn.Event, size int) *turnInput {
	if size > loneBatchBytes {
		return nil
	}
	in, err := prepare(ev)
	if err != nil {
		return nil
	}
	return &in
}

// batches holds each lane's events waiting for a transaction, and which
// lanes have one under way.
type batches struct {
	mu      sync.Mutex
	waiting map[laneKey][]*queued
}

// A tenant's batches go in Config.Lanes lanes, one transaction at a time
// each, so that while one lane's transaction waits for Postgres (its round
// trips, its commit's flush) another's events are planned and sent: with a
// single lane, the accountant and Postgres took turns, and under a
// saturating load each was idle half the time. A session always goes in
// the same lane, so its events still reach their batches in the order its
// lane hands them over, and two lanes never wait for one session's lock.
type laneKey struct {
	tenant string
	lane   uint32
}

// lane is the lane of a session's events among n.
func lane(session string, n int) uint32 {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(session)) // a hash's Write never fails
	return h.Sum32() % uint32(n)
}

// applyBatched applies ev in its tenant's next batch, or on its own when
// the batch leaves it out.
func (s *Service) applyBatched(ctx context.Context, ev turn.Event, size int) error {
	q := &queued{ctx: ctx, ev: ev, size: size, at: s.now(), in: prepared(ev, size), done: make(chan error, 1)}
	key := laneKey{ev.TenantID, lane(ev.SessionID, s.cfg.Lanes)}
	s.batches.mu.Lock()
	if s.batches.waiting == nil {
		s.batches.waiting = map[laneKey][]*queued{}
	}
	list, running := s.batches.waiting[key]
	s.batches.waiting[key] = append(list, q)
	s.batches.mu.Unlock()
	if !running {
		go s.drain(key)
	}
	var err error
	select {
	case err = <-q.done:
	case <-ctx.Done():
		// The batch may still apply it: the message, not acknowledged,
		// comes again and is then a duplicate.
		return ctx.Err()
	}
	if errors.Is(err, errAlone) {
		return s.apply(ctx, ev, size)
	}
	return err
}

// ApplyAll applies events as the group commit does, without the bus: each
// tenant's in batches of at most Config.Batch events, one transaction each,
// the events a batch leaves out applied one by one after it. It returns what
// Apply would have for each event.
func (s *Service) ApplyAll(ctx context.Context, evs []turn.Event) []error {
	errs := make([]error, len(evs))
	byTenant := map[string][]int{}
	var tenants []string
	for i, ev := range evs {
		if byTenant[ev.TenantID] == nil {
			tenants = append(tenants, ev.TenantID)
		}
		byTenant[ev.TenantID] = append(byTenant[ev.TenantID], i)
	}
	for _, tenant := range tenants {
		for idx := range slices.Chunk(byTenant[tenant], max(s.cfg.Batch, 1)) {
			batch := make([]*queued, len(idx))
			for j, i := range idx {
				batch[j] = &queued{ctx: ctx, ev: evs[i], at: s.now(), in: prepared(evs[i], 0), done: make(chan error, 1)}
			}
			s.applyBatch(laneKey{tenant: tenant}, batch, false)
			for j, i := range idx {
				if errs[i] = <-batch[j].done; errors.Is(errs[i], errAlone) {
					errs[i] = s.apply(ctx, evs[i], 0)
				}
			}
		}
	}
	return errs
}

// drain runs a lane's batches, one transaction at a time, until nothing
// of the lane waits. A lane present in waiting, even with an empty list,
// has its drain running.
func (s *Service) drain(key laneKey) {
	for {
		s.batches.mu.Lock()
		list := s.batches.waiting[key]
		if len(list) == 0 {
			delete(s.batches.waiting, key)
			s.batches.mu.Unlock()
			return
		}
		if !slices.ContainsFunc(list, func(q *queued) bool { return q.tries == 0 }) {
			// Only events held back wait: what they wait for has not been
			// handed over yet. A moment for it to come.
			s.batches.mu.Unlock()
			time.Sleep(heldBackPause)
			s.batches.mu.Lock()
			list = s.batches.waiting[key]
		}
		n := min(len(list), s.cfg.Batch)
		batch := list[:n:n]
		s.batches.waiting[key] = append([]*queued{}, list[n:]...)
		s.batches.mu.Unlock()
		s.applyBatch(key, batch, true)
	}
}

// heldBackPause is how long a tenant's batches pause when only events held
// back wait.
const heldBackPause = time.Millisecond

// holdBack puts events back at the head of their lane's waiting list, for
// its next batch; the lane's drain is running (it called).
func (s *Service) holdBack(key laneKey, qs []*queued) {
	for _, q := range qs {
		q.tries++
	}
	s.batches.mu.Lock()
	s.batches.waiting[key] = append(qs, s.batches.waiting[key]...)
	s.batches.mu.Unlock()
}

// planned is an event of a batch with what applying it writes.
type planned struct {
	q      *queued
	before sessionstate.Session
	plan   turnPlan
}

// applyBatch applies the batchable events of one tenant's batch in one
// transaction and answers each event's handler: nil for one applied,
// errAlone for one left to its own transaction. With hold, called from the
// lane's drain, the events worth another batch (see above) go back to
// the waiting list instead, unanswered.
func (s *Service) applyBatch(key laneKey, batch []*queued, hold bool) {
	tenant := key.tenant
	if len(batch) == 1 && batch[0].size > loneBatchBytes {
		batch[0].done <- errAlone // a large turn has its own path's bounds (its messages a page at a time)
		return
	}
	ctx := batch[0].ctx
	slices.SortStableFunc(batch, func(a, b *queued) int {
		return cmp.Or(cmp.Compare(a.ev.SessionID, b.ev.SessionID), cmp.Compare(a.ev.Seq, b.ev.Seq))
	})
	var done []planned
	var later []*queued
	set, err := s.settings.For(ctx, tenant)
	if err == nil {
		err = s.store.InTxWaiting(ctx, tenant, s.cfg.SessionLockWait, func(tx *store.Tx) error {
			var err error
			done, later, err = s.planBatch(ctx, tx, set, batch)
			switch {
			case err != nil:
				return err
			case len(done) == 0:
				return errNothingPlanned // no session it created stays behind
			}
			return writeBatch(ctx, tx, done)
		})
	}
	if errors.Is(err, errNothingPlanned) {
		err = nil
	}
	if err != nil {
		// Nothing of the batch was written: each event is decided on its
		// own, which also reports what is wrong with it, if anything.
		if ctx.Err() == nil && !errors.Is(err, store.ErrSessionBusy) {
			s.log.Debug("batch not applied; its events go one by one", "tenant", tenant, "events", len(batch), "err", err)
		}
		done, later = nil, nil
	}
	s.metrics.batched(ctx, len(done))
	answered := make(map[*queued]bool, len(batch))
	for _, d := range done {
		s.noteApplied(d.q.ctx, d.before, d.plan)
		s.metrics.outcome(d.q.ctx, OutcomeApplied, s.now().Sub(d.q.at))
		answered[d.q] = true
		d.q.done <- nil
	}
	if hold {
		var back []*queued
		for _, q := range later {
			if q.tries+1 < batchTries && q.ctx.Err() == nil {
				back, answered[q] = append(back, q), true
			}
		}
		if len(back) > 0 {
			s.holdBack(key, back)
		}
	}
	for _, q := range batch {
		if !answered[q] {
			q.done <- errAlone
		}
	}
}

// writeBatch sends the writes of a batch's planned events in one pipeline:
// every message in one statement, every outbox row in one (in the events'
// order), every turn in one, each offload decision, then every session in
// one (done is in session and seq order). The transaction's COMMIT goes
// last in the same round trip: writeBatch is the batch's last step.
func writeBatch(ctx context.Context, tx *store.Tx, done []planned) error {
	var added []store.Message
	var rows []store.OutboxEvent
	turns := make([]store.AppliedTurn, 0, len(done))
	for _, d := range done {
		added = append(added, d.plan.added...)
		r, err := outboxRows(ctx, d.plan)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
		turns = append(turns, store.AppliedTurn{SessionID: d.plan.ev.SessionID, EventID: d.plan.ev.EventID, Seq: d.plan.ev.Seq,
			TokenCount: d.plan.next.TokenCount, State: d.plan.next.State})
	}
	return tx.PipelineCommit(ctx, func(p *store.Tx) error {
		if err := p.InsertMessages(ctx, added); err != nil {
			return err
		}
		if err := p.EnqueueAll(ctx, rows); err != nil {
			return err
		}
		if err := p.RecordAppliedTurns(ctx, turns); err != nil {
			return err
		}
		sessions := make([]sessionstate.Session, 0, len(done))
		for i, d := range done {
			if err := queueOffloads(ctx, p, d.plan); err != nil {
				return err
			}
			if i+1 == len(done) || done[i+1].plan.next.SessionID != d.plan.next.SessionID {
				sessions = append(sessions, d.plan.next) // the session after its last event of the batch
			}
		}
		return p.SaveSessions(ctx, sessions...)
	})
}

// planBatch locks the batch's sessions and plans its batchable events, in
// session and seq order, from reads made for the whole batch at once; the
// others are left out, and of those, later names the ones a later batch may
// take: their session held elsewhere (or not there yet), or their seq ahead
// of it. It writes nothing but the sessions it creates.
func (s *Service) planBatch(ctx context.Context, tx *store.Tx, set tenantcfg.Settings, batch []*queued) (out []planned, later []*queued, err error) {
	var ids, agents []string
	var creates []bool
	for i, q := range batch {
		if i == 0 || q.ev.SessionID != batch[i-1].ev.SessionID {
			// Only a session's first turn can go in a batch that creates
			// it; any other leaves no session behind (apply decides it).
			ids, agents, creates = append(ids, q.ev.SessionID), append(agents, q.ev.Agent()), append(creates, q.ev.Seq == 1)
		}
	}
	r, err := readBatch(ctx, tx, batch, ids, agents, creates)
	if err != nil {
		return nil, nil, err
	}
	sessions := r.sessions
	now := s.now().UTC()
	for i, q := range batch {
		sid := q.ev.SessionID
		sess, ok := sessions[sid]
		in := r.ins[i]
		if !ok || (in != nil && q.ev.Seq > sess.AppliedSeq+1) {
			later = append(later, q)
			continue
		}
		if in == nil || !batchable(set, sess, q) {
			continue
		}
		in.known = knownOf(r.known[sid], in.uuids)
		if ie, _ := knownRefusal(set.Limits, sess, *in); ie != nil {
			continue
		}
		in.shown, in.decisions, err = set.Offload.Apply(in.msgs,
			func(id string) (string, bool, error) { rep, ok := r.frozen[sid][id]; return rep.Text, ok, nil },
			func(id string) string { return toolResultID(q.ev.TenantID, sid, id) })
		if err != nil {
			return nil, nil, err
		}
		if sess.AppliedSeq == 0 && sess.EstimateFactor == 0 && sess.DenseFactor == 0 {
			// A new session starts from what the tenant's sessions learnt
			// (read with the batch: batchable, seq 1).
			sess.EstimateFactor, sess.DenseFactor = r.prior[0], r.prior[1]
		}
		s.checkPrefix(q.ctx, sess, q.ev)
		plan, err := planTurn(set, sess, *in, now)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, planned{q: q, before: sess, plan: plan})
		// The batch's later events of the session see this one applied.
		sessions[sid] = plan.next
		r.remember(sid, plan)
	}
	return out, later, nil
}

// batchReads is what a batch's events are decided from, read for all of
// them at once: the sessions it locked (or created), each event's messages
// (nil for one whose session is held elsewhere, or that cannot be encoded),
// the hashes of those its session stored, the offload decisions made for
// its tool results, and the tenant's prior when the batch holds a session's
// first turn.
type batchReads struct {
	sessions map[string]sessionstate.Session
	ins      []*turnInput
	known    map[string]map[string][]byte
	frozen   map[string]map[string]store.Replacement
	prior    [2]float64 // prose, dense; read only for a batch with a seq 1
}

// readBatch locks the batch's sessions (ids, agents and creates, as
// LockFreeSessions takes them) and reads what its events are decided from,
// in one round trip: the reads name every event's session, whether or not
// the lock took it, and what they find of a session held elsewhere goes
// unused.
func readBatch(ctx context.Context, tx *store.Tx, batch []*queued, ids, agents []string, creates []bool) (batchReads, error) {
	r := batchReads{ins: make([]*turnInput, len(batch)), frozen: map[string]map[string]store.Replacement{}}
	var hashSessions, hashUUIDs, toolSessions, toolIDs []string
	firstTurn := false
	for i, q := range batch {
		if q.in == nil {
			in, err := prepare(q.ev)
			if err != nil {
				continue // the event's own transaction reports it
			}
			q.in = &in
		}
		in := *q.in // a copy: a batch retried plans from the event as prepared
		r.ins[i] = &in
		for _, u := range in.uuids {
			hashSessions, hashUUIDs = append(hashSessions, q.ev.SessionID), append(hashUUIDs, u)
		}
		for _, id := range in.toolUseIDs {
			toolSessions, toolIDs = append(toolSessions, q.ev.SessionID), append(toolIDs, id)
		}
		firstTurn = firstTurn || q.ev.Seq == 1
	}
	reads := store.NewReads(tx.Tenant())
	locked := store.Queue(reads, func(tx *store.Tx) (map[string]sessionstate.Session, error) {
		return tx.LockFreeSessions(ctx, ids, agents, creates)
	})
	known := store.Queue(reads, func(tx *store.Tx) (map[string]map[string][]byte, error) {
		return tx.MessageHashesOf(ctx, hashSessions, hashUUIDs)
	})
	var frozen *store.Future[map[string]map[string]store.Replacement]
	if len(toolIDs) > 0 {
		frozen = store.Queue(reads, func(tx *store.Tx) (map[string]map[string]store.Replacement, error) {
			return tx.ReplacementsOf(ctx, store.ReplaceOffload, toolSessions, toolIDs)
		})
	}
	var prior *store.Future[[2]float64]
	if firstTurn {
		// Only a session's first turn can start from the prior: planBatch
		// takes it for a batchable event of a session with no applied seq.
		prior = store.Queue(reads, func(tx *store.Tx) ([2]float64, error) {
			prose, dense, err := tx.EstimatePrior(ctx)
			return [2]float64{prose, dense}, err
		})
	}
	if err := tx.Read(ctx, reads); err != nil {
		return r, err
	}
	var err error
	if r.sessions, err = locked.Get(); err != nil {
		return r, err
	}
	if r.known, err = known.Get(); err != nil {
		return r, err
	}
	if frozen != nil {
		if r.frozen, err = frozen.Get(); err != nil {
			return r, err
		}
	}
	if prior != nil {
		if r.prior, err = prior.Get(); err != nil {
			return r, err
		}
	}
	for i, q := range batch {
		if _, ok := r.sessions[q.ev.SessionID]; !ok {
			r.ins[i] = nil
		}
	}
	return r, nil
}

// remember makes what a planned event stores visible to the batch's later
// events of its session, as the store would show them to an event applied
// after it: its messages' hashes and its offload decisions.
func (r *batchReads) remember(sid string, plan turnPlan) {
	for _, m := range plan.added {
		if r.known[sid] == nil {
			r.known[sid] = map[string][]byte{}
		}
		r.known[sid][m.UUID] = m.ContentHash
	}
	for _, d := range plan.decisions {
		if r.frozen[sid] == nil {
			r.frozen[sid] = map[string]store.Replacement{}
		}
		if _, ok := r.frozen[sid][d.ToolUseID]; !ok {
			r.frozen[sid][d.ToolUseID] = store.Replacement{SessionID: sid, ToolUseID: d.ToolUseID, Kind: store.ReplaceOffload, ToolResultID: d.ToolResultID, Text: d.Replacement}
		}
	}
}

// batchable reports whether an event takes the plain path with its session
// as it stands: the next seq, nothing waiting, the same model, within the
// tenant's limits and the model's window.
func batchable(set tenantcfg.Settings, sess sessionstate.Session, q *queued) bool {
	ev := q.ev
	if ev.Seq != sess.AppliedSeq+1 || sess.WaitingTurns != 0 || accounting.RequestOf(ev).ModelChanged(sess) {
		return false
	}
	if ie, _ := turnLimitRefusal(set.Limits, ev, q.size); ie != nil {
		return false
	}
	return accounting.CheckWindow(set.Tokens, ev) == nil
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
