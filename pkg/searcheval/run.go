package searcheval

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Hit is one hit of Mnemos's search: a message of a session at a
// position, or a memory by name.
type Hit struct {
	Source   string
	Session  string
	Position int64
	Memory   string
}

// Server is the Mnemos an evaluation runs against.
type Server interface {
	// Send delivers turn events in order.
	Send(ctx context.Context, events []turn.Event) error
	// AppliedSeq is the last seq of the session the server has applied, 0
	// when it has none yet.
	AppliedSeq(ctx context.Context, session string) (int64, error)
	// Search asks the scope's ranked search for query's best limit hits.
	Search(ctx context.Context, scope, query string, limit int) ([]Hit, error)
}

// Options control a run.
type Options struct {
	// RunID names the run's scopes and sessions: conversation i goes into
	// the scope project:<RunID>-c<i>, its session j is <RunID>-c<i>-s<j>.
	// It must be fresh, so no earlier run's turns are searched.
	RunID string
	// Wait bounds the wait for the server to apply every turn; 0 means 5 minutes.
	Wait time.Duration
	// Ready, when set, is called once every turn is applied and before
	// the first question: a wait for what the server indexes in the
	// background (embeddings), which no session state shows.
	Ready func(ctx context.Context) error
	// Progress, when set, gets a line at each step.
	Progress io.Writer
	// Now dates the turns of a dataset that gives no dates; zero means time.Now.
	Now time.Time
}

// Report is what a run measured.
type Report struct {
	Conversations int       `json:"conversations"`
	Sessions      int       `json:"sessions"`
	Turns         int       `json:"turns"`
	Questions     int       `json:"questions"`
	Skipped       []Skipped `json:"skipped"`
	// Scopes are the scopes the run created, one per conversation.
	Scopes []string `json:"scopes"`
	// Mnemos and BM25 are the figures of the two systems over every
	// question; ByKind the same per question kind, when questions have one.
	Mnemos Scores            `json:"mnemos"`
	BM25   Scores            `json:"bm25"`
	ByKind map[string]Paired `json:"by_kind,omitempty"`
	// MemoryHits is how many of Mnemos's hits were memories rather than
	// messages: they name no turn, so they count as misses.
	MemoryHits int              `json:"memory_hits"`
	Results    []QuestionResult `json:"results"`
}

// Paired is both systems' figures over the same questions.
type Paired struct {
	Mnemos Scores `json:"mnemos"`
	BM25   Scores `json:"bm25"`
}

// QuestionResult is one question and where each system ranked its
// evidence turns (0: not among the Depth hits).
type QuestionResult struct {
	Conversation string   `json:"conversation"`
	ID           string   `json:"id"`
	Kind         string   `json:"kind,omitempty"`
	Question     string   `json:"question"`
	Evidence     []string `json:"evidence"`
	Mnemos       []int    `json:"mnemos"`
	BM25         []int    `json:"bm25"`
	// MnemosHits and BM25Hits are the turn ids of each system's hits in
	// order ("" for a memory).
	MnemosHits []string `json:"mnemos_hits"`
	BM25Hits   []string `json:"bm25_hits"`
}

// sentTurn is where a turn went: its session and the position of its one
// message there.
type sentTurn struct {
	session  string
	position int64
}

// Run sends every turn of ds to srv, one round each, waits until the
// server has applied them all, asks every question of srv and of BM25 over
// each conversation's turns, and scores both.
func Run(ctx context.Context, ds *Dataset, srv Server, opts Options) (*Report, error) {
	if opts.RunID == "" {
		return nil, fmt.Errorf("searcheval: a run id is required")
	}
	if opts.Wait <= 0 {
		opts.Wait = 5 * time.Minute
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now().UTC()
	}
	rep := &Report{Conversations: len(ds.Conversations), Sessions: ds.Sessions(), Turns: ds.Turns(), Questions: ds.Questions(), Skipped: []Skipped{}}
	events, where, last := buildEvents(ds, opts)
	for ci := range ds.Conversations {
		rep.Scopes = append(rep.Scopes, "project:"+scopeID(opts.RunID, ci))
	}
	progress(opts, "sending %d turns of %d conversations in %d sessions as rounds", len(events), len(ds.Conversations), len(last))
	if err := srv.Send(ctx, events); err != nil {
		return nil, fmt.Errorf("searcheval: send turns: %w", err)
	}
	if err := waitApplied(ctx, srv, last, opts.Wait); err != nil {
		return nil, err
	}
	if opts.Ready != nil {
		if err := opts.Ready(ctx); err != nil {
			return nil, fmt.Errorf("searcheval: wait until ready: %w", err)
		}
	}
	progress(opts, "every turn applied; asking %d questions", rep.Questions)
	turnAt := map[sentTurn]string{}
	for id, st := range where {
		turnAt[st] = id.turn
	}
	for ci := range ds.Conversations {
		if err := askConversation(ctx, rep, srv, &ds.Conversations[ci], rep.Scopes[ci], ci, turnAt); err != nil {
			return nil, err
		}
	}
	rep.score()
	return rep, nil
}

