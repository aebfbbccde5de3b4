package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
)

// usage is an answer's usage as the API reports it.
type usage struct {
	Input, CacheCreation, CacheRead, Output int64
}

func (u usage) json(output int64) map[string]any {
	return map[string]any{
		"input_tokens":                u.Input,
		"cache_creation_input_tokens": u.CacheCreation,
		"cache_read_input_tokens":     u.CacheRead,
		"output_tokens":               output,
		"service_tier":                "standard",
	}
}

// promptSize is a call's prompt measured at each place a cache entry could
// end: after the tools and the system prompt (index 0) and after each
// message (index i+1). Tokens are bytes / 4 of the JSON with cache_control
// taken out, so moving a breakpoint does not change what it covers.
type promptSize struct {
	hashes []string
	tokens []int64
	// breaks are the indexes that end at a cache_control breakpoint.
	breaks []int
}

func (p promptSize) total() int64 { return p.tokens[len(p.tokens)-1] }

func (u *upstream) prompt(req *request) promptSize {
	h := sha256.New()
	h.Write([]byte(req.Model))
	var p promptSize
	head := int64(0)
	marked := false
	for _, t := range req.Tools {
		c, m := canonical(t)
		h.Write(c)
		head += int64(len(c))
		marked = marked || m
	}
	c, m := canonical(req.System)
	h.Write(c)
	head += int64(len(c))
	p.hashes = append(p.hashes, hex.EncodeToString(h.Sum(nil)))
	p.tokens = append(p.tokens, head/4)
	if marked || m {
		p.breaks = append(p.breaks, 0)
	}
	for i, msg := range req.Messages {
		c, m := canonical(msg.Content)
		h.Write([]byte(msg.Role))
		h.Write(c)
		p.hashes = append(p.hashes, hex.EncodeToString(h.Sum(nil)))
		p.tokens = append(p.tokens, p.tokens[i]+int64(len(c))/4+4)
		if m {
			p.breaks = append(p.breaks, i+1)
		}
	}
	return p
}

// cacheUsage splits a call's prompt as the prompt cache would: the longest
// prefix written before is read from the cache, what lies between it and the
// last breakpoint is written to it, the rest is plain input. Every
// breakpoint's prefix is in the cache afterwards.
func (u *upstream) cacheUsage(req *request, p promptSize) usage {
	last := -1
	if len(p.breaks) > 0 {
		last = p.breaks[len(p.breaks)-1]
	}
	hit := -1
	for i := last; i >= 0; i-- {
		if u.cache[p.hashes[i]] {
			hit = i
			break
		}
	}
	var out usage
	if hit >= 0 {
		out.CacheRead = p.tokens[hit]
	}
	if last > hit {
		out.CacheCreation = p.tokens[last] - out.CacheRead
	}
	covered := out.CacheRead + out.CacheCreation
	out.Input = p.total() - covered
	if out.Input < 1 {
		out.Input = 1 + int64(len(req.Messages)%7) // the few tokens the API always counts apart
	}
	for _, b := range p.breaks {
		u.cache[p.hashes[b]] = true
	}
	return out
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

// idSource makes the random-looking parts of message, tool-use and request
// ids from a fixed seed, so a remade transcript gets the same ids.
type idSource struct{ r *rand.Rand }

func newIDSource(seed uint64) *idSource {
	return &idSource{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} //nolint:gosec // ids, not secrets
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func (s *idSource) next(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = idAlphabet[s.r.IntN(len(idAlphabet))]
	}
	return string(b)
}
