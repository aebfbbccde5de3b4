package sessionctx

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Cache keeps the decoded messages of the sessions read last, so that
// reading a session's context again fetches and decodes only the messages
// stored since. It is safe because a stored message never changes: a
// session's positions run 0, 1, 2, … without holes (a turn's messages are
// stored together under the session's lock) and no message is rewritten or
// deleted. What can change — the kept point, the compaction's head, the
// micro-compaction decisions — is read afresh every time.
//
// The messages it hands out are shared between readers: they must not be
// changed (assembly.Render never does). The cache holds at most maxBytes,
// measured by the stored JSON of the messages (the decoded form takes a
// few times that), and drops the session read longest ago first.
type Cache struct {
	maxBytes int64

	mu       sync.Mutex
	bytes    int64
	lru      *list.List // of *cached, most recently read first
	sessions map[cacheKey]*list.Element

	hits, misses, fetched int64
}

type cacheKey struct{ tenant, session string }

// cached is one session's messages from position from up to (not
// including) end, in order; cost is what it counts against maxBytes.
type cached struct {
	key       cacheKey
	from, end int64
	msgs      []view.Message
	cost      int64
}

// NewCache returns a cache of at most maxBytes; 0 or less disables it
// (every read fetches every message).
func NewCache(maxBytes int64) *Cache {
	return &Cache{maxBytes: maxBytes, lru: list.New(), sessions: map[cacheKey]*list.Element{}}
}

// CacheStats are a cache's counters since it was made: reads that found
// the session (Hits) or not (Misses), and the messages fetched from the
// store (Fetched).
type CacheStats struct {
	Hits, Misses, Fetched int64
	Bytes                 int64
	Sessions              int
}

// Stats reads the cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Hits: c.hits, Misses: c.misses, Fetched: c.fetched, Bytes: c.bytes, Sessions: len(c.sessions)}
}

// Load reads a session's context in tx like the package's Load does,
// taking the messages it already holds from the cache. It returns
// store.ErrNotFound when the session does not exist.
func (c *Cache) Load(ctx context.Context, tx *store.Tx, sessionID string, pacer *cpu.Pacer) (State, error) {
	sess, err := tx.Session(ctx, sessionID)
	if err != nil {
		return State{}, err
	}
	return c.LoadFor(ctx, tx, sess, pacer)
}

// LoadFor reads the context of a session already read (or locked) in tx.
// A heavy read is paced by pacer (nil for others): it fetches smaller
// pages and rests between them.
func (c *Cache) LoadFor(ctx context.Context, tx *store.Tx, sess sessionstate.Session, pacer *cpu.Pacer) (State, error) {
	if c == nil || c.maxBytes <= 0 {
		return LoadFor(ctx, tx, sess)
	}
	key := cacheKey{sess.TenantID, sess.SessionID}
	held, heldCost, from, end := c.get(key, sess.KeepFrom)
	added, err := fetchSince(ctx, tx, sess, end, pacer)
	if err != nil {
		return State{}, err
	}
	return withMessages(ctx, tx, sess, c.extend(key, sess, held, heldCost, from, end, added))
}

// extend is what a read of sess shows: the messages held, from the
// session's kept point to end, and those added after them, which the cache
// keeps from now on.
func (c *Cache) extend(key cacheKey, sess sessionstate.Session, held []view.Message, heldCost, from, end int64, added []view.Message) []view.Message {
	msgs := held
	if end > sess.MessageCount {
		// A newer read filled the cache past this read's session: show
		// what this session's state describes (see fetchSince).
		for i, m := range held {
			if m.Position >= sess.MessageCount {
				msgs = held[:i]
				break
			}
		}
	}
	if len(added) > 0 {
		msgs = make([]view.Message, 0, len(held)+len(added))
		msgs = append(append(msgs, held...), added...)
		cost := heldCost
		for _, m := range added {
			cost += messageCost(m)
		}
		c.put(key, from, added[len(added)-1].Position+1, msgs, cost, len(added))
	}
	// The full slice expression makes an append by the reader copy instead
	// of writing into the cache's array.
	return msgs[:len(msgs):len(msgs)]
}

