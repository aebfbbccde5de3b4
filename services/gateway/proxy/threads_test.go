package proxy

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// threadBook is a session's threads as the store keeps them
// (migrations/00033_proxy_threads.sql), in memory: the model place is
// fuzzed on.
type threadBook struct {
	threads []store.Thread
	paths   map[string][]digest
	written map[string]int // when each thread was last written, by a clock
	clock   int
}

func newThreadBook() *threadBook {
	return &threadBook{paths: map[string][]digest{}, written: map[string]int{}}
}

// match is ThreadsAndMatch (ProxyPathHits, then longest): the longest prefix of chain a thread holds; of
// threads that hold the same, one that ends there, then the latest written.
func (b *threadBook) match(chain []digest) *store.PathMatch {
	var best *store.PathMatch
	bestEnds := false
	for _, th := range b.threads {
		path := b.paths[th.ThreadID]
		p := -1
		for i := range min(len(path), len(chain)) {
			if path[i] != chain[i] {
				break
			}
			p = i
		}
		if p < 0 {
			continue
		}
		ends := p == len(path)-1
		switch {
		case best == nil, int64(p) > best.Position,
			int64(p) == best.Position && ends && !bestEnds,
			int64(p) == best.Position && ends == bestEnds && b.written[th.ThreadID] > b.written[best.ThreadID]:
			best, bestEnds = &store.PathMatch{ThreadID: th.ThreadID, Position: int64(p)}, ends
		}
	}
	return best
}

// record is recordRound's effect: the thread, created with its first
// round, takes the request's messages it does not hold and the answer,
// when its path is the request's prefix (lockedThread.follows).
func (b *threadBook) record(th store.Thread, chain []digest, answer digest) error {
	path := b.paths[th.ThreadID]
	if len(path) > len(chain) || len(path) > 0 && path[len(path)-1] != chain[len(path)-1] {
		return errMovedOn
	}
	i := slices.IndexFunc(b.threads, func(t store.Thread) bool { return t.ThreadID == th.ThreadID })
	if i < 0 {
		b.threads = append(b.threads, th)
		i = len(b.threads) - 1
	}
	path = append(append(path, chain[len(path):]...), chainNext(chain[len(chain)-1], answer))
	b.paths[th.ThreadID] = path
	b.threads[i].Length = int64(len(path))
	b.clock++
	b.written[th.ThreadID] = b.clock
	return nil
}

// msg is the canonical digest of a message the fuzzer makes.
func msg(role string, n int) digest { return sha256.Sum256(fmt.Appendf(nil, "%s %d", role, n)) }

// FuzzPlaceFollowsTheClient drives place with sequences of what clients do
// under one session id, read from the fuzzer's bytes: append a round,
// rewind, edit the last message, compact on their own, start another
// agent, retry, and send a round before the one before it was recorded.
// At every step: a request placed on a stored thread shares the thread's
// messages up to where it was matched, so what is rendered from the thread
// is the client's own; a recorded round leaves its thread holding exactly
// the client's conversation and its answer; a new agent's thread shares
// no first message with another; every thread id is a valid session id.
func FuzzPlaceFollowsTheClient(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0})
	f.Add([]byte{0, 0, 0, 1, 2, 4, 4, 0, 5, 6, 1, 0, 3, 0})
	f.Add([]byte{4, 4, 4, 6, 6, 0, 1, 1, 2, 2, 5, 5, 3, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		const tenant, session = "acme", "s-1"
		book := newThreadBook()
		type conv struct {
			msgs  []digest
			last  []digest
			tools bool
		}
		convs := []*conv{{}}
		var pending []func() // rounds answered but not recorded yet
		flush := func() {
			for _, p := range pending {
				p()
			}
			pending = nil
		}
		made := 0
		for step, op := range ops {
			if step > 64 {
				break
			}
			c := convs[int(op>>4)%len(convs)]
			made++
			var req []digest
			switch action := op % 8; {
			case action == 1 && len(c.msgs) >= 2:
				req = append(slices.Clone(c.msgs[:2*(made%(len(c.msgs)/2+1))]), msg("user", made))
			case action == 2 && len(c.msgs) >= 2:
				req = append(slices.Clone(c.msgs[:len(c.msgs)-2]), msg("user", made))
			case action == 3 && len(c.msgs) >= 2:
				req = []digest{msg("summary", made)}
			case action == 4:
				c = &conv{tools: true}
				convs = append(convs, c)
				req = []digest{msg("task", made)}
			case action == 5 && c.last != nil:
				req = c.last
			default:
				req = append(slices.Clone(c.msgs), msg("user", made))
			}
			if action := op % 8; action != 6 && action != 7 {
				flush() // the client waited for the record of the round before
			}
			chain := chainOf(tenant, session, messagesDoor, req)
			pl := place(session, slices.Clone(book.threads), book.match(chain), chain, shape{tools: c.tools, summary: op%8 == 3})
			require.True(t, turn.ValidToken(pl.thread.ThreadID), "thread id %q", pl.thread.ThreadID)
			if !pl.fresh {
				path := book.paths[pl.thread.ThreadID]
				require.LessOrEqual(t, pl.matched, int64(len(path)-1))
				require.Equal(t, path[:pl.matched+1], chain[:pl.matched+1], "step %d: the thread rendered is not the client's", step)
			}
			if pl.fresh && pl.thread.Kind == store.ThreadAgent {
				for _, th := range book.threads {
					require.NotEqual(t, book.paths[th.ThreadID][0], chain[0], "step %d: a new agent shares its first message with %s", step, th.ThreadID)
				}
			}
			answer := msg("answer", made)
			c.msgs, c.last = append(slices.Clone(req), answer), req
			if !pl.record {
				continue
			}
			round := func() {
				th := pl.thread
				if err := book.record(th, chain, answer); err != nil {
					again := place(session, slices.Clone(book.threads), book.match(chain), chain, shape{tools: c.tools})
					if !again.record {
						return
					}
					th = again.thread
					require.NoError(t, book.record(th, chain, answer), "step %d: placed again, the round is not recorded", step)
				}
				want := append(slices.Clone(chain), chainNext(chain[len(chain)-1], answer))
				require.Equal(t, want, book.paths[th.ThreadID], "step %d: thread %s is not the client's conversation", step, th.ThreadID)
			}
			pending = append(pending, round)
		}
		flush()
	})
}

