package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// Thread is one conversation the Messages API proxy follows under a
// client's session id (migrations/00033_proxy_threads.sql): stored as the
// Mnemos session ThreadID.
type Thread struct {
	SessionID string // the client's session id
	ThreadID  string // the Mnemos session that holds its messages
	AgentID   string
	Kind      string
	// Parent and ForkPosition name the thread and the message a branch
	// continues from; "" and -1 for a thread that is no branch.
	Parent       string
	ForkPosition int64
	// Length is how many of the conversation's messages the thread holds.
	Length    int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// The kinds of thread.
const (
	ThreadMain            = "main"
	ThreadAgent           = "agent"
	ThreadSide            = "side"
	ThreadBranch          = "branch"
	ThreadClientCompacted = "client_compacted"
)

// PathMatch is the longest prefix of a request's conversation that a
// thread holds: its messages 0 to Position are the request's.
type PathMatch struct {
	ThreadID string
	Position int64
}

// ThreadsAndMatch reads the threads of a client's session and the longest
// prefix of a conversation, given by its chained digests, that any thread
// holds (nil when none does). The last few digests are probed first, with
// the threads in one round trip: a request that continues its thread, or
// repeats its last request, is found among them. Only a conversation none
// of them names (a rewind, a new agent) probes the whole chain, one index
// probe a message, in a second round trip: the whole, not the rest, as a
// thread that took the conversation's round between the two holds its
// tail now.
//
// Each round trip reads the threads, then the paths, and each statement
// sees what was committed before it began: a thread read has all the
// paths it had then, but a thread whose first round committed between the
// two statements is hit and not read. Such a read is made again (a few
// times at most): placed on it, the request would take a conversation its
// thread holds for one no thread holds.
func (s *Store) ThreadsAndMatch(ctx context.Context, tenant, session string, digests [][]byte) ([]Thread, *PathMatch, error) {
	read := func(probe [][]byte) ([]Thread, []PathMatch, error) {
		for attempt := 0; ; attempt++ {
			reads := NewReads(tenant)
			threads := Queue(reads, func(tx *Tx) ([]Thread, error) { return tx.Threads(ctx, session) })
			hits := Queue(reads, func(tx *Tx) ([]PathMatch, error) { return tx.PathHits(ctx, probe) })
			if err := s.Read(ctx, reads); err != nil {
				return nil, nil, err
			}
			ts, err := threads.Get()
			if err != nil {
				return nil, nil, err
			}
			hs, err := hits.Get()
			if err != nil || attempt == readsForNewThreads-1 || allKnown(hs, ts) {
				return ts, hs, err
			}
		}
	}
	tail := digests[max(len(digests)-matchTail, 0):]
	ts, hs, err := read(tail)
	if err != nil {
		return nil, nil, err
	}
	if len(hs) > 0 || len(tail) == len(digests) || len(ts) == 0 {
		return ts, longest(hs, ts), nil
	}
	if ts, hs, err = read(digests); err != nil {
		return nil, nil, err
	}
	return ts, longest(hs, ts), nil
}

// readsForNewThreads bounds the reads ThreadsAndMatch makes while its hits
// name threads it has not read.
const readsForNewThreads = 3

// allKnown reports whether every hit names one of the threads.
func allKnown(hits []PathMatch, threads []Thread) bool {
	for _, h := range hits {
		if !slices.ContainsFunc(threads, func(t Thread) bool { return t.ThreadID == h.ThreadID }) {
			return false
		}
	}
	return true
}

// matchTail is how many of a request's last digests ThreadsAndMatch probes
// first: its new message, the answer before it, and two more.
const matchTail = 4

// Threads reads the threads of a client's session, oldest first.
func (t *Tx) Threads(ctx context.Context, session string) ([]Thread, error) {
	rows, err := t.q.ProxyThreadsBySession(ctx, dbsqlc.ProxyThreadsBySessionParams{TenantID: t.tenant, SessionID: session})
	if err != nil {
		return nil, fmt.Errorf("store.Threads: %w", err)
	}
	out := make([]Thread, 0, len(rows))
	for _, r := range rows {
		th := Thread{
			SessionID: session, ThreadID: r.ThreadID, AgentID: r.AgentID, Kind: r.Kind, ForkPosition: -1,
			Length: r.Length, CreatedAt: r.CreatedAt.Time, UpdatedAt: r.UpdatedAt.Time,
		}
		if r.ParentThread != nil {
			th.Parent = *r.ParentThread
		}
		if r.ForkPosition != nil {
			th.ForkPosition = *r.ForkPosition
		}
		out = append(out, th)
	}
	return out, nil
}

// PathHits are the threads holding the longest prefix, of the
// conversation whose chained digests are given, that any thread holds, at
// that prefix's last position (at most 16); none when no thread holds its
// first message.
func (t *Tx) PathHits(ctx context.Context, digests [][]byte) ([]PathMatch, error) {
	if len(digests) == 0 {
		return nil, nil
	}
	rows, err := t.q.ProxyPathHits(ctx, dbsqlc.ProxyPathHitsParams{TenantID: t.tenant, Digests: digests, MaxRows: 16})
	if err != nil {
		return nil, fmt.Errorf("store.PathHits: %w", err)
	}
	var out []PathMatch
	for _, r := range rows {
		if len(out) > 0 && r.Position < out[0].Position {
			break
		}
		out = append(out, PathMatch{ThreadID: r.ThreadID, Position: r.Position})
	}
	return out, nil
}

// longest is the hit to place a request on: of the threads holding its
// longest prefix, one that ends there (the request continues it), then the
// one written to last; nil for none.
func longest(hits []PathMatch, threads []Thread) *PathMatch {
	var best *PathMatch
	var bestAt Thread
	for i, h := range hits {
		j := slices.IndexFunc(threads, func(t Thread) bool { return t.ThreadID == h.ThreadID })
		if j < 0 {
			continue
		}
		th := threads[j]
		ends, bestEnds := h.Position == th.Length-1, best != nil && best.Position == bestAt.Length-1
		if best == nil || ends && !bestEnds || ends == bestEnds && th.UpdatedAt.After(bestAt.UpdatedAt) {
			best, bestAt = &hits[i], th
		}
	}
	return best
}

// PutThreadRound records a round of a thread: the thread, created with its
// first round (from 0), and the digests of its messages from position from
// on. The thread's Mnemos session must exist (LockSession); its
// proxy_messages is the thread's length (RecordProxyRound).
func (t *Tx) PutThreadRound(ctx context.Context, th Thread, from int64, digests [][]byte) error {
	if from == 0 {
		p := dbsqlc.ProxyThreadPutParams{TenantID: t.tenant, SessionID: th.SessionID, ThreadID: th.ThreadID, AgentID: th.AgentID, Kind: th.Kind}
		if th.Parent != "" {
			p.ParentThread, p.ForkPosition = &th.Parent, &th.ForkPosition
		}
		if err := t.q.ProxyThreadPut(ctx, p); err != nil {
			return fmt.Errorf("store.PutThreadRound: %w", err)
		}
	}
	if len(digests) == 0 {
		return nil
	}
	positions := make([]int64, len(digests))
	for i := range positions {
		positions[i] = from + int64(i)
	}
	if err := t.q.ProxyPathPut(ctx, dbsqlc.ProxyPathPutParams{TenantID: t.tenant, ThreadID: th.ThreadID, Positions: positions, Digests: digests}); err != nil {
		return fmt.Errorf("store.PutThreadRound: %w", err)
	}
	return nil
}

// LastPath is a thread's last message: its position and chained digest;
// nil when the thread holds none.
func (t *Tx) LastPath(ctx context.Context, thread string) (*PathLast, error) {
	r, err := t.q.ProxyPathLast(ctx, dbsqlc.ProxyPathLastParams{TenantID: t.tenant, ThreadID: thread})
	if err = notFound(err); errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store.LastPath: %w", err)
	}
	return &PathLast{Position: r.Position, Digest: r.Digest}, nil
}

// PathLast is a thread's last message: its position and chained digest.
type PathLast struct {
	Position int64
	Digest   []byte
}

// SessionThreads reads the threads of a client's session, oldest first,
// with each thread's Mnemos session (a zero Session for one not written
// yet).
func (s *Store) SessionThreads(ctx context.Context, tenant, session string) ([]Thread, []sessionstate.Session, error) {
	var threads []Thread
	var sessions []sessionstate.Session
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		var err error
		if threads, err = tx.Threads(ctx, session); err != nil {
			return err
		}
		sessions = make([]sessionstate.Session, len(threads))
		for i, th := range threads {
			sess, err := tx.Session(ctx, th.ThreadID)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			sessions[i] = sess
		}
		return nil
	})
	return threads, sessions, err
}
