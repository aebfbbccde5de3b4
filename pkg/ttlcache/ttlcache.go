// Package ttlcache remembers looked-up values for a while, so hot paths ask
// Postgres for slow-changing facts (an API key's tenant, a tenant's
// settings) at most once per TTL.
package ttlcache

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Cache maps string keys to values that expire after a TTL. Failed loads are
// not remembered. Concurrent misses of one key share one load: when a hot
// key expires under a burst of requests, Postgres is asked once, not once
// per request. It is safe for concurrent use.
type Cache[V any] struct {
	ttl   time.Duration
	max   int
	now   func() time.Time
	stale time.Duration // how long past its TTL a value stands in for a failed load

	mu      sync.Mutex
	entries map[string]entry[V]
	loading map[string]*call[V]
	gen     uint64 // counts Forget and ForgetAll: a load begun before one is not kept
}

type entry[V any] struct {
	value   V
	expires time.Time
}

// call is a load in flight; done closes when value and err are set.
type call[V any] struct {
	done  chan struct{}
	value V
	err   error
	gen   uint64 // the cache's gen when the load began
}

// New returns a cache whose values live for ttl. When it holds max entries
// it starts over, so a flood of distinct keys cannot grow it without bound.
// A ttl of zero remembers nothing: every Get loads, and only concurrent
// misses of one key share a load.
func New[V any](ttl time.Duration, max int) *Cache[V] {
	return &Cache[V]{ttl: ttl, max: max, now: time.Now, entries: map[string]entry[V]{}, loading: map[string]*call[V]{}}
}

// StaleOnError makes a failed load answer the value it was to replace, when
// that expired less than d ago: a fact that changes rarely (a tenant's
// settings) stays usable while its store is unreachable. The next Get
// tries the load again. It returns c.
func (c *Cache[V]) StaleOnError(d time.Duration) *Cache[V] {
	c.stale = d
	return c
}

// Get returns the value for key, calling load when it is missing or
// expired. A load already in flight for key is waited for instead of
// started again. The load runs on ctx's values without its cancellation
// (another caller may be waiting for it); each caller stops waiting when
// its own ctx ends.
func (c *Cache[V]) Get(ctx context.Context, key string, load func(context.Context, string) (V, error)) (V, error) {
	now := c.now()
	c.mu.Lock()
	if e, ok := c.entries[key]; ok && now.Before(e.expires) {
		c.mu.Unlock()
		return e.value, nil
	}
	cl, inflight := c.loading[key]
	if !inflight {
		cl = &call[V]{done: make(chan struct{}), gen: c.gen}
		c.loading[key] = cl
	}
	c.mu.Unlock()

	if !inflight {
		go c.run(context.WithoutCancel(ctx), key, cl, load)
	}
	select {
	case <-cl.done:
		return cl.value, cl.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// run makes one load and hands its result to every caller waiting for it.
func (c *Cache[V]) run(ctx context.Context, key string, cl *call[V], load func(context.Context, string) (V, error)) {
	// A load that never returns would keep every later caller waiting
	// until its own deadline; bound it.
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	cl.value, cl.err = safeLoad(ctx, key, load)
	now := c.now()
	c.mu.Lock()
	if c.loading[key] == cl {
		delete(c.loading, key)
	}
	if e, ok := c.entries[key]; ok && cl.err != nil && now.Before(e.expires.Add(c.stale)) {
		cl.value, cl.err = e.value, nil // stale, and still expired: the next Get loads again
	} else if cl.err == nil && cl.gen == c.gen {
		if len(c.entries) >= c.max {
			clear(c.entries)
		}
		c.entries[key] = entry[V]{value: cl.value, expires: now.Add(c.ttl)}
	}
	c.mu.Unlock()
	close(cl.done)
}

// safeLoad calls load, turning a panic into an error: the load runs on its
// own goroutine, where a panic would end the process.
func safeLoad[V any](ctx context.Context, key string, load func(context.Context, string) (V, error)) (v V, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("ttlcache: loading %q panicked: %v", key, p)
		}
	}()
	return load(ctx, key)
}

// loadTimeout bounds one load.
const loadTimeout = 30 * time.Second

// Peek returns the value for key when it is cached and not expired, without loading it.
func (c *Cache[V]) Peek(key string) (V, bool) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if !ok || !now.Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// Forget drops key's value, and has a load of it already begun answer its
// callers without being kept: the next Get loads anew.
func (c *Cache[V]) Forget(key string) {
	c.mu.Lock()
	delete(c.entries, key)
	delete(c.loading, key)
	c.gen++
	c.mu.Unlock()
}

// ForgetAll drops every value, as Forget does one.
func (c *Cache[V]) ForgetAll() {
	c.mu.Lock()
	clear(c.entries)
	clear(c.loading)
	c.gen++
	c.mu.Unlock()
}
