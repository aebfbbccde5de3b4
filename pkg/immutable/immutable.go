// Package immutable keeps values that never change once known: what a
// process learnt for good (a frozen section, a decision made, an exact
// count) is kept so that it is not read or computed again.
package immutable

import "sync"

// Cache keeps up to max values by key; full, it forgets one to take
// another. It is safe for concurrent use.
type Cache[V any] struct {
	mu  sync.Mutex
	m   map[string]V
	max int
}

// New keeps up to max values.
func New[V any](max int) *Cache[V] {
	return &Cache[V]{m: map[string]V{}, max: max}
}

// Get is the value kept for key.
func (c *Cache[V]) Get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

// Put keeps v for key.
func (c *Cache[V]) Put(key string, v V) {
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
