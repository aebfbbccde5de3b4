package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// A ranked search (pkg/search) reads the inverted indexes message_terms
// and memory_terms (migrations/00043_ranked_search.sql), which triggers
// keep in step with messages and memories, and scores each document by
// BM25 in SQL (sql/queries/search.sql).

// Bounds of a ranked search's reads of message_terms: a lexeme's messages
// are counted up to SearchDFCap for its rarity (a word in more of the
// tenant's messages weighs as one in that many), and of those in the
// scope the searchPerTerm of most impact (its BM25 weight) are scored.
const (
	SearchDFCap   = 20_000
	searchPerTerm = 1_000
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
// (SearchTermStats); Filter a tsquery every hit must match besides ("" for
// none: the query's phrases and excluded words).
type SearchSpec struct {
	Lexemes    []string
	MessageDFs []int64
	Filter     string
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
func (t *Tx) SearchScope(ctx context.Context, scope string, memories bool, filter map[string]string, session string, spec SearchSpec, limit int) ([]Candidate, error) {
	raw, err := json.Marshal(filter)
	if err != nil {
		return nil, fmt.Errorf("store.SearchScope: %w", err)
	}
	rows, err := t.q.SearchScopeCandidates(ctx, dbsqlc.SearchScopeCandidatesParams{
		TenantID: t.tenant, Scope: scope, WithMemories: memories, WithMessages: filter != nil, ScopeFilter: raw, SessionID: session,
		Lexemes: spec.Lexemes, MessageDfs: spec.MessageDFs, Filter: spec.Filter, MaxRows: int32(limit), PerTerm: searchPerTerm,
	})
	if err != nil {
		return nil, fmt.Errorf("store.SearchScope: %w", err)
	}
	out := make([]Candidate, len(rows))
	for i, r := range rows {
		out[i] = Candidate{Memory: r.Name, SessionID: r.SessionID, Position: r.Position, Role: r.Role, At: r.At.Time, Score: r.Score}
	}
	return out, nil
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
