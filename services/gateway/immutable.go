package gateway

import (
	"strconv"
	"sync"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// immutable keeps values that never change once known, up to max of them
// (full, it forgets one to take another). What a context read decides for
// good is kept in them after its transaction commits, so the next read of
// the session does not read it again: the frozen memory section of a
// session's compaction, and what is shown beside each user message
// (recall's decision); their keys name the session's incarnation (its
// creation time), so a session deleted and made again under the same id
// starts over. So are the exact sizes of request prefixes (exact
// preflights). Each gateway replica keeps its own; one that has not
// learnt a value reads or counts it again.
type immutable[V any] struct {
	mu  sync.Mutex
	m   map[string]V
	max int
}

func newImmutable[V any](max int) *immutable[V] {
	return &immutable[V]{m: map[string]V{}, max: max}
}

func (c *immutable[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *immutable[V]) put(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok && len(c.m) >= c.max {
		for k := range c.m { // full: forget one, any one
			delete(c.m, k)
			break
		}
	}
	c.m[key] = v
}

// immutablesMax bounds each of the gateway's immutable caches.
const immutablesMax = 100_000

// incarnation names a session as created: its tenant, id and creation time.
func incarnation(s store.Session) string {
	return s.TenantID + "\x00" + s.SessionID + "\x00" + strconv.FormatInt(s.CreatedAt.UnixNano(), 36)
}

// knownDecisions is recall.Known for one context read: it answers from the
// gateway's cache and holds what the read learns until its transaction
// has committed (keep).
type knownDecisions struct {
	cache   *immutable[store.RecallPrefetch]
	session string
	learnt  map[string]store.RecallPrefetch
}

func (k *knownDecisions) Decision(uuid string) (store.RecallPrefetch, bool) {
	return k.cache.get(k.session + "\x00" + uuid)
}

func (k *knownDecisions) Remember(uuid string, d store.RecallPrefetch) {
	if k.learnt == nil {
		k.learnt = map[string]store.RecallPrefetch{}
	}
	k.learnt[uuid] = d
}

// keep puts what the read learnt in the cache, once its transaction has
// committed.
func (k *knownDecisions) keep() {
	for uuid, d := range k.learnt {
		k.cache.put(k.session+"\x00"+uuid, d)
	}
}
