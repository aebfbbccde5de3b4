package search

import (
	"context"
	"log/slog"
	"sort"

	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Hybrid is the Ranker of a deployment with embeddings (docs/memory.md,
// "Embeddings"): the lexical ranking (Lexical) and the vector ranking of
// the same scope (Vector), fused by reciprocal rank fusion (Fuse, k = 60).
// The query is embedded while the lexical ranking runs. A query with
// phrases or excluded words ranks lexically only: a vector cannot say
// whether a document holds a phrase. When the endpoint fails to embed the
// query, the search answers lexically, logged (e counts the failure).
func (s *Searcher) Hybrid(e embed.Embedder, log *slog.Logger) Ranker {
	return func(ctx context.Context, req Request, q Query) ([]Candidate, error) {
		if len(q.Phrases) > 0 || len(q.Excluded) > 0 {
			return s.Lexical(ctx, req, q)
		}
		type embedded struct {
			v   []float32
			err error
		}
		ch := make(chan embedded, 1)
		go func() {
			vs, err := e.Embed(ctx, []string{req.Query})
			if err != nil {
				ch <- embedded{err: err}
				return
			}
			ch <- embedded{v: vs[0]}
		}()
		lexical, err := s.Lexical(ctx, req, q)
		got := <-ch
		if err != nil {
			return nil, err
		}
		if got.err != nil {
			log.Warn("search: the query was not embedded; ranked lexically", "tenant", req.Tenant, "err", got.err)
			return lexical, nil //nolint:nilerr // the lexical ranking answers without the vectors
		}
		vector, err := s.Vector(ctx, req, e.Model(), got.v)
		if err != nil {
			return nil, err
		}
		fused := Fuse(lexical, vector)
		return fused[:min(len(fused), MaxCandidates)], nil
	}
}

// Vector ranks the request's scope by the cosine of each stored vector of
// model with query (a unit vector): its live memories (unless the request
// is for messages or one session) and the messages of its sessions (unless
// it is for memories), best first, at most MaxCandidates, none at or below
// 0. Every vector of the scope is scored; a session's message vectors are
// read from Postgres only when they changed since the searcher last read
// them (vectorCache).
func (s *Searcher) Vector(ctx context.Context, req Request, model string, query []float32) ([]Candidate, error) {
	var out []Candidate
	err := s.store.InTx(ctx, req.Tenant, func(tx *store.Tx) error {
		out = out[:0]
		var mems []store.MemoryVector
		var err error
		if req.Source != SourceMessage && req.Session == "" {
			if mems, err = tx.ScopeMemoryVectors(ctx, req.Scope.String(), model); err != nil {
				return err
			}
		}
		var msgs []*cachedVectors
		if req.Source != SourceMemory {
			filter := map[string]string{string(req.Scope.Kind): req.Scope.ID}
			sessions, err := tx.ScopeVectorSessions(ctx, filter, req.Session)
			if err != nil {
				return err
			}
			msgs, err = s.vectors.sessionVectors(req.Tenant, model, sessions, func(ids []string) ([]store.MessageVector, error) {
				return tx.SessionMessageVectors(ctx, ids, model)
			})
			if err != nil {
				return err
			}
		}
		// scores holds the memories' then each session's messages'; a
		// message's session is the last whose start is at or before it.
		starts := make([]int, len(msgs))
		n := len(mems)
		for i, m := range msgs {
			starts[i] = n
			n += m.len()
		}
		scores := make([]float32, n)
		for i, m := range mems {
			scores[i] = embed.DotEncoded(query, m.Vector)
		}
		for i, m := range msgs {
			for j := range m.len() {
				scores[starts[i]+j] = embed.Dot(query, m.vector(j))
			}
		}
		var keys []store.MessageKey
		for _, i := range embed.Best(scores, MaxCandidates) {
			switch {
			case scores[i] <= 0:
			case i < len(mems):
				out = append(out, Candidate{Source: SourceMemory, Memory: mems[i].Name, Time: mems[i].UpdatedAt, Score: float64(scores[i])})
			default:
				k := sort.SearchInts(starts, i+1) - 1
				m := store.MessageKey{SessionID: msgs[k].key.session, Position: msgs[k].positions[i-starts[k]]}
				keys = append(keys, m)
				out = append(out, Candidate{Source: SourceMessage, Session: m.SessionID, Position: m.Position, Score: float64(scores[i])})
			}
		}
		if len(keys) == 0 {
			return nil
		}
		heads, err := tx.MessageHeads(ctx, keys)
		if err != nil {
			return err
		}
		kept := out[:0] // a message erased since its vector was read is left out
		for _, c := range out {
			h, ok := heads[store.MessageKey{SessionID: c.Session, Position: c.Position}]
			if c.Source == SourceMessage {
				if !ok {
					continue
				}
				c.Role, c.Time = h.Role, h.CreatedAt
			}
			kept = append(kept, c)
		}
		out = kept
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
