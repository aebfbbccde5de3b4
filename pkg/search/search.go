// Package search ranks what a memory scope holds for a query: its memory
// files (name, description and body) and the messages of every session
// whose memory_scope names it, those a compaction summarized included.
// Any word of the query may match, weighted by how rare it is (BM25 over
// English-stemmed words), a memory's name and description above its body;
// recency breaks ties only. "Quoted phrases" must match and -words must
// not (see Query). The same ranking serves the API's
// GET /v1/scopes/{scope}/search, the MCP tool search_past_context, the
// console's search box and recall (its candidates, and the builtin
// selector's picks: RankMemories).
package search

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Source is where a hit comes from.
type Source string

// Sources of hits.
const (
	SourceMemory  Source = "memory"
	SourceMessage Source = "message"
)

// Bounds of a search's answer.
const (
	DefaultLimit = 10
	MaxLimit     = 50
	// MaxCandidates bounds each ranked list a search reads from Postgres
	// before it is fused and cut to the request's limit.
	MaxCandidates = 100
)

// Caller names who searched: the caller label of the metrics.
type Caller string

// Callers of a search.
const (
	CallerAPI     Caller = "api"
	CallerMCP     Caller = "mcp"
	CallerConsole Caller = "console"
	CallerRecall  Caller = "recall"
)

// Request is one search.
type Request struct {
	Tenant string
	Scope  memory.Scope
	// Query is the query as written (see Parse).
	Query string
	// Source is SourceMemory or SourceMessage for one source only, "" for
	// both.
	Source Source
	// Session limits the messages to one session ("" for every session of
	// the scope).
	Session string
	// Limit is how many hits to answer: 0 for DefaultLimit, at most MaxLimit.
	Limit  int
	Caller Caller
}

// Candidate is one document a ranking found, with its score (higher is
// better). A message is named by Session and Position, a memory by Memory.
type Candidate struct {
	Source   Source
	Session  string
	Position int64
	Memory   string
	Role     string
	Time     time.Time
	Score    float64
}

// key names the document a candidate is, whichever list it comes from.
type key struct {
	source   Source
	session  string
	position int64
	memory   string
}

func (c Candidate) key() key { return key{c.Source, c.Session, c.Position, c.Memory} }

// Hit is a candidate the search answers, with its snippet: the text around
// the query's words, each between « and ».
type Hit struct {
	Candidate
	Snippet string
}

// Result is what a search answers.
type Result struct {
	Query Query
	Hits  []Hit
}

// Ranker ranks the documents of a request's scope for its parsed query,
// best first, at most MaxCandidates. Searcher.Lexical is the ranking of
// this package; a deployment with another ranking (embeddings) wraps it
// and fuses both lists with Fuse.
type Ranker func(ctx context.Context, req Request, q Query) ([]Candidate, error)

// Searcher runs searches over a store.
type Searcher struct {
	store   *store.Store
	rank    Ranker
	terms   *terms
	metrics metrics
	vectors *vectorCache
}

// New searches st, counting on meter.
func New(st *store.Store, meter metric.Meter) (*Searcher, error) {
	m, err := newMetrics(meter)
	if err != nil {
		return nil, err
	}
	s := &Searcher{store: st, terms: newTerms(), metrics: m, vectors: newVectorCache(DefaultVectorCacheBytes, time.Now)}
	s.rank = s.Lexical
	return s, nil
}

// KeepVectors sets how many bytes of message vectors the searcher keeps
// in memory between searches (DefaultVectorCacheBytes unless set); the
// vectors of a scope larger than that are read from Postgres, in part,
// each time.
func (s *Searcher) KeepVectors(bytes int64) { s.vectors = newVectorCache(bytes, time.Now) }

// UseRanker makes r the ranking of every search; r usually calls Lexical
// and fuses its list with another (Fuse).
func (s *Searcher) UseRanker(r Ranker) { s.rank = r }

// Search parses and checks req, ranks the scope's documents and answers
// the best req.Limit with their snippets. A bad request is an *InputError.
func (s *Searcher) Search(ctx context.Context, req Request) (res Result, err error) {
	start := time.Now()
	defer func() { s.metrics.count(ctx, req.Caller, start, err) }()
	if req, err = check(req); err != nil {
		return Result{}, err
	}
	q, err := Parse(req.Query)
	if err != nil {
		return Result{}, err
	}
	ranked, err := s.rank(ctx, req, q)
	if err != nil {
		return Result{}, err
	}
	hits, err := s.snippets(ctx, req, q, ranked[:min(len(ranked), req.Limit)])
	if err != nil {
		return Result{}, err
	}
	return Result{Query: q, Hits: hits}, nil
}

