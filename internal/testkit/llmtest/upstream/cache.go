package upstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"sync"

	"github.com/minio/highwayhash"
)

// Lookback is how many block boundaries before a breakpoint a call looks
// at for a cached prefix, besides the breakpoint's own, as the API does.
const Lookback = 20

// SonnetMinCacheTokens is the shortest prefix the API caches for Sonnet
// and Opus models; a shorter one is neither written nor read.
const SonnetMinCacheTokens = 1024

// messageOverhead is the tokens a message costs besides its content.
const messageOverhead = 4

// Prompt is a call's prompt measured at every block boundary, in the order
// the API renders it: each tool, each block of the system prompt, then each
// block of each message (content given as a string is one block). Tokens
// are bytes / 4 of each block's JSON with cache_control taken out, so
// moving a breakpoint does not change what it covers, plus a few per
// message.
type Prompt struct {
	// Hashes[i] identifies the prefix that ends after block i: the model
	// and every block up to it.
	Hashes [][sha256.Size]byte
	// Tokens[i] is that prefix's size.
	Tokens []int64
	// Breaks are the indexes of the blocks that carry cache_control, in
	// order (the last block when the call has a top-level cache_control).
	Breaks []int
}

// Total is the prompt's size in tokens.
func (p Prompt) Total() int64 {
	if len(p.Tokens) == 0 {
		return 0
	}
	return p.Tokens[len(p.Tokens)-1]
}

// Measure measures req's prompt.
func Measure(req *Request) Prompt {
	h := sha256.New()
	h.Write([]byte(req.Model))
	var (
		p     Prompt
		size  int64 // bytes so far
		extra int64 // message overheads so far
	)
	add := func(c canon) {
		h.Write(c.digest[:])
		size += c.size
		p.Hashes = append(p.Hashes, [sha256.Size]byte(h.Sum(nil)))
		p.Tokens = append(p.Tokens, size/4+extra)
		if c.marked {
			p.Breaks = append(p.Breaks, len(p.Hashes)-1)
		}
	}
	for _, t := range req.Tools {
		add(canonicalOf(t))
	}
	for _, c := range blockCanons(req.System) {
		add(c)
	}
	for _, m := range req.Messages {
		h.Write([]byte(m.Role))
		extra += messageOverhead
		cs := m.canons
		if cs == nil {
			cs = blockCanons(m.Content)
		}
		for _, c := range cs {
			add(c)
		}
	}
	if n := len(p.Hashes); n > 0 && len(bytes.TrimSpace(req.CacheControl)) > 0 && string(req.CacheControl) != "null" &&
		(len(p.Breaks) == 0 || p.Breaks[len(p.Breaks)-1] != n-1) {
		p.Breaks = append(p.Breaks, n-1)
	}
	return p
}

// blocksOf splits content into its blocks: an array's elements, or the
// whole value (a string) as one; nothing when it is empty or null.
func blocksOf(raw json.RawMessage) []json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '[' {
		var out []json.RawMessage
		if json.Unmarshal(raw, &out) == nil {
			return out
		}
	}
	return []json.RawMessage{raw}
}

// Cache is a model of the API's prompt cache: the prefixes written so far.
// Entries never expire. It is not safe for concurrent use.
type Cache struct {
	// MinTokens is the shortest prefix cached (0: any).
	MinTokens int64
	written   map[[sha256.Size]byte]bool
}