func progress(opts Options, format string, args ...any) {
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, format+"\n", args...)
	}
}

func scopeID(run string, conv int) string { return fmt.Sprintf("%s-c%d", run, conv+1) }

func sessionID(run string, conv, sess int) string {
	return fmt.Sprintf("%s-c%d-s%d", run, conv+1, sess+1)
}

// turnKey names a turn across conversations.
type turnKey struct {
	conv int
	turn string
}

// buildEvents makes one turn event per turn: a round of one user message,
// the turn's Document, into its session, in the scope of its
// conversation. It returns the events, where each turn's message lands,
// and each session's last seq.
func buildEvents(ds *Dataset, opts Options) ([]turn.Event, map[turnKey]sentTurn, map[string]int64) {
	var events []turn.Event
	where := map[turnKey]sentTurn{}
	last := map[string]int64{}
	for ci, c := range ds.Conversations {
		scope := map[string]string{"project": scopeID(opts.RunID, ci)}
		for si, s := range c.Sessions {
			session := sessionID(opts.RunID, ci, si)
			at := s.time
			if at.IsZero() {
				at = opts.Now
			}
			for ti, t := range s.Turns {
				seq := int64(ti + 1)
				when := at.Add(time.Duration(ti) * time.Minute)
				if t.Date != "" {
					when, _ = parseDate(t.Date) // checked by Parse
				}
				events = append(events, turn.Event{
					Schema: turn.SchemaV1, EventID: session + "-" + strconv.FormatInt(seq, 10), SessionID: session, Seq: seq,
					MemoryScope: scope,
					InputMessages: []turn.Message{{
						UUID: session + "-m" + strconv.FormatInt(seq, 10), Role: "user",
						Content: turn.Content{{Type: turn.BlockText, Text: t.Document()}},
					}},
					OccurredAt: when,
				})
				where[turnKey{ci, t.ID}] = sentTurn{session: session, position: int64(ti)}
				last[session] = seq
			}
		}
	}
	return events, where, last
}

// waitApplied polls each session until the server has applied its last
// seq, or wait has passed.
func waitApplied(ctx context.Context, srv Server, last map[string]int64, wait time.Duration) error {
	sessions := make([]string, 0, len(last))
	for s := range last {
		sessions = append(sessions, s)
	}
	sort.Strings(sessions)
	deadline := time.Now().Add(wait)
	for _, s := range sessions {
		for {
			applied, err := srv.AppliedSeq(ctx, s)
			if err != nil {
				return fmt.Errorf("searcheval: read session %s: %w", s, err)
			}
			if applied >= last[s] {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("searcheval: session %s: applied through seq %d of %d after %s", s, applied, last[s], wait)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// askConversation asks each question of conversation c (index ci) of
// Mnemos, in scope, and of BM25 over its turns, and adds the results.
func askConversation(ctx context.Context, rep *Report, srv Server, c *Conversation, scope string, ci int, turnAt map[sentTurn]string) error {
	var ids, docs []string
	for _, s := range c.Sessions {
		for _, t := range s.Turns {
			ids, docs = append(ids, t.ID), append(docs, t.Document())
		}
	}
	ix := NewBM25(docs)
	for _, q := range c.Questions {
		hits, err := srv.Search(ctx, scope, q.Question, Depth)
		if err != nil {
			return fmt.Errorf("searcheval: conversation %s, question %s: %w", c.ID, q.ID, err)
		}
		res := QuestionResult{Conversation: c.ID, ID: q.ID, Kind: q.Kind, Question: q.Question, Evidence: q.Evidence,
			MnemosHits: []string{}, BM25Hits: []string{}}
		for _, h := range hits {
			id := ""
			if h.Source == "memory" {
				rep.MemoryHits++
			} else {
				id = turnAt[sentTurn{session: h.Session, position: h.Position}]
			}
			res.MnemosHits = append(res.MnemosHits, id)
		}
		for _, s := range ix.Search(q.Question, Depth) {
			res.BM25Hits = append(res.BM25Hits, ids[s.Doc])
		}
		res.Mnemos, res.BM25 = Ranks(q.Evidence, res.MnemosHits), Ranks(q.Evidence, res.BM25Hits)
		rep.Results = append(rep.Results, res)
	}
	return nil
}

// score fills the figures from the results, overall and by kind.
func (rep *Report) score() {
	var mn, bm [][]int
	kinds := map[string]*[2][][]int{}
	for _, r := range rep.Results {
		mn, bm = append(mn, r.Mnemos), append(bm, r.BM25)
		if r.Kind != "" {
			k := kinds[r.Kind]
			if k == nil {
				k = &[2][][]int{}
				kinds[r.Kind] = k
			}
			k[0], k[1] = append(k[0], r.Mnemos), append(k[1], r.BM25)
		}
	}
	rep.Mnemos, rep.BM25 = Score(mn), Score(bm)
	if len(kinds) > 0 {
		rep.ByKind = map[string]Paired{}
		for name, k := range kinds {
			rep.ByKind[name] = Paired{Mnemos: Score(k[0]), BM25: Score(k[1])}
		}
	}
}