// Refused counts a request refused before Search (a bad scope, limit or
// source as its caller read them) and returns err.
func (s *Searcher) Refused(ctx context.Context, caller Caller, err error) error {
	s.metrics.count(ctx, caller, time.Now(), err)
	return err
}

// ParseScope reads a scope ("project:apollo") as a request names it.
func ParseScope(text string) (memory.Scope, error) {
	scope, err := memory.ParseScope(text)
	if err != nil {
		return memory.Scope{}, refuse(ReasonBadScope, "%v", err)
	}
	return scope, nil
}

// ParseLimit reads a limit as a request's text gives it ("" for the
// default).
func ParseLimit(text string) (int, error) {
	if text == "" {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < 1 || n > MaxLimit {
		return 0, refuse(ReasonBadLimit, "limit %q: want 1 to %d", clip(text), MaxLimit)
	}
	return n, nil
}

// clip is s cut to 40 bytes, for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return strings.ToValidUTF8(s[:40], "") + "…"
	}
	return s
}

// check fills req's defaults and refuses what cannot be searched.
func check(req Request) (Request, error) {
	switch {
	case req.Limit == 0:
		req.Limit = DefaultLimit
	case req.Limit < 0 || req.Limit > MaxLimit:
		return req, refuse(ReasonBadLimit, "limit %d: want 1 to %d", req.Limit, MaxLimit)
	}
	if req.Source != "" && req.Source != SourceMemory && req.Source != SourceMessage {
		return req, refuse(ReasonBadSource, "source %q: want memory, message, or none for both", req.Source)
	}
	if req.Session != "" && !turn.ValidToken(req.Session) {
		return req, refuse(ReasonBadSession, "session ids are 1 to %d ASCII letters, digits, '_' and '-', starting with a letter or a digit", turn.MaxIDLen)
	}
	if req.Scope.IsZero() {
		return req, refuse(ReasonBadScope, "no memory scope to search")
	}
	return req, nil
}

