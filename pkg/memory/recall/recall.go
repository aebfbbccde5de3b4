// Package recall surfaces long-term memories that bear on what a session's
// user just asked (see docs/memory.md): asked for through the API, or prefetched on
// ingest for each new user message of more than one word and shown in the
// context beside it.
//
// A recall lists the memories of the session's scopes that hold words of
// the request, best first by pkg/search's ranking of name, description and
// body, then the most recently updated; leaves out what the session was
// already shown; and lets a selector — a model judging by the
// descriptions, or the builtin selector taking the best ranked above a
// floor — pick at most a few. Names the selector invents are dropped and
// counted.
// Each memory surfaced is cut to a few lines and bytes and headed with its
// age; old ones carry a note to verify them. A session stops being shown
// memories once they add up to its budget, until its next compaction, which
// also lets the memories shown before it be shown again.
package recall

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/search"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Source says who asked for a recall.
type Source string

// Sources of recalls.
const (
	// SourceAPI: POST /v1/sessions/{id}/recall.
	SourceAPI Source = "api"
	// SourcePrefetch: on ingest, for a new user message.
	SourcePrefetch Source = "prefetch"
)

// Outcome is how a recall ended: the label of mnemos_recall_requests_total.
type Outcome string

// Outcomes of recalls.
const (
	// OutcomeSurfaced: memories were surfaced.
	OutcomeSurfaced Outcome = "surfaced"
	// OutcomeNone: nothing was surfaced (no candidates, or none picked).
	OutcomeNone Outcome = "none"
	// OutcomeCapped: the session's budget is spent until its next compaction.
	OutcomeCapped Outcome = "capped"
	// OutcomeFailed: the selector failed (the model, or its answer).
	OutcomeFailed Outcome = "failed"
	// OutcomeLate: a prefetch ended after the context had shown its user
	// message; what it picked is not surfaced.
	OutcomeLate Outcome = "late"
	// OutcomeSkipped: a prefetch found a newer user message; it is that
	// message's prefetch that counts.
	OutcomeSkipped Outcome = "skipped"
	// OutcomeDisabled: the tenant turned recall (or the prefetch) off.
	OutcomeDisabled Outcome = "disabled"
	// OutcomeRefused: a request through the API was bad input.
	OutcomeRefused Outcome = "refused"
	// OutcomeError: the recall could not be completed (Postgres, say).
	OutcomeError Outcome = "error"
)

// Reason says why a memory the selector picked was not surfaced: the label
// of mnemos_recall_dropped_total.
type Reason string

// Reasons for dropping a pick.
const (
	// ReasonInvented: the selector named a memory that is not a candidate.
	ReasonInvented Reason = "invented"
	// ReasonCap: over the most one recall surfaces, or over the session's budget.
	ReasonCap Reason = "cap"
	// ReasonDuplicate: named twice, or surfaced meanwhile by another recall.
	ReasonDuplicate Reason = "duplicate"
	// ReasonDeleted: deleted after it was listed.
	ReasonDeleted Reason = "deleted"
)

// Query is one recall.
type Query struct {
	Tenant    string
	SessionID string
	// MemoryScope names the scopes to recall from, as the turn event's
	// memory_scope does.
	MemoryScope map[string]string
	// Text is what the user asked.
	Text string
	// RecentTools are the tools the agent has just used.
	RecentTools []string
	Source      Source
	// MessageUUID is, for a prefetch, the user message the memories are
	// shown beside.
	MessageUUID string
}

// Memory is a memory a recall surfaced.
type Memory struct {
	Scope       memory.Scope
	Name        memory.Name
	Type        memory.Type
	Description string
	Revision    int64
	UpdatedAt   time.Time
	Reminder
}

// Result is what a recall did.
type Result struct {
	Outcome  Outcome
	Memories []Memory
	// Candidates is how many memories the selector chose from.
	Candidates int
	// Dropped counts the picks not surfaced, by reason; Invented lists the
	// names the selector made up.
	Dropped  map[Reason]int
	Invented []string
	// SessionBytes is what recall surfaced in the session since its latest
	// compaction, this recall's memories included.
	SessionBytes int64
	// Provider and Model are the selector's, when it was asked.
	Provider string
	Model    string
}

// SettingsFunc returns a tenant's recall settings.
type SettingsFunc func(ctx context.Context, tenant string) (Settings, error)

// Options configure a Recaller.
type Options struct {
	// Now is the clock ages are measured by (time.Now when nil).
	Now func() time.Time
}