// TestPlaceTellsConversationsApart: the rules of place, case by case.
func TestPlaceTellsConversationsApart(t *testing.T) {
	t.Parallel()
	const session = "s-1"
	book := newThreadBook()
	answers := 0
	say := func(req []digest, sh shape) (placement, digest) {
		chain := chainOf("acme", session, messagesDoor, req)
		pl := place(session, book.threads, book.match(chain), chain, sh)
		answers++
		answer := msg("answer", answers)
		if pl.record {
			require.NoError(t, book.record(pl.thread, chain, answer))
		}
		return pl, answer
	}
	u1, u2, u3 := msg("user", 1), msg("user", 2), msg("user", 3)

	// Claude Code: a side call with no tools first is not the main agent.
	pl, _ := say([]digest{msg("title", 0)}, shape{claudeCode: true})
	require.Equal(t, store.ThreadSide, pl.thread.Kind)
	require.Equal(t, proxyNewAgent, pl.outcome)
	pl, answer1 := say([]digest{u1}, shape{claudeCode: true, tools: true})
	require.Equal(t, store.ThreadMain, pl.thread.Kind)
	require.Equal(t, session, pl.thread.ThreadID)
	require.Equal(t, proxyManaged, pl.outcome)

	// The main agent goes on; a subagent starts.
	pl, _ = say([]digest{u1, answer1, u2}, shape{claudeCode: true, tools: true})
	require.Equal(t, session, pl.thread.ThreadID)
	require.Equal(t, proxyManaged, pl.outcome)
	pl, _ = say([]digest{msg("task", 1)}, shape{claudeCode: true, tools: true})
	require.Equal(t, store.ThreadAgent, pl.thread.Kind)
	require.Equal(t, session+"--"+pl.thread.AgentID, pl.thread.ThreadID)

	// A retry of the main agent's last request is placed on it, not recorded.
	pl, _ = say([]digest{u1, answer1, u2}, shape{claudeCode: true, tools: true})
	require.Equal(t, proxyRetry, pl.outcome)
	require.False(t, pl.record)

	// A rewind to the first answer branches there.
	pl, _ = say([]digest{u1, answer1, u3}, shape{claudeCode: true, tools: true})
	require.Equal(t, proxyBranched, pl.outcome)
	require.Equal(t, turn.MainAgent, pl.thread.AgentID)
	require.Equal(t, session, pl.thread.Parent)
	require.EqualValues(t, 1, pl.thread.ForkPosition)

	// The client's own summary is a new epoch of the main agent.
	pl, _ = say([]digest{msg("summary", 1)}, shape{claudeCode: true, tools: true, summary: true})
	require.Equal(t, proxyClientCompacted, pl.outcome)
	require.Equal(t, turn.MainAgent, pl.thread.AgentID)

	// A session id too long to carry a suffix gets a digest in its place.
	long := string(make([]byte, turn.MaxIDLen))
	require.LessOrEqual(t, len(threadID(long, "agent-0123456789ab")), turn.MaxIDLen)
}