// Lexical is the ranking of this package: the scope's memories and
// messages that hold any of the query's words, ranked as one collection by
// BM25 in Postgres (equal scores: the more recent first). This is where a
// second ranking would join: a Ranker that calls Lexical, ranks the same
// scope its own way and answers Fuse(lexical, other).
func (s *Searcher) Lexical(ctx context.Context, req Request, q Query) ([]Candidate, error) {
	memories := req.Source != SourceMessage && req.Session == ""
	var filter map[string]string
	if req.Source != SourceMemory {
		filter = map[string]string{string(req.Scope.Kind): req.Scope.ID}
	}
	var found []store.Candidate
	err := s.store.InTx(ctx, req.Tenant, func(tx *store.Tx) error {
		stats, err := s.terms.lookup(ctx, tx, req.Tenant, q.Words)
		if err != nil || len(stats) == 0 {
			return err
		}
		found, err = tx.SearchScope(ctx, req.Scope.String(), memories, filter, req.Session, specOf(q, stats), MaxCandidates)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, len(found))
	for i, c := range found {
		out[i] = Candidate{Session: c.SessionID, Position: c.Position, Memory: c.Memory, Role: c.Role, Time: c.At, Score: c.Score, Source: SourceMessage}
		if c.Memory != "" {
			out[i].Source, out[i].Position = SourceMemory, 0
		}
	}
	return out, nil
}

// MaxRankWords bounds the distinct words of a text RankMemories ranks
// by: the first ones, in the text's order.
const MaxRankWords = 256

// RankMemories ranks scope's live memories for text (a user's request, say)
// as Lexical ranks them over memories alone, and returns those that hold
// any of its words, best first with their scores, at most limit. text is
// plain words, not a query: any may match, quotes and dashes mean nothing,
// and beyond its first MaxRankWords distinct words the rest are left out.
// background notional documents holding none of the words are counted in
// the scope's collection (store.SearchSpec.Background), so a score means
// about as much in a scope of three memories as in one of thousands.
func RankMemories(ctx context.Context, tx *store.Tx, scope memory.Scope, text string, background, limit int) ([]Candidate, error) {
	var q Query
	for _, w := range splitWords(text) {
		if len(q.Words) == MaxRankWords {
			break
		}
		q.addWord(w)
	}
	if len(q.Words) == 0 {
		return nil, nil
	}
	stats, err := tx.SearchTermStats(ctx, q.Words, false)
	if err != nil || len(stats) == 0 {
		return nil, err
	}
	spec := specOf(q, stats)
	spec.Background = int64(background)
	found, err := tx.SearchScope(ctx, scope.String(), true, nil, "", spec, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, len(found))
	for i, c := range found {
		out[i] = Candidate{Source: SourceMemory, Memory: c.Memory, Time: c.At, Score: c.Score}
	}
	return out, nil
}

// specOf is what the store searches for q, whose words stats stems (a
// stop word has none): each lexeme once, with its count of messages; the
// lexemes of q's phrases, which every hit holds; and the filter of its
// phrases and excluded terms.
func specOf(q Query, stats []store.TermStat) store.SearchSpec {
	of := map[string][]string{}
	var spec store.SearchSpec
	for _, s := range stats {
		of[s.Word] = append(of[s.Word], s.Lexeme)
		if !slices.Contains(spec.Lexemes, s.Lexeme) {
			spec.Lexemes, spec.MessageDFs = append(spec.Lexemes, s.Lexeme), append(spec.MessageDFs, s.DF)
		}
	}
	for _, p := range q.Phrases {
		for _, w := range p {
			for _, l := range of[w] {
				if !slices.Contains(spec.Required, l) {
					spec.Required = append(spec.Required, l)
				}
			}
		}
	}
	spec.Filter = q.Filter()
	return spec
}

// snippetOptions are ts_headline's: a few fragments of a dozen words, the
// query's words between « and ».
const snippetOptions = `MaxWords=30, MinWords=10, MaxFragments=2, FragmentDelimiter=" … ", StartSel=«, StopSel=»`

// snippets reads the snippet of each of hits.
func (s *Searcher) snippets(ctx context.Context, req Request, q Query, ranked []Candidate) ([]Hit, error) {
	var keys []store.MessageKey
	var names []string
	for _, c := range ranked {
		if c.Source == SourceMemory {
			names = append(names, c.Memory)
		} else {
			keys = append(keys, store.MessageKey{SessionID: c.Session, Position: c.Position})
		}
	}
	var msgSnippets map[store.MessageKey]string
	var memSnippets map[string]string
	err := s.store.InTx(ctx, req.Tenant, func(tx *store.Tx) error {
		var err error
		if len(keys) > 0 {
			if msgSnippets, err = tx.SearchMessageSnippets(ctx, keys, q.Match(), snippetOptions); err != nil {
				return err
			}
		}
		if len(names) > 0 {
			memSnippets, err = tx.SearchMemorySnippets(ctx, req.Scope.String(), names, q.Match(), snippetOptions)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	hits := make([]Hit, len(ranked))
	for i, c := range ranked {
		hits[i] = Hit{Candidate: c, Snippet: msgSnippets[store.MessageKey{SessionID: c.Session, Position: c.Position}]}
		if c.Source == SourceMemory {
			hits[i].Snippet = memSnippets[c.Memory]
		}
	}
	return hits, nil
}

// Fuse merges ranked lists by reciprocal rank fusion: a document scores
// the sum over the lists that hold it of 1 / (60 + its rank there, from
// 1), and the fused list is ordered by that score, ties kept in the order
// of the first list that ranks them. A candidate's fields come from the
// first list that holds it; its Score becomes the fused score.
func Fuse(lists ...[]Candidate) []Candidate {
	const k = 60
	score := map[key]float64{}
	first := map[key]int{} // the order a document was first seen in
	var out []Candidate
	for _, list := range lists {
		for rank, c := range list {
			id := c.key()
			if _, ok := first[id]; !ok {
				first[id] = len(out)
				out = append(out, c)
			}
			score[id] += 1 / float64(k+rank+1)
		}
	}
	for i := range out {
		out[i].Score = score[out[i].key()]
	}
	slices.SortStableFunc(out, func(a, b Candidate) int { return cmp.Compare(b.Score, a.Score) })
	return out
}

type metrics struct {
	requests metric.Int64Counter
	duration metric.Float64Histogram
}

func newMetrics(m metric.Meter) (metrics, error) {
	var out metrics
	var err error
	if out.requests, err = m.Int64Counter("mnemos.search.requests",
		metric.WithDescription("Searches of a scope, by caller (api, mcp, console, recall) and outcome (ok, refused, error); refused ones by reason too.")); err != nil {
		return out, err
	}
	if out.duration, err = m.Float64Histogram("mnemos.search.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a search of a scope took, ranking and snippets, by caller.")); err != nil {
		return out, err
	}
	return out, nil
}

// count records a search's outcome and duration.
func (m metrics) count(ctx context.Context, caller Caller, start time.Time, err error) {
	attrs := []attribute.KeyValue{attribute.String("caller", string(caller))}
	var bad *InputError
	switch {
	case err == nil:
		attrs = append(attrs, attribute.String("outcome", "ok"))
	case errors.As(err, &bad):
		attrs = append(attrs, attribute.String("outcome", "refused"), attribute.String("reason", bad.Reason))
	default:
		attrs = append(attrs, attribute.String("outcome", "error"))
	}
	m.requests.Add(ctx, 1, metric.WithAttributes(attrs...))
	if err == nil {
		m.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs[0]))
	}
}
