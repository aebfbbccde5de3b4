package proxy

import (
	"crypto/rand"
	"encoding/binary"
	"hash"
	"sync"

	"github.com/minio/highwayhash"
)

// The proxy's verdicts on a client's messages, kept by digest so that a
// message the client sends again, round after round, is judged once: that
// it decodes (checkMessages) and whether the session's rendering of it is
// the client's message (keepUnchanged). Both are functions of bytes only —
// the client's message as sent, and the rendering — so a verdict found
// under their digests is the one the work would give again.

// digest is a HighwayHash-256 under verdictKey. HighwayHash is a keyed
// pseudo-random function, nearly five times as fast as SHA-256 here (a long
// session's request is hashed whole twice a round): with a key no client
// knows, no client can make two messages share a digest, and the verdicts
// are the process's own, so the key need not outlive it.
type digest = [highwayhash.Size]byte

// verdictKey is the process's key for its verdicts' digests.
var verdictKey = func() []byte {
	key := make([]byte, highwayhash.Size)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (it panics instead)
	return key
}()

// newDigest is a HighwayHash-256 under verdictKey.
func newDigest() hash.Hash {
	h, err := highwayhash.New(verdictKey)
	if err != nil {
		panic(err) // only for a key that is not 32 bytes
	}
	return h
}

// messageDigest is the digest of a client's message as sent, under its
// tenant: one tenant's verdicts are never another's (not even by timing).
func messageDigest(tenant string, raw []byte) digest {
	h := newDigest()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(tenant)))
	h.Write(n[:])
	h.Write([]byte(tenant))
	h.Write(raw)
	var out digest
	h.Sum(out[:0])
	return out
}

// pairDigest is the digest of a client's message (by its messageDigest)
// beside a rendering of the session's.
func pairDigest(client digest, rendered []byte) digest {
	h := newDigest()
	h.Write(client[:])
	h.Write(rendered)
	var out digest
	h.Sum(out[:0])
	return out
}

// verdictLimit is how many verdicts of each kind a generation keeps: the
// messages of a few hundred long sessions, a few MiB.
const verdictLimit = 1 << 16

// memo remembers a value by digest, for at most about 2×limit digests:
// when the current generation is full it becomes the previous one, and the
// one before is dropped, so what is still asked for stays.
type memo[V any] struct {
	mu         sync.Mutex
	limit      int
	cur, older map[digest]V
}

// verdicts remembers a verdict (a bool) by digest.
type verdicts = memo[bool]

func newMemo[V any](limit int) *memo[V] {
	return &memo[V]{limit: limit, cur: map[digest]V{}}
}

func newVerdicts(limit int) *verdicts { return newMemo[bool](limit) }

// get is the value kept for d, if one is; a nil memo keeps none.
func (v *memo[V]) get(d digest) (value V, ok bool) {
	if v == nil {
		return value, false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if value, ok = v.cur[d]; ok {
		return value, true
	}
	if value, ok = v.older[d]; ok {
		v.putLocked(d, value) // still asked for: kept in the current generation
	}
	return value, ok
}

// put keeps value for d.
func (v *memo[V]) put(d digest, value V) {
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.putLocked(d, value)
}

func (v *memo[V]) putLocked(d digest, value V) {
	if len(v.cur) >= v.limit {
		v.older, v.cur = v.cur, make(map[digest]V, v.limit/4)
	}
	v.cur[d] = value
}
