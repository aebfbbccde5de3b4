package search

import (
	"container/list"
	"sort"
	"sync"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// DefaultVectorCacheBytes is how many bytes of message vectors a searcher
// keeps in memory unless told otherwise: 256 MiB, some 260,000 vectors of
// 256 dimensions or 43,000 of 1,536.
const DefaultVectorCacheBytes = 256 << 20

// vectorCacheIdle is how long a session's vectors stay cached unread: an
// erased session's vectors, which no search reaches, leave memory then at
// the latest.
const vectorCacheIdle = 5 * time.Minute

// vectorCache keeps the decoded message vectors of the sessions searched
// last, each with the version of its vectors it was read at
// (store.VectorSession). A search reads the scope's sessions and their
// versions from Postgres every time, and the vectors only of the sessions
// whose version moved or that are not cached: what it ranks is what
// Postgres holds at that moment. Least recently used sessions go first
// when the cache passes its size, or when unread for vectorCacheIdle.
type vectorCache struct {
	max int64
	now func() time.Time

	mu   sync.Mutex
	used int64
	lru  list.List // of *cachedVectors, most recently used first
	byID map[vectorKey]*list.Element
}

type vectorKey struct{ tenant, session, model string }

// cachedVectors are one session's vectors of one model, the latest message
// first (a search's equal scores keep this order), all in one slice: vector
// i is flat[offsets[i]:offsets[i+1]]. Never changed once made, so a search
// may score them after letting go of the lock.
type cachedVectors struct {
	key       vectorKey
	version   int64
	positions []int64
	offsets   []int
	flat      []float32
	bytes     int64
	used      time.Time
	read      []store.MessageVector // while it is being read
}

func (v *cachedVectors) len() int { return len(v.positions) }

func (v *cachedVectors) vector(i int) []float32 { return v.flat[v.offsets[i]:v.offsets[i+1]] }

// build decodes the vectors read into flat, the latest first.
func (v *cachedVectors) build() error {
	sort.Slice(v.read, func(a, b int) bool { return v.read[a].Position > v.read[b].Position })
	floats := 0
	for _, r := range v.read {
		floats += len(r.Vector) / 4
	}
	v.positions = make([]int64, len(v.read))
	v.offsets = make([]int, len(v.read)+1)
	v.flat = make([]float32, floats)
	at := 0
	for i, r := range v.read {
		f, err := embed.Decode(v.flat[at:at], r.Vector)
		if err != nil {
			return err
		}
		v.positions[i] = r.Position
		at += len(f)
		v.offsets[i+1] = at
	}
	v.read = nil
	v.bytes = int64(4*len(v.flat) + 16*len(v.positions) + 8)
	return nil
}

func newVectorCache(max int64, now func() time.Time) *vectorCache {
	return &vectorCache{max: max, now: now, byID: map[vectorKey]*list.Element{}}
}

// get returns the session's vectors cached at version, or nil.
func (c *vectorCache) get(k vectorKey, version int64) *cachedVectors {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire()
	e, ok := c.byID[k]
	if !ok {
		return nil
	}
	v := e.Value.(*cachedVectors)
	if v.version != version {
		c.remove(e)
		return nil
	}
	v.used = c.now()
	c.lru.MoveToFront(e)
	return v
}

// put caches v, making room for it; one larger than the whole cache is not
// kept.
func (c *vectorCache) put(v *cachedVectors) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[v.key]; ok {
		c.remove(e)
	}
	if v.bytes > c.max {
		return
	}
	for c.used+v.bytes > c.max {
		c.remove(c.lru.Back())
	}
	v.used = c.now()
	c.byID[v.key] = c.lru.PushFront(v)
	c.used += v.bytes
}

// expire drops the sessions unread for vectorCacheIdle.
func (c *vectorCache) expire() {
	cutoff := c.now().Add(-vectorCacheIdle)
	for e := c.lru.Back(); e != nil && e.Value.(*cachedVectors).used.Before(cutoff); e = c.lru.Back() {
		c.remove(e)
	}
}

func (c *vectorCache) remove(e *list.Element) {
	v := c.lru.Remove(e).(*cachedVectors)
	delete(c.byID, v.key)
	c.used -= v.bytes
}

// size is how many sessions and bytes the cache holds.
func (c *vectorCache) size() (sessions int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byID), c.used
}

// sessionVectors is the vectors of model of the sessions the caller
// listed, in their order, each session's newest first: from the cache where a session's version is the
// one cached, the others read in one call of read and cached. A session of
// version 0 has none and is left out.
func (c *vectorCache) sessionVectors(tenant, model string, sessions []store.VectorSession, read func([]string) ([]store.MessageVector, error)) ([]*cachedVectors, error) {
	slots := make([]*cachedVectors, len(sessions))
	missing := map[string]int{} // a session not cached, by its slot
	var ids []string
	for i, s := range sessions {
		if s.Version == 0 {
			continue
		}
		if slots[i] = c.get(vectorKey{tenant, s.SessionID, model}, s.Version); slots[i] == nil {
			slots[i] = &cachedVectors{key: vectorKey{tenant, s.SessionID, model}, version: s.Version}
			missing[s.SessionID] = i
			ids = append(ids, s.SessionID)
		}
	}
	if len(ids) > 0 {
		rows, err := read(ids)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			if i, ok := missing[r.SessionID]; ok {
				slots[i].read = append(slots[i].read, r)
			}
		}
		for _, i := range missing {
			if err := slots[i].build(); err != nil {
				return nil, err
			}
			c.put(slots[i])
		}
	}
	out := slots[:0]
	for _, v := range slots {
		if v != nil {
			out = append(out, v)
		}
	}
	return out, nil
}
