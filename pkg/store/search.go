package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// A ranked search (pkg/search) reads the inverted indexes message_terms
// and memory_terms (migrations/00043_ranked_search.sql), which triggers
// keep in step with messages and memories, and scores each document by
// BM25 in SQL (sql/queries/search.sql).

// Bounds of a ranked search's reads: a lexeme's messages are counted up
// to SearchDFCap for its rarity (a word in more of the tenant's messages
// weighs as one in that many); of those in the scope the searchPerTerm of
// most impact (its BM25 weight) are scored; and of the documents scored
// (those holding the required lexemes), the searchMaxChecked best are
// checked against a query's filter, the rest not found.
const (
	SearchDFCap      = 20_000
	searchPerTerm    = 1_000
	searchMaxChecked = 500
)

// TermStat is one word of a query as a search looks it up: its English
// lexeme and how many of the tenant's messages hold it (up to
// SearchDFCap).
type TermStat struct {
	Word   string
	Lexeme string
	DF     int64
}

// SearchTermStats stems words (a stop word has no lexeme, and no row) and,
// when count, counts the tenant's messages holding each lexeme (0 without).
func (t *Tx) SearchTermStats(ctx context.Context, words []string, count bool) ([]TermStat, error) {
	limit := int32(0)
	if count {
		limit = SearchDFCap
	}
	rows, err := t.q.SearchTermStats(ctx, dbsqlc.SearchTermStatsParams{TenantID: t.tenant, Words: words, DfCap: limit})
	if err != nil {
		return nil, fmt.Errorf("store.SearchTermStats: %w", err)
	}
	out := make([]TermStat, len(rows))
	for i, r := range rows {
		out[i] = TermStat{Word: r.Word, Lexeme: r.Lexeme, DF: r.Df}
	}
	return out, nil
}

// SearchSpec is what a ranked search looks for: Lexemes (any may match)
// with, parallel, MessageDFs, how many of the tenant's messages hold each
// (SearchTermStats); Required, lexemes every hit holds (the query's
// phrases'); Filter a tsquery every hit must match besides ("" for none:
// the query's phrases and excluded words). Background is a number of
// notional documents, holding none of the lexemes, counted in the
// collection besides its own (0 for none), so that a word one document of
// a small collection holds still weighs as a rare word.
type SearchSpec struct {
	Lexemes    []string
	MessageDFs []int64
	Required   []string
	Filter     string
	Background int64
}

// Candidate is a memory or a message a ranked search found, with its
// score (BM25, higher is better): a memory names Memory, a message
// SessionID and Position. At is when the message was stored or the memory
// last updated.
type Candidate struct {
	Memory    string
	SessionID string
	Position  int64
	Role      string
	At        time.Time
	Score     float64
}

// SearchScope ranks, as one collection, the live memories of scope (when
// memories) and the messages of the sessions whose memory_scope holds
// filter (when filter is not nil; of session alone when it is not "") and
// returns at most limit, best first; equal scores go to the more recently
// updated memory or session, then to the later message.
//
// Postgres reads the postings (SearchPostings: a lexeme's messages of most
// impact, searchPerTerm at most) and the counts rarity needs; the ranking
// is BM25, scored here: a document scores, for each lexeme it holds,
//
//	idf * freq * (k1 + 1) / (freq + k1 * (1 - b + b * len / avglen))
//
// with k1 = 1.2, b = 0.75, idf = ln(1 + (n - df + 0.5) / (df + 0.5)), n the
// tenant's messages and the scope's memories plus spec.Background, df
// those holding the lexeme (spec.MessageDFs for the messages), and avglen
// the mean length of the postings read of its source. A memory's freq weighs its name 3, its
// description 2 and its body 1 (memory_term_freq). Documents whose
// postings lack a lexeme of spec.Required are left out; of the rest, the
// best are checked against spec.Filter (SearchCheck), searchMaxChecked at
// most.
func (t *Tx) SearchScope(ctx context.Context, scope string, memories bool, filter map[string]string, session string, spec SearchSpec, limit int) ([]Candidate, error) {
	raw, err := json.Marshal(filter)
	if err != nil {
		return nil, fmt.Errorf("store.SearchScope: %w", err)
	}
	messages := filter != nil
	corpus, err := t.q.SearchCorpus(ctx, dbsqlc.SearchCorpusParams{
		TenantID: t.tenant, Scope: scope, WithMemories: memories, WithMessages: messages, Lexemes: spec.Lexemes,
	})
	if err != nil {
		return nil, fmt.Errorf("store.SearchScope: corpus: %w", err)
	}
	postings, err := t.q.SearchPostings(ctx, dbsqlc.SearchPostingsParams{
		TenantID: t.tenant, Scope: scope, WithMemories: memories, WithMessages: messages, ScopeFilter: raw, SessionID: session,
		Lexemes: spec.Lexemes, PerTerm: searchPerTerm,
	})
	if err != nil {
		return nil, fmt.Errorf("store.SearchScope: postings: %w", err)
	}
	ranked := rankPostings(postings, spec, messages, corpus)
	check := ranked[:min(len(ranked), limit)]
	if spec.Filter != "" {
		check = ranked[:min(len(ranked), searchMaxChecked)]
	}
	arg := dbsqlc.SearchCheckParams{TenantID: t.tenant, Scope: scope, Filter: spec.Filter, MaxRows: int32(limit)}
	for _, d := range check {
		arg.SessionIds, arg.Positions, arg.Names = append(arg.SessionIds, d.SessionID), append(arg.Positions, d.Position), append(arg.Names, d.Memory)
	}
	rows, err := t.q.SearchCheck(ctx, arg)
	if err != nil {
		return nil, fmt.Errorf("store.SearchScope: check: %w", err)
	}
	slices.SortFunc(rows, func(a, b dbsqlc.SearchCheckRow) int { return cmp.Compare(a.Rank, b.Rank) })
	out := make([]Candidate, len(rows))
	for i, r := range rows {
		out[i] = check[r.Rank-1].Candidate
		out[i].Role, out[i].At = r.Role, r.At.Time
	}
	return out, nil
}

