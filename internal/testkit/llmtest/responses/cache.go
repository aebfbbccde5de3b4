package responses

import (
	"crypto/sha256"
	"encoding/json"

	"github.com/mnemos-ai/mnemos/pkg/jsonwalk"
)

// The model of OpenAI's automatic prompt caching: a prompt of at least
// MinCacheTokens reads from the cache the longest prefix an earlier call
// sent, counted in steps of CacheStep tokens past the minimum.
const (
	MinCacheTokens = 1024
	CacheStep      = 128
)

// itemOverhead is the tokens an item costs besides its JSON.
const itemOverhead = 4

// Prompt is a call's prompt measured at every item boundary, in the order
// the API reads it: the tools and instructions first, then each input item.
// Tokens are bytes / 4 of each part's JSON, plus a few per item.
type Prompt struct {
	// Hashes[i] names the prefix that ends after part i: the model and
	// every part up to it.
	Hashes [][sha256.Size]byte
	// Tokens[i] is that prefix's size.
	Tokens []int64
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
	var p Prompt
	var size int64
	add := func(part []byte) {
		sum := sha256.Sum256(part)
		h.Write(sum[:])
		size += int64(len(part))/4 + itemOverhead
		p.Hashes = append(p.Hashes, [sha256.Size]byte(h.Sum(nil)))
		p.Tokens = append(p.Tokens, size)
	}
	head, _ := json.Marshal(struct {
		Tools        json.RawMessage `json:"tools,omitempty"`
		Instructions string          `json:"instructions,omitempty"`
	}{req.Tools, req.Instructions})
	add(head)
	for _, it := range req.Items {
		add(compact(it.Raw))
	}
	return p
}

// compact is raw without insignificant whitespace: the same item sent
// indented or not is the same prefix. Its keys stay in their order: the
// model reads the tokens of the JSON, so an item whose keys were
// reordered is another prefix.
func compact(raw json.RawMessage) []byte {
	return jsonwalk.AppendCompact(nil, raw)
}

// Cache remembers the prefixes calls sent.
type Cache struct {
	seen map[[sha256.Size]byte]bool
}

// Use answers the usage of a call of prompt p: the longest prefix an
// earlier call sent is read from the cache, in steps of CacheStep past
// MinCacheTokens, and p's prefixes are remembered.
func (c *Cache) Use(p Prompt) Usage {
	if c.seen == nil {
		c.seen = map[[sha256.Size]byte]bool{}
	}
	u := Usage{Input: p.Total()}
	for i := len(p.Hashes) - 1; i >= 0; i-- {
		if c.seen[p.Hashes[i]] {
			if n := p.Tokens[i]; n >= MinCacheTokens {
				u.Cached = MinCacheTokens + (n-MinCacheTokens)/CacheStep*CacheStep
			}
			break
		}
	}
	for i, h := range p.Hashes {
		if p.Tokens[i] >= MinCacheTokens {
			c.seen[h] = true
		}
	}
	return u
}

// Usage is a call's usage: its input tokens, the part of them read from
// the cache, and its output tokens.
type Usage struct {
	Input, Cached, Output int64
}

// CachedShare is the share of input read from the cache.
func (u Usage) CachedShare() float64 {
	if u.Input == 0 {
		return 0
	}
	return float64(u.Cached) / float64(u.Input)
}

// wire is the usage as the API answers it.
func (u Usage) wire() map[string]any {
	return map[string]any{
		"input_tokens": u.Input, "input_tokens_details": map[string]any{"cached_tokens": u.Cached},
		"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": u.Input + u.Output,
	}
}
