package httpapi

import (
	"crypto/sha256"
	"net"
	"net/http"
	"sync"
	"time"
)

// keyGuardCap bounds how many client addresses and missed keys the guard
// remembers; past it, it forgets the expired ones, then starts over, so a
// flood of addresses or keys cannot grow it without bound.
const keyGuardCap = 10_000

// keyGuard limits failed API-key checks: past max misses from one client
// address within window, that address is refused without asking Postgres
// until the window ends; and a key that just missed is remembered for
// missTTL, so sending it again is refused without asking Postgres either.
type keyGuard struct {
	max     int
	window  time.Duration
	missTTL time.Duration
	now     func() time.Time

	mu     sync.Mutex
	addrs  map[string]missCount
	missed map[[sha256.Size]byte]time.Time // key hash → when it stops being remembered
}

type missCount struct {
	n     int
	start time.Time
}

func newKeyGuard(max int, window, missTTL time.Duration, now func() time.Time) *keyGuard {
	if now == nil {
		now = time.Now
	}
	return &keyGuard{max: max, window: window, missTTL: missTTL, now: now,
		addrs: map[string]missCount{}, missed: map[[sha256.Size]byte]time.Time{}}
}

// blocked reports whether addr used up its misses, and for how long.
func (k *keyGuard) blocked(addr string) (time.Duration, bool) {
	if k.max <= 0 {
		return 0, false
	}
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.addrs[addr]
	if !ok || now.Sub(c.start) >= k.window || c.n < k.max {
		return 0, false
	}
	return c.start.Add(k.window).Sub(now), true
}

// knownMiss reports whether key missed within missTTL.
func (k *keyGuard) knownMiss(key string) bool {
	if k.missTTL <= 0 {
		return false
	}
	h := sha256.Sum256([]byte(key))
	k.mu.Lock()
	defer k.mu.Unlock()
	until, ok := k.missed[h]
	return ok && k.now().Before(until)
}

// miss records a failed check of key from addr.
func (k *keyGuard) miss(addr, key string) {
	now := k.now()
	h := sha256.Sum256([]byte(key)) // the key itself may be megabytes long
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.addrs[addr]
	if !ok || now.Sub(c.start) >= k.window {
		if !ok && len(k.addrs) >= keyGuardCap {
			for a, old := range k.addrs {
				if now.Sub(old.start) >= k.window {
					delete(k.addrs, a)
				}
			}
			if len(k.addrs) >= keyGuardCap {
				clear(k.addrs)
			}
		}
		c = missCount{start: now}
	}
	c.n++
	k.addrs[addr] = c
	if k.missTTL > 0 {
		if _, ok := k.missed[h]; !ok && len(k.missed) >= keyGuardCap {
			for m, until := range k.missed {
				if !now.Before(until) {
					delete(k.missed, m)
				}
			}
			if len(k.missed) >= keyGuardCap {
				clear(k.missed)
			}
		}
		k.missed[h] = now.Add(k.missTTL)
	}
}

// clientAddr is the host of the request's remote address: the client, or
// the proxy in front of the gateway (headers a client can write, such as
// X-Forwarded-For, are not trusted for this).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