// scored is a document a search ranks, with the recency its ties go by.
type scored struct {
	Candidate
	recency time.Time
}

// docKey names a document among a search's postings.
type docKey struct {
	session  string
	position int64
	memory   string
}

// rankPostings scores the documents of postings by BM25 (see SearchScope)
// and returns those holding every lexeme of spec.Required, best first:
// equal scores go to the more recent, then to the later message, then by
// session and name.
func rankPostings(postings []dbsqlc.SearchPostingsRow, spec SearchSpec, messages bool, corpus dbsqlc.SearchCorpusRow) []scored {
	idf := make([]float64, len(spec.Lexemes))
	for i := range idf {
		df := float64(0)
		if messages && i < len(spec.MessageDFs) {
			df += float64(spec.MessageDFs[i])
		}
		if i < len(corpus.MemoryDfs) {
			df += float64(corpus.MemoryDfs[i])
		}
		n := corpus.Documents + float64(spec.Background)
		idf[i] = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	var sum, count [2]float64 // by source: messages, memories
	source := func(p dbsqlc.SearchPostingsRow) int {
		if p.Name != "" {
			return 1
		}
		return 0
	}
	for _, p := range postings {
		sum[source(p)] += float64(p.Len)
		count[source(p)]++
	}
	var avglen [2]float64
	for i := range avglen {
		avglen[i] = max(sum[i]/max(count[i], 1), 1)
	}
	required := make([]bool, len(spec.Lexemes))
	for i, l := range spec.Lexemes {
		required[i] = slices.Contains(spec.Required, l)
	}
	type doc struct {
		scored
		held int // of the required lexemes
	}
	docs := make(map[docKey]*doc, len(postings))
	for _, p := range postings {
		k := docKey{p.SessionID, p.Position, p.Name}
		d := docs[k]
		if d == nil {
			d = &doc{scored: scored{Candidate: Candidate{Memory: p.Name, SessionID: p.SessionID, Position: p.Position}, recency: p.UpdatedAt.Time}}
			docs[k] = d
		}
		term := int(p.Term) - 1
		freq, length := float64(p.Freq), float64(p.Len)
		d.Score += idf[term] * freq * 2.2 / (freq + 1.2*(0.25+0.75*length/avglen[source(p)]))
		if required[term] {
			d.held++
		}
	}
	need := 0
	for _, r := range required {
		if r {
			need++
		}
	}
	out := make([]scored, 0, len(docs))
	for _, d := range docs {
		if d.held == need {
			out = append(out, d.scored)
		}
	}
	slices.SortFunc(out, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), b.recency.Compare(a.recency), cmp.Compare(b.Position, a.Position),
			cmp.Compare(a.SessionID, b.SessionID), cmp.Compare(a.Memory, b.Memory))
	})
	return out
}

// MessageKey names one stored message.
type MessageKey struct {
	SessionID string
	Position  int64
}

// SearchMessageSnippets returns the snippet of each of the messages keys
// names that is stored: its text around the words match (a tsquery)
// finds, marked as options (ts_headline's) say.
func (t *Tx) SearchMessageSnippets(ctx context.Context, keys []MessageKey, match, options string) (map[MessageKey]string, error) {
	sessions := make([]string, len(keys))
	positions := make([]int64, len(keys))
	for i, k := range keys {
		sessions[i], positions[i] = k.SessionID, k.Position
	}
	rows, err := t.q.SearchMessageSnippets(ctx, dbsqlc.SearchMessageSnippetsParams{
		TenantID: t.tenant, SessionIds: sessions, Positions: positions, Match: match, HeadlineOptions: options,
	})
	if err != nil {
		return nil, fmt.Errorf("store.SearchMessageSnippets: %w", err)
	}
	out := make(map[MessageKey]string, len(rows))
	for _, r := range rows {
		out[MessageKey{SessionID: r.SessionID, Position: r.Position}] = r.Snippet
	}
	return out, nil
}

// SearchMemorySnippets is SearchMessageSnippets for memories of scope, by
// name: their description and body around the words match finds.
func (t *Tx) SearchMemorySnippets(ctx context.Context, scope string, names []string, match, options string) (map[string]string, error) {
	rows, err := t.q.SearchMemorySnippets(ctx, dbsqlc.SearchMemorySnippetsParams{
		TenantID: t.tenant, Scope: scope, Names: names, Match: match, HeadlineOptions: options,
	})
	if err != nil {
		return nil, fmt.Errorf("store.SearchMemorySnippets: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.Name] = r.Snippet
	}
	return out, nil
}