// Use splits a call's prompt as the prompt cache would, and writes the
// prefix of every breakpoint to the cache. The call reads the longest
// prefix written before that ends at one of its breakpoints or at one of
// the Lookback boundaries before one; what lies between it and the last
// breakpoint is written; the rest is plain input. The few tokens the API
// always counts apart make the plain input at least 1.
func (c *Cache) Use(p Prompt) Usage {
	if c.written == nil {
		c.written = map[[sha256.Size]byte]bool{}
	}
	var breaks []int
	for _, b := range p.Breaks {
		if p.Tokens[b] >= c.MinTokens {
			breaks = append(breaks, b)
		}
	}
	last, hit := -1, -1
	for _, b := range breaks {
		last = b
		for i := b; i >= 0 && i >= b-Lookback && i > hit; i-- {
			if c.written[p.Hashes[i]] && p.Tokens[i] >= c.MinTokens {
				hit = i
				break
			}
		}
	}
	var out Usage
	if hit >= 0 {
		out.CacheReadInputTokens = p.Tokens[hit]
	}
	if last > hit {
		out.CacheCreationInputTokens = p.Tokens[last] - out.CacheReadInputTokens
	}
	out.InputTokens = p.Total() - out.CacheReadInputTokens - out.CacheCreationInputTokens
	if out.InputTokens < 1 {
		out.InputTokens = 1 + int64(len(p.Tokens)%7)
	}
	for _, b := range breaks {
		c.written[p.Hashes[b]] = true
	}
	return out
}

// canon is what Measure takes of a block: its canonical JSON's digest and
// size, and whether it carried cache_control.
type canon struct {
	digest [sha256.Size]byte
	size   int64
	marked bool
}

// memo remembers what a function made of some bytes, by their digest:
// a conversation resends every block of the round before, and working
// each out again (a decode and an encode of the whole request) would make
// this stand-in for a remote server the busiest part of a benchmark run on
// the same machine. It holds at most memoMax values; past it, it starts
// over.
// The digest is a HighwayHash-256, several times as fast as SHA-256 on a
// long request's blocks.
type memo[V any] struct {
	mu sync.Mutex
	m  map[[highwayhash.Size]byte]V
}

const memoMax = 1 << 18

// memoKey keys the memos' digests.
var memoKey = []byte("the scripted upstream's memo key")

func (c *memo[V]) of(raw []byte, work func([]byte) V) V {
	key := highwayhash.Sum(raw, memoKey)
	if v, ok := c.get(key); ok {
		return v
	}
	v := work(raw)
	c.put(key, v)
	return v
}

// ofOrErr is of for work that can fail: what failed is not remembered.
func (c *memo[V]) ofOrErr(raw []byte, work func([]byte) (V, error)) (V, error) {
	key := highwayhash.Sum(raw, memoKey)
	if v, ok := c.get(key); ok {
		return v, nil
	}
	v, err := work(raw)
	if err == nil {
		c.put(key, v)
	}
	return v, err
}

func (c *memo[V]) get(key [highwayhash.Size]byte) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *memo[V]) put(key [highwayhash.Size]byte, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= memoMax {
		c.m = map[[highwayhash.Size]byte]V{}
	}
	c.m[key] = v
}

var (
	canons   memo[canon]   // a block's canon
	contents memo[[]canon] // the canon of each block of a content
)

// canonicalOf is the canon of a block.
func canonicalOf(raw json.RawMessage) canon {
	return canons.of(raw, func(raw []byte) canon {
		b, marked := canonical(raw)
		return canon{digest: sha256.Sum256(b), size: int64(len(b)), marked: marked}
	})
}

// blockCanons is the canon of each of raw's blocks (see blocksOf).
func blockCanons(raw json.RawMessage) []canon {
	return contents.of(raw, func(raw []byte) []canon {
		var cs []canon
		for _, b := range blocksOf(raw) {
			cs = append(cs, canonicalOf(b))
		}
		return cs
	})
}

// canonical is a JSON value without its cache_control keys, compacted, and
// whether it had any.
func canonical(raw json.RawMessage) ([]byte, bool) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, false
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw, false
	}
	marked := strip(v)
	out, err := json.Marshal(v)
	if err != nil {
		return raw, marked
	}
	return out, marked
}

func strip(v any) bool {
	marked := false
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["cache_control"]; ok {
			delete(x, "cache_control")
			marked = true
		}
		for _, e := range x {
			marked = strip(e) || marked
		}
	case []any:
		for _, e := range x {
			marked = strip(e) || marked
		}
	}
	return marked
}
