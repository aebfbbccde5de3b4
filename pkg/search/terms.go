package search

import (
	"context"
	"sync"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Bounds of the cache of term statistics.
const (
	// termTTL is how long a word's lexemes and counts are trusted: a
	// rarity a few minutes old ranks as well as a fresh one.
	termTTL = 10 * time.Minute
	// maxCachedTerms bounds the cache; a full cache starts over.
	maxCachedTerms = 100_000
)

// termKey is a word of a tenant.
type termKey struct{ tenant, word string }

// termEntry is what a word looks up: its lexemes (none for a stop word)
// and how many of the tenant's messages hold each.
type termEntry struct {
	lexemes []string
	dfs     []int64
	at      time.Time
}

// terms caches each tenant's words' lexemes and message counts: counting
// a common word's messages reads thousands of index entries, and the same
// words come back query after query.
type terms struct {
	mu      sync.Mutex
	entries map[termKey]termEntry
	now     func() time.Time
}

func newTerms() *terms { return &terms{entries: map[termKey]termEntry{}, now: time.Now} }

// lookup returns the lexemes of words with their message counts, a
// store.TermStat for each word and lexeme in the order of words (none for
// a stop word), reading those not cached (or stale) in tx.
func (c *terms) lookup(ctx context.Context, tx *store.Tx, tenant string, words []string) ([]store.TermStat, error) {
	found := make(map[string]termEntry, len(words))
	var missing []string
	c.mu.Lock()
	now := c.now()
	for _, w := range words {
		e, ok := c.entries[termKey{tenant, w}]
		if ok && now.Sub(e.at) < termTTL {
			found[w] = e
		} else {
			missing = append(missing, w)
		}
	}
	c.mu.Unlock()
	if len(missing) > 0 {
		stats, err := tx.SearchTermStats(ctx, missing, true)
		if err != nil {
			return nil, err
		}
		read := make(map[string]termEntry, len(missing))
		for _, w := range missing {
			read[w] = termEntry{at: now}
		}
		for _, s := range stats {
			e := read[s.Word]
			e.lexemes, e.dfs = append(e.lexemes, s.Lexeme), append(e.dfs, s.DF)
			read[s.Word] = e
		}
		c.mu.Lock()
		if len(c.entries)+len(read) > maxCachedTerms {
			c.entries = map[termKey]termEntry{}
		}
		for w, e := range read {
			c.entries[termKey{tenant, w}] = e
			found[w] = e
		}
		c.mu.Unlock()
	}
	var out []store.TermStat
	for _, w := range words {
		e := found[w]
		for i, l := range e.lexemes {
			out = append(out, store.TermStat{Word: w, Lexeme: l, DF: e.dfs[i]})
		}
	}
	return out, nil
}