// pageRows is how many messages a read fetches at once: a session read
// whole comes a page at a time, so the rows Postgres sends and pgx holds
// are bounded. A paced read (cpu.Pacer) rests between pages, so its
// pages are smaller: one of pacedPageRows is about a millisecond of
// Postgres and of decoding, the stretch a pacer allows.
const (
	pageRows      = 2_000
	pacedPageRows = 250
)

// fetchSince fetches and decodes the session's messages from position on,
// a page at a time, pausing between pages when pacer is set. It
// stops at the session's count as read (sess): in READ COMMITTED each
// statement sees what was committed before it, so a turn applied between
// the session's read and a page's would otherwise add messages the
// session's count, tokens and compaction state do not include.
func fetchSince(ctx context.Context, tx *store.Tx, sess sessionstate.Session, position int64, pacer *cpu.Pacer) ([]view.Message, error) {
	size := int32(pageRows)
	if pacer != nil {
		size = pacedPageRows
	}
	var out []view.Message
	for position < sess.MessageCount {
		rows, err := tx.MessagesPage(ctx, sess.SessionID, position, size)
		if err != nil {
			return nil, err
		}
		rows = throughCount(rows, sess)
		page, err := Messages(rows)
		if err != nil {
			return nil, fmt.Errorf("sessionctx.Load: %w", err)
		}
		for i := range page {
			page[i].Memo = &view.Memo{}
		}
		out = append(out, page...)
		if len(rows) < int(size) {
			return out, nil
		}
		position = rows[len(rows)-1].Position + 1
		if err := pacer.Pause(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// throughCount drops the rows past the session's count as read: those of
// a turn applied after (see fetchSince).
func throughCount(rows []store.Message, sess sessionstate.Session) []store.Message {
	for i, r := range rows {
		if r.Position >= sess.MessageCount {
			return rows[:i]
		}
	}
	return rows
}

// get returns the cached messages of key from position keepFrom on, what
// they cost, and the range [from, end) they cover: end is where the store
// read starts. A session not cached, or cached from a later position than
// keepFrom, starts from keepFrom with nothing held.
func (c *Cache) get(key cacheKey, keepFrom int64) (held []view.Message, cost, from, end int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.sessions[key]
	if !ok {
		c.misses++
		return nil, 0, keepFrom, keepFrom
	}
	e := el.Value.(*cached)
	if keepFrom < e.from {
		c.misses++
		return nil, 0, keepFrom, keepFrom
	}
	c.hits++
	c.lru.MoveToFront(el)
	// Positions have no holes, but the search does not rely on it.
	i := sort.Search(len(e.msgs), func(i int) bool { return e.msgs[i].Position >= keepFrom })
	cost = e.cost
	for _, m := range e.msgs[:i] { // the kept point moved on: what lies before it leaves
		cost -= messageCost(m)
	}
	return e.msgs[i:], cost, keepFrom, max(e.end, keepFrom)
}

// put stores msgs, which cost cost, as key's messages [from, end), the
// fetched rows just read counted, and drops the sessions read longest ago
// past maxBytes. A session bigger than the whole cache is not kept.
func (c *Cache) put(key cacheKey, from, end int64, msgs []view.Message, cost int64, fetched int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fetched += int64(fetched)
	if el, ok := c.sessions[key]; ok {
		old := el.Value.(*cached)
		if old.end >= end && old.from <= from {
			return // a concurrent read stored as much or more
		}
		c.bytes -= old.cost
		c.lru.Remove(el)
		delete(c.sessions, key)
	}
	if cost > c.maxBytes {
		return
	}
	c.sessions[key] = c.lru.PushFront(&cached{key: key, from: from, end: end, msgs: msgs, cost: cost})
	c.bytes += cost
	for c.bytes > c.maxBytes {
		last := c.lru.Back()
		e := last.Value.(*cached)
		c.lru.Remove(last)
		delete(c.sessions, e.key)
		c.bytes -= e.cost
	}
}

// messageCost approximates what a decoded message holds: its texts and
// inputs, and the structures around them.
func messageCost(m view.Message) int64 {
	n := int64(len(m.UUID)) + 128
	for _, b := range m.Content {
		n += blockCost(b)
		if b.Content != nil {
			for _, nb := range *b.Content {
				n += blockCost(nb)
			}
		}
	}
	return n
}

// blockCost is a block's strings and raw JSON, and the block itself.
func blockCost(b turn.Block) int64 {
	return int64(len(b.Text)+len(b.Citations)+len(b.Thinking)+len(b.Signature)+len(b.Data)+len(b.ID)+len(b.Name)+
		len(b.Input)+len(b.ToolUseID)+len(b.Source)+len(b.Title)+len(b.Context)+len(b.CacheControl)) + 256
}

// Ahead is a session's context read ahead of its session's row, in the
// same round trip (store.Reads): the messages stored after those the cache
// holds, the session's compaction and its decisions. Once the row is read,
// State completes the context from them, when they are enough: the
// session was in the cache (so its kept point was no surprise), and one
// page held every message since. Otherwise the caller reads the context in
// a transaction, as LoadFor does.
type Ahead struct {
	c          *Cache
	key        cacheKey
	from       int64 // the position the page starts at
	page       *store.Future[[]store.Message]
	compaction *store.Future[store.Compaction]
	decided    *store.Future[[]store.Replacement]
}

// Ahead queues in r the reads of session's context that do not need its
// row. The row must be queued before them: each statement of r sees what
// was committed before it, so the messages read then reach at least as far
// as the row's count. It returns nil when the session is not cached (State
// of a nil Ahead is never enough).
func (c *Cache) Ahead(ctx context.Context, r *store.Reads, tenant, sessionID string) *Ahead {
	if c == nil || c.maxBytes <= 0 {
		return nil
	}
	key := cacheKey{tenant, sessionID}
	c.mu.Lock()
	el, ok := c.sessions[key]
	var end int64
	if ok {
		end = el.Value.(*cached).end
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	return &Ahead{
		c: c, key: key, from: end,
		page: store.Queue(r, func(tx *store.Tx) ([]store.Message, error) {
			return tx.MessagesPage(ctx, sessionID, end, pageRows)
		}),
		compaction: store.Queue(r, func(tx *store.Tx) (store.Compaction, error) { return tx.SessionCompaction(ctx, sessionID) }),
		decided:    store.Queue(r, func(tx *store.Tx) ([]store.Replacement, error) { return decisions(ctx, tx, sessionID) }),
	}
}

// State is the context of sess, the row read before a's reads, and
// whether a's reads were enough to make it (false: read it with LoadFor).
func (a *Ahead) State(sess sessionstate.Session) (State, bool, error) {
	if a == nil {
		return State{}, false, nil
	}
	rows, err := a.page.Get()
	if err != nil {
		return State{}, false, err
	}
	if len(rows) >= pageRows {
		return State{}, false, nil // more than a page since: LoadFor pages them
	}
	var c store.Compaction
	if sess.CompactionID != "" {
		if c, err = a.compaction.Get(); err != nil && !errors.Is(err, store.ErrNotFound) {
			return State{}, false, err
		}
		if c.ID != sess.CompactionID {
			return State{}, false, nil // a compaction landed between the two statements
		}
	}
	decided, err := a.decided.Get()
	if err != nil {
		return State{}, false, err
	}
	held, heldCost, from, end := a.c.get(a.key, sess.KeepFrom)
	if from != sess.KeepFrom || end < a.from {
		return State{}, false, nil // dropped or cut back since it was queued
	}
	added, err := Messages(throughCount(rows, sess))
	if err != nil {
		return State{}, false, fmt.Errorf("sessionctx.Load: %w", err)
	}
	for len(added) > 0 && added[0].Position < end { // a newer read cached these meanwhile
		added = added[1:]
	}
	if len(added) > 0 && added[0].Position != end {
		return State{}, false, nil
	}
	for i := range added {
		added[i].Memo = &view.Memo{}
	}
	st, err := stateOf(sess, a.c.extend(a.key, sess, held, heldCost, from, end, added), c, decided)
	return st, err == nil, err
}
