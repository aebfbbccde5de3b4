// Package ttlcache remembers looked-up values for a while, so hot paths ask
// Postgres for slow-changing facts (an API key's tenant, a tenant's
// settings) at most once per TTL.
package ttlcache

import (
	"context"
	"sync"
	"time"
)

// Cache maps string keys to values that expire after a TTL. Failed loads are
// not remembered. It is safe for concurrent use.
type Cache[V any] struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu      sync.Mutex
	entries map[string]entry[V]
}

type entry[V any] struct {
	value   V
	expires time.Time
}

// New returns a cache whose values live for ttl. When it holds max entries
// it starts over, so a flood of distinct keys cannot grow it without bound.
func New[V any](ttl time.Duration, max int) *Cache[V] {
	return &Cache[V]{ttl: ttl, max: max, now: time.Now, entries: map[string]entry[V]{}}
}

// Get returns the value for key, calling load when it is missing or expired.
func (c *Cache[V]) Get(ctx context.Context, key string, load func(context.Context, string) (V, error)) (V, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.value, nil
	}
	v, err := load(ctx, key)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	if len(c.entries) >= c.max {
		clear(c.entries)
	}
	c.entries[key] = entry[V]{value: v, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return v, nil
}

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
