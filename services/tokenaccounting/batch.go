package tokenaccounting

import (
	"context"
	"errors"
	"hash/fnv"
	"maps"
	"slices"
	"sync"
	"time"

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
// what queued up anyway. (Handing a lone event to a transaction of its own
// instead left the drain with nothing to hold: the events arriving while
// that event's transaction ran found no batch under way and went alone
// too, and the group commit stayed off under any load that began light.)
//
// A batch decides every event it holds the session of, as one event alone
// would be decided (decide.go): applied, rejected, kept waiting, a
// duplicate or refused. A batch takes only the sessions no other
// transaction holds, and creates a session only for its first turn; an
// event whose session it did not take, and every event of a batch whose
// transaction failed, is applied on its own right after, as a batch of one
// that waits for its session (apply).
//
// Two cases usually mend themselves within a batch or two, and are held
// back for the tenant's next batch instead (at most batchTries batches in
// all): an event ahead of its session's next seq, and one whose session
// another transaction holds. The workers hand their events to the batches
// in the order their preparing ends, not quite the stream's, so under load
// a session's seq 5 may reach a batch before its seq 4. Kept waiting at
// once, seq 5 would cost its batch a round trip to store it, and seq 4's
// batch the reads of the events waiting behind it (decider.applyWaiting),
// one round trip each, all the while holding the batch's sessions.

// errAlone tells an event's handler to apply it on its own.
var errAlone = errors.New("tokenaccounting: apply on its own")

// batchTries is how many of its tenant's batches an event held back (see
// above) goes through before the batch decides it as it stands.
const batchTries = 3

// errNothingPlanned rolls back a batch's transaction that writes nothing.
var errNothingPlanned = errors.New("tokenaccounting: nothing in the batch to write")

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
	// done, or when prepare failed; readBatch then prepares it.
	in *turnInput
	// tries counts the batches that held the event back for a later one.
	tries int
	done  chan error // the handler's answer; errAlone: apply it on its own
}

// prepared is prepare(ev), or nil when it fails.
func prepared(ev turn.Event) *turnInput {
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
	q := &queued{ctx: ctx, ev: ev, size: size, at: s.now(), in: prepared(ev), done: make(chan error, 1)}
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
		return s.apply(ctx, ev, size, nil)
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
				batch[j] = &queued{ctx: ctx, ev: evs[i], at: s.now(), in: prepared(evs[i]), done: make(chan error, 1)}
			}
			s.applyBatch(laneKey{tenant: tenant}, slices.Clone(batch), false) // it sorts its batch: batch keeps idx's order
			for j, i := range idx {
				if errs[i] = <-batch[j].done; errors.Is(errs[i], errAlone) {
					errs[i] = s.apply(ctx, evs[i], 0, nil)
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

// applyBatch decides one tenant's batch in one transaction (decideBatch)
// and answers each event's handler: nil or the event's refusal for one
// decided, errAlone for one whose session the batch did not take. With
// hold, called from the lane's drain, the events worth another batch (see
// above) go back to the waiting list instead, unanswered. When the
// transaction fails, nothing of the batch was written and every event goes
// on its own, which also reports what is wrong with it, if anything.
func (s *Service) applyBatch(key laneKey, batch []*queued, hold bool) {
	ctx := batch[0].ctx
	decided, err := s.decideBatch(ctx, key.tenant, batch, false, hold, nil)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, store.ErrSessionBusy) {
			s.log.Debug("batch not applied; its events go one by one", "tenant", key.tenant, "events", len(batch), "err", err)
		}
		for _, q := range batch {
			q.done <- errAlone
		}
		return
	}
	applied := 0
	var back []*queued
	for _, dec := range decided {
		switch {
		case dec.hold:
			back = append(back, dec.q)
		case dec.alone:
			dec.q.done <- errAlone
		default:
			if dec.applied {
				applied++
			}
			dec.q.done <- s.answer(dec)
		}
	}
	s.metrics.batched(ctx, applied)
	if len(back) > 0 {
		s.holdBack(key, back)
	}
}

// readBatch locks the batch's sessions and reads what its events are
// decided from, in one round trip, and returns a decider over them: each
// event's messages (prepared unless its handler did), the hashes of those
// its session stored, the offload decisions made for its tool results, and
// the tenant's prior when the batch holds a session's first turn. alone
// (a batch of one): the session is waited for and created whatever the
// seq; otherwise the batch takes the sessions no other transaction holds,
// creating one only for its first turn (LockFreeSessions), and the reads
// name every event's session, whether or not the lock took it: what they
// find of a session held elsewhere goes unused.
func (s *Service) readBatch(ctx context.Context, tx *store.Tx, set tenantcfg.Settings, batch []*queued, alone bool) (*decider, error) {
	var ids, agents []string
	var creates []bool
	var hashSessions, hashUUIDs, toolSessions, toolIDs []string
	firstTurn := false
	for i, q := range batch {
		if i == 0 || q.ev.SessionID != batch[i-1].ev.SessionID {
			// Only a session's first turn can go in a batch that creates
			// it; any other leaves no session behind (it is applied alone).
			ids, agents, creates = append(ids, q.ev.SessionID), append(agents, q.ev.Agent()), append(creates, q.ev.Seq == 1)
		}
		if q.in == nil {
			in, err := prepare(q.ev)
			if err != nil {
				continue // deciding the event prepares it again, and fails
			}
			q.in = &in
		}
		for _, u := range q.in.uuids {
			hashSessions, hashUUIDs = append(hashSessions, q.ev.SessionID), append(hashUUIDs, u)
		}
		for _, id := range q.in.toolUseIDs {
			toolSessions, toolIDs = append(toolSessions, q.ev.SessionID), append(toolIDs, id)
		}
		firstTurn = firstTurn || q.ev.Seq == 1
	}
	reads := store.NewReads(tx.Tenant())
	locked := store.Queue(reads, func(tx *store.Tx) (map[string]sessionstate.Session, error) {
		if alone {
			sess, err := tx.LockSession(ctx, ids[0], agents[0])
			return map[string]sessionstate.Session{sess.SessionID: sess}, err
		}
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
		// Only a session's first turn can start from the prior: a session
		// with no applied seq.
		prior = store.Queue(reads, func(tx *store.Tx) ([2]float64, error) {
			prose, dense, err := tx.EstimatePrior(ctx)
			return [2]float64{prose, dense}, err
		})
	}
	if err := tx.Read(ctx, reads); err != nil {
		return nil, err
	}
	sessions, err := locked.Get()
	if err != nil {
		return nil, err
	}
	d := s.newDecider(tx, set, sessions)
	if d.known, err = known.Get(); err != nil {
		return nil, err
	}
	if frozen != nil {
		f, err := frozen.Get()
		if err != nil {
			return nil, err
		}
		maps.Copy(d.frozen, f)
	}
	if prior != nil {
		p, err := prior.Get()
		if err != nil {
			return nil, err
		}
		d.prior = &p
	}
	return d, nil
}