// Recaller runs recalls. One serves a process: the API's recalls and the
// prefetches alike.
type Recaller struct {
	db       *store.Store
	memories *memory.Store
	provider llm.Provider
	settings SettingsFunc
	now      func() time.Time
	metrics  metrics
}

// New returns a Recaller reading memories from memories and asking
// provider (llm.TaskRecall) to select. meter may be nil.
func New(db *store.Store, memories *memory.Store, provider llm.Provider, settings SettingsFunc, meter metric.Meter, opts Options) (*Recaller, error) {
	meter = defaults.Meter(meter)
	m, err := newMetrics(meter)
	if err != nil {
		return nil, fmt.Errorf("recall.New: %w", err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Recaller{db: db, memories: memories, provider: provider, settings: settings, now: opts.Now, metrics: m}, nil
}

// Provider names the selector's provider.
func (r *Recaller) Provider() string { return r.provider.Name() }

// Refused counts a recall request refused as bad input before it ran.
func (r *Recaller) Refused(ctx context.Context, source Source) {
	r.metrics.count(ctx, source, Result{Outcome: OutcomeRefused})
}

// Recall surfaces the memories of q's scopes that bear on q.Text and
// records them as surfaced in q's session. Its error is a failure of the
// system or of the selector (Result.Outcome says which: error, failed); a
// recall that surfaces nothing is not an error. A prefetch also records
// what the context shows beside its user message (see Attach); when the
// context decided that first, the recall is late and surfaces nothing.
func (r *Recaller) Recall(ctx context.Context, q Query) (Result, error) {
	res, err := r.recall(ctx, q)
	r.metrics.count(ctx, q.Source, res)
	return res, err
}

func (r *Recaller) recall(ctx context.Context, q Query) (Result, error) {
	set, err := r.settings(ctx, q.Tenant)
	if err != nil {
		return Result{Outcome: OutcomeError}, fmt.Errorf("recall: settings of %s: %w", q.Tenant, err)
	}
	if !set.Enabled || q.Source == SourcePrefetch && !set.Prefetch {
		return Result{Outcome: OutcomeDisabled}, nil
	}
	st, err := r.load(ctx, q)
	if err != nil {
		return Result{Outcome: OutcomeError}, err
	}
	res := Result{Dropped: map[Reason]int{}, SessionBytes: st.bytes}
	switch {
	case st.decided:
		res.Outcome = OutcomeLate
		return res, nil
	case st.bytes >= set.SessionBytes:
		return r.conclude(ctx, q, res, OutcomeCapped)
	}
	now := r.now()
	cands, err := r.candidates(ctx, q, set, st.surfaced)
	if err != nil {
		return Result{Outcome: OutcomeError}, err
	}
	res.Candidates = len(cands)
	if len(cands) == 0 {
		return r.conclude(ctx, q, res, OutcomeNone)
	}
	res.Provider = r.provider.Name()
	resp, err := r.provider.Complete(ctx, request(q.Tenant, q.SessionID, q.Text, q.RecentTools, cands, set.MaxMemories, now))
	res.Model = resp.Model
	var picks []string
	if err == nil {
		picks, err = parseAnswer(resp.Text)
	}
	if err != nil {
		// The call may have failed because ctx ran out; recording that
		// nothing is shown still has to happen.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		res, cerr := r.conclude(rctx, q, res, OutcomeFailed)
		return res, errors.Join(fmt.Errorf("recall: selector: %w", err), cerr)
	}
	chosen := r.choose(picks, cands, set.MaxMemories, &res)
	var shown []Memory
	for _, c := range chosen {
		m, err := r.memories.Get(ctx, q.Tenant, c.Header.Scope, c.Header.Name)
		if errors.Is(err, memory.ErrNotFound) {
			res.Dropped[ReasonDeleted]++
			continue
		}
		if err != nil {
			return Result{Outcome: OutcomeError}, fmt.Errorf("recall: %w", err)
		}
		shown = append(shown, Memory{Scope: m.Scope, Name: m.Name, Type: m.Type, Description: m.Description,
			Revision: m.Revision, UpdatedAt: m.UpdatedAt, Reminder: Remind(m, now, set)})
	}
	return r.record(ctx, q, set, shown, res)
}

// state is what a recall reads of its session before it selects.
type state struct {
	// surfaced holds the references of every memory the session was shown
	// since its latest compaction.
	surfaced map[string]bool
	// bytes is what was surfaced since the session's latest compaction.
	bytes int64
	// decided: a prefetch's user message is decided already.
	decided bool
}

func (r *Recaller) load(ctx context.Context, q Query) (state, error) {
	var st state
	err := r.db.InTx(ctx, q.Tenant, func(tx *store.Tx) error {
		var err error
		st = state{}
		if st.surfaced, st.bytes, _, err = surfaced(ctx, tx, q.SessionID); err != nil {
			return err
		}
		if q.Source == SourcePrefetch {
			st.decided, err = Decided(ctx, tx, q.SessionID, q.MessageUUID)
		}
		return err
	})
	if err != nil {
		return state{}, fmt.Errorf("recall: reading session %s: %w", q.SessionID, err)
	}
	return st, nil
}

// surfaced reads what a session was shown since its latest compaction,
// which it names ("" before the first, or for a session not accounted
// yet): every memory's reference, and the bytes. A compaction resets both:
// what was shown before it left the context with the messages it replaced.
func surfaced(ctx context.Context, tx *store.Tx, sessionID string) (refs map[string]bool, bytes int64, compaction string, err error) {
	sess, err := tx.Session(ctx, sessionID)
	switch {
	case err == nil:
		compaction = sess.CompactionID
	case !errors.Is(err, store.ErrNotFound):
		return nil, 0, "", err
	}
	rows, err := tx.RecallSurfaced(ctx, sessionID)
	if err != nil {
		return nil, 0, "", err
	}
	refs = make(map[string]bool, len(rows))
	for _, s := range rows {
		if s.CompactionID == compaction {
			refs[s.Scope+"/"+s.Name] = true
			bytes += s.Bytes
		}
	}
	return refs, bytes, compaction, nil
}

// candidates are the memories of q's scopes the selector sees, at most
// set.Candidates of them, without those the session was already shown:
// first the memories that hold words of q.Text, best first by their
// scores (pkg/search's ranking of name, description and body, the best
// maxRanked of each scope), then the most recently updated, unscored.
func (r *Recaller) candidates(ctx context.Context, q Query, set Settings, shown map[string]bool) ([]Candidate, error) {
	var ranked, recent []Candidate
	for _, sc := range memory.ScopesOf(q.MemoryScope) {
		headers, err := r.memories.Headers(ctx, q.Tenant, sc, set.Candidates)
		if err != nil {
			return nil, fmt.Errorf("recall: headers of %s: %w", sc, err)
		}
		for _, h := range headers {
			recent = append(recent, Candidate{Header: h, Ref: Ref(h.Scope, h.Name)})
		}
		best, err := r.ranked(ctx, q, sc, min(set.Candidates, maxRanked), headers)
		if err != nil {
			return nil, err
		}
		ranked = append(ranked, best...)
	}
	slices.SortStableFunc(ranked, func(a, b Candidate) int { return cmp.Compare(b.Score, a.Score) })
	slices.SortStableFunc(recent, func(a, b Candidate) int { return b.Header.UpdatedAt.Compare(a.Header.UpdatedAt) })
	var out []Candidate
	for _, c := range append(ranked, recent...) {
		if !shown[c.Ref] && len(out) < set.Candidates && !slices.ContainsFunc(out, func(o Candidate) bool { return o.Ref == c.Ref }) {
			out = append(out, c)
		}
	}
	return out, nil
}

// maxRanked bounds the memories of a scope that come first for holding
// words of the query.
const maxRanked = 50

// ranked are scope's memories that hold words of q.Text, best first with
// their scores, at most limit: their headers from known when it holds
// them, else read at once.
func (r *Recaller) ranked(ctx context.Context, q Query, scope memory.Scope, limit int, known []memory.Header) ([]Candidate, error) {
	var found []search.Candidate
	err := r.db.InTx(ctx, q.Tenant, func(tx *store.Tx) error {
		var err error
		found, err = search.RankMemories(ctx, tx, scope, clipQuery(q.Text), Background, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("recall: ranking %s: %w", scope, err)
	}
	headers := map[memory.Name]memory.Header{}
	var missing []memory.Name
	for _, f := range found {
		name := memory.Name(f.Memory)
		if i := slices.IndexFunc(known, func(h memory.Header) bool { return h.Name == name }); i >= 0 {
			headers[name] = known[i]
		} else {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		read, err := r.memories.HeadersNamed(ctx, q.Tenant, scope, missing)
		if err != nil {
			return nil, fmt.Errorf("recall: ranking %s: %w", scope, err)
		}
		for _, h := range read {
			headers[h.Name] = h
		}
	}
	var out []Candidate
	for _, f := range found {
		h, ok := headers[memory.Name(f.Memory)]
		if !ok {
			continue // deleted since
		}
		out = append(out, Candidate{Header: h, Ref: Ref(scope, h.Name), Score: f.Score})
	}
	return out, nil
}

// choose resolves the selector's picks, in its order: invented names,
// repeats and picks beyond max are dropped and counted.
func (r *Recaller) choose(picks []string, cands []Candidate, max int, res *Result) []Candidate {
	var out []Candidate
	seen := map[string]bool{}
	for _, p := range picks {
		c, ok := resolve(p, cands)
		switch {
		case !ok:
			res.Dropped[ReasonInvented]++
			res.Invented = append(res.Invented, p)
		case seen[c.Ref]:
			res.Dropped[ReasonDuplicate]++
		case len(out) == max:
			res.Dropped[ReasonCap]++
		default:
			seen[c.Ref] = true
			out = append(out, c)
		}
	}
	return out
}

// errLate rolls back a prefetch whose user message was decided meanwhile.
var errLate = errors.New("recall: the user message was decided first")

// record stores what a recall surfaces, under the session's recall lock:
// memories surfaced meanwhile by another recall are dropped, and once the
// session has been shown its budget (the memory that crosses it is still
// shown whole) so is every memory after.
// A prefetch records the reminders to show beside its user message in the
// same transaction.
func (r *Recaller) record(ctx context.Context, q Query, set Settings, shown []Memory, res Result) (Result, error) {
	var kept []Memory
	var dropped map[Reason]int
	var bytes int64
	err := r.db.InTx(ctx, q.Tenant, func(tx *store.Tx) error {
		kept, dropped = nil, map[Reason]int{}
		if err := tx.LockRecallSession(ctx, q.SessionID); err != nil {
			return err
		}
		refs, b, compaction, err := surfaced(ctx, tx, q.SessionID)
		if err != nil {
			return err
		}
		bytes = b
		for i, m := range shown {
			size := int64(len(m.Text))
			if refs[Ref(m.Scope, m.Name)] {
				dropped[ReasonDuplicate]++
				continue
			}
			if bytes >= set.SessionBytes {
				dropped[ReasonCap] += len(shown) - i
				break
			}
			if _, err := tx.InsertRecallSurfaced(ctx, store.RecallSurfaced{
				SessionID: q.SessionID, Scope: m.Scope.String(), Name: string(m.Name), Revision: m.Revision,
				Source: string(q.Source), MessageUUID: q.MessageUUID, CompactionID: compaction, Bytes: size,
			}); err != nil {
				return err
			}
			bytes += size
			kept = append(kept, m)
		}
		if q.Source != SourcePrefetch {
			return nil
		}
		blocks := make([]string, len(kept))
		for i, m := range kept {
			blocks[i] = m.Text
		}
		ok, err := tx.InsertRecallPrefetch(ctx, store.RecallPrefetch{
			SessionID: q.SessionID, MessageUUID: q.MessageUUID, Outcome: string(outcomeOf(kept, dropped)), Blocks: blocks,
		})
		if err == nil && !ok {
			err = errLate
		}
		return err
	})
	if errors.Is(err, errLate) {
		res.Outcome = OutcomeLate
		return res, nil
	}
	if err != nil {
		return Result{Outcome: OutcomeError}, fmt.Errorf("recall: recording session %s: %w", q.SessionID, err)
	}
	for reason, n := range dropped {
		res.Dropped[reason] += n
	}
	res.Memories, res.SessionBytes, res.Outcome = kept, bytes, outcomeOf(kept, dropped)
	return res, nil
}

func outcomeOf(kept []Memory, dropped map[Reason]int) Outcome {
	switch {
	case len(kept) > 0:
		return OutcomeSurfaced
	case dropped[ReasonCap] > 0:
		return OutcomeCapped
	default:
		return OutcomeNone
	}
}

// conclude ends a recall that surfaces nothing. A prefetch records that
// nothing is shown beside its user message (so the context need not wait
// for it), unless that was decided first.
func (r *Recaller) conclude(ctx context.Context, q Query, res Result, outcome Outcome) (Result, error) {
	res.Outcome = outcome
	if q.Source != SourcePrefetch {
		return res, nil
	}
	var ok bool
	err := r.db.InTx(ctx, q.Tenant, func(tx *store.Tx) error {
		var err error
		ok, err = tx.InsertRecallPrefetch(ctx, store.RecallPrefetch{SessionID: q.SessionID, MessageUUID: q.MessageUUID, Outcome: string(outcome)})
		return err
	})
	if err != nil {
		return Result{Outcome: OutcomeError}, fmt.Errorf("recall: recording session %s: %w", q.SessionID, err)
	}
	if !ok {
		res.Outcome = OutcomeLate
	}
	return res, nil
}

// Turn is an accounted turn, as a prefetch reads it.
type Turn struct {
	Tenant    string
	SessionID string
	Seq       int64
	// MemoryScope is the turn event's.
	MemoryScope map[string]string
	// MessageUUIDs are the messages the turn added.
	MessageUUIDs []string
}

// Prefetch runs the recall of a turn that added a user message of more than
// one word, for the latest such message: its text is the query, and the
// tools used in the latest set.RecentRounds rounds are the tools just used.
// A turn without one, of a session that reads no scope, or of a tenant
// whose prefetch is off does nothing (Outcome skipped or disabled, not
// counted). A newer user message already stored makes it skipped: the
// context shows recalls beside the latest user message only.
func (r *Recaller) Prefetch(ctx context.Context, t Turn) (Result, error) {
	if len(memory.ScopesOf(t.MemoryScope)) == 0 || len(t.MessageUUIDs) == 0 {
		return Result{Outcome: OutcomeSkipped}, nil
	}
	set, err := r.settings(ctx, t.Tenant)
	if err != nil {
		return Result{Outcome: OutcomeError}, fmt.Errorf("recall: settings of %s: %w", t.Tenant, err)
	}
	if !set.Enabled || !set.Prefetch {
		return Result{Outcome: OutcomeDisabled}, nil
	}
	from := max(t.Seq-int64(set.RecentRounds)+1, 1)
	var msgs []view.Message
	err = r.db.InTx(ctx, t.Tenant, func(tx *store.Tx) error {
		rows, err := tx.MessagesFromRound(ctx, t.SessionID, from)
		if err != nil {
			return err
		}
		msgs, err = sessionctx.Messages(rows)
		return err
	})
	if err != nil {
		return Result{Outcome: OutcomeError}, fmt.Errorf("recall: reading session %s: %w", t.SessionID, err)
	}
	added := map[string]bool{}
	for _, u := range t.MessageUUIDs {
		added[u] = true
	}
	at := -1
	for i, m := range msgs {
		if added[m.UUID] && Prefetched(m) {
			at = i
		}
	}
	if at < 0 {
		return Result{Outcome: OutcomeSkipped}, nil
	}
	for _, m := range msgs[at+1:] {
		if Prefetched(m) {
			res := Result{Outcome: OutcomeSkipped}
			r.metrics.count(ctx, SourcePrefetch, res)
			return res, nil
		}
	}
	return r.Recall(ctx, Query{
		Tenant: t.Tenant, SessionID: t.SessionID, MemoryScope: t.MemoryScope,
		Text: UserText(msgs[at]), RecentTools: toolsUsed(msgs), Source: SourcePrefetch, MessageUUID: msgs[at].UUID,
	})
}

// toolsUsed lists the tools the messages' tool calls named, once each, in
// the order first used.
func toolsUsed(msgs []view.Message) []string {
	var out []string
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == turn.BlockToolUse && b.Name != "" && !slices.Contains(out, b.Name) {
				out = append(out, b.Name)
			}
		}
	}
	return out
}

type metrics struct {
	requests metric.Int64Counter
	selected metric.Int64Counter
	dropped  metric.Int64Counter
}

func newMetrics(m metric.Meter) (metrics, error) {
	var out metrics
	var err error
	if out.requests, err = m.Int64Counter("mnemos.recall.requests",
		metric.WithDescription("Recalls, by source (api, prefetch) and outcome (surfaced, none, capped, failed, late, skipped, disabled, refused, error).")); err != nil {
		return out, err
	}
	if out.selected, err = m.Int64Counter("mnemos.recall.selected",
		metric.WithDescription("Memories recall surfaced, by source.")); err != nil {
		return out, err
	}
	if out.dropped, err = m.Int64Counter("mnemos.recall.dropped",
		metric.WithDescription("Memories the selector picked that were not surfaced, by source and reason (invented, cap, duplicate, deleted).")); err != nil {
		return out, err
	}
	return out, nil
}

// count records a recall's outcome, what it surfaced and what it dropped.
func (m metrics) count(ctx context.Context, source Source, res Result) {
	src := attribute.String("source", string(source))
	m.requests.Add(ctx, 1, metric.WithAttributes(src, attribute.String("outcome", string(res.Outcome))))
	if n := len(res.Memories); n > 0 {
		m.selected.Add(ctx, int64(n), metric.WithAttributes(src))
	}
	for reason, n := range res.Dropped {
		if n > 0 {
			m.dropped.Add(ctx, int64(n), metric.WithAttributes(src, attribute.String("reason", string(reason))))
		}
	}
}
