package compactor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/lease"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/retention"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// job is one compaction's inputs, read when it is claimed.
type job struct {
	c     store.Compaction
	set   tenantcfg.Settings
	state sessionctx.State
	// all is every stored message of the session, as stored; shown the
	// current context as rendered (head, then messages with micro-compaction).
	all   []view.Message
	shown []view.Message
	notes *store.Notes
}

// result is what a compaction made.
type result struct {
	method   string
	summary  string
	head     []view.Message
	keepFrom int64
	kept     []view.Message
	sum      compaction.Summary
	// span are the messages the result replaces, score what it kept of
	// what must survive them.
	span  []view.Message
	score retention.Score
	// llmErr is the failure of an LLM summary that fell back to the extractive one.
	llmErr error
	// noProgress says why a model summary that answered was not used.
	noProgress string
	// notesUnused says why the session's notes were not used, when they
	// kept too little (under compaction.min_retention).
	notesUnused string
}

// shape is where a summary goes: the messages it replaces (span), a prefix
// kept before it (a partial "from"), the messages kept after it, what is
// restored, and the first position kept.
type shape struct {
	span, prefix, kept []view.Message
	restored           []turn.Block
	keepFrom           int64
}

// place puts res in its shape: its head, what it keeps, and its retention
// score.
func (s *Service) place(j job, res *result, sh shape) {
	res.span, res.kept, res.keepFrom = sh.span, sh.kept, sh.keepFrom
	res.head = s.head(j, res, sh.prefix, sh.restored)
	res.score = retention.Of(sh.span, res.head, sh.kept, j.set.Compaction.ToolNames())
}

// failure ends a compaction without changing the context: the request was
// wrong (a pivot not in the context, nothing to summarize).
type failure struct{ reason string }

func (f failure) Error() string { return f.reason }

// Compact runs compaction id of a session. It is safe to call again for the
// same compaction: a finished one is left as it is. progress, when not nil,
// is called periodically while the compaction runs.
func (s *Service) Compact(ctx context.Context, tenant, session, id string, progress func() error) error {
	set, err := s.settings.For(ctx, tenant)
	if err != nil {
		return fmt.Errorf("compactor: settings of %s: %w", tenant, err)
	}
	if err := s.awaitNotes(ctx, tenant, session, set); err != nil {
		return err
	}
	ctx, give, err := holdSlot(ctx, s.slots, progress)
	if err != nil {
		return err
	}
	defer give()
	j, done, err := s.claim(ctx, tenant, session, id, set)
	if err != nil || done {
		return err
	}

	var res *result
	err = lease.Hold(ctx, s.holder(tenant, id, progress), func(ctx context.Context) (err error) {
		res, err = s.compact(ctx, j)
		return err
	})
	var f failure
	switch {
	case errors.As(err, &f):
		return s.end(ctx, j, store.CompactionFailed, f.reason)
	case err != nil:
		if rerr := s.store.ReleaseCompaction(context.WithoutCancel(ctx), tenant, id); rerr != nil {
			s.log.Warn("could not release compaction; its lease will run out", "tenant", tenant, "session", session, "compaction", id, "err", rerr)
		}
		return fmt.Errorf("compactor: compaction %s of %s/%s: %w", id, tenant, session, err)
	case res == nil && !autoCompacts(j):
		return s.end(ctx, j, store.CompactionSkipped, "auto-compaction is off for the session or its tenant")
	case res == nil:
		return s.end(ctx, j, store.CompactionSkipped, "the session is below the auto-compact threshold")
	}
	return s.commit(ctx, j, res)
}

// claim takes compaction id and reads what it needs. done reports a
// compaction that already ended.
func (s *Service) claim(ctx context.Context, tenant, session, id string, set tenantcfg.Settings) (job, bool, error) {
	j := job{set: set}
	done := false
	err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		c, err := tx.Compaction(ctx, id)
		if err != nil {
			return err
		}
		if c.SessionID != session {
			return bus.Permanent(fmt.Errorf("compaction %s belongs to session %s, not %s", id, c.SessionID, session))
		}
		switch c.Status {
		case store.CompactionCompleted, store.CompactionFailed, store.CompactionSkipped:
			done = true
			return nil
		}
		c, err = tx.StartCompaction(ctx, session, id, s.now().Add(s.cfg.Lease))
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("compaction %s is running elsewhere: %w", id, store.ErrCompactionRunning)
		}
		if err != nil {
			return err
		}
		j.c = c
		// The notes before the messages: each statement of the transaction
		// sees what was committed when it began, and notes are committed
		// only after the messages they cover, so every message the notes
		// cover is among those read next. Read the other way round, turns
		// applied in between would leave the notes' last message outside
		// the context, and the session-memory compaction would fall through.
		notes, err := tx.Notes(ctx, session)
		switch {
		case err == nil:
			j.notes = &notes
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if j.state, j.all, err = sessionctx.LoadAll(ctx, tx, session); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return job{}, false, err
	}
	if !done {
		j.shown = append(append([]view.Message(nil), j.state.Head...), assembly.Shown(j.state.Messages, j.state.Cleared, j.state.Cuts)...)
	}
	return j, done, nil
}

// holder keeps the compaction's lease while it runs, and the request's ack
// wait with it.
func (s *Service) holder(tenant, id string, progress func() error) lease.Holder {
	return lease.Holder{
		Every: s.cfg.Lease / 3,
		Renew: func(ctx context.Context) error {
			return s.store.RenewCompaction(ctx, tenant, id, s.now().Add(s.cfg.Lease))
		},
		Progress: progress, Lost: fmt.Errorf("compaction %s: %w", id, lease.ErrLost),
		Log: s.log, Attrs: []any{"tenant", tenant, "compaction", id},
	}
}

// compact decides how to compact and does it. A nil result means there is
// nothing to do.
func (s *Service) compact(ctx context.Context, j job) (*result, error) {
	sess := j.state.Session
	limits := accounting.Limits(j.set.Tokens, sess)
	j.c.PreTokens = sess.TokenCount
	if j.c.Trigger == events.TriggerAuto && (!autoCompacts(j) || !limits.AboveAutoCompact(sess.TokenCount)) {
		return nil, nil
	}
	if j.c.Direction != "" {
		return s.partial(ctx, j)
	}
	if len(j.shown) == 0 {
		return nil, failure{"the session has no messages to compact"}
	}
	// Notes cannot follow instructions: a compaction that brings its own
	// goes to a summary that can (the model's, or the extractive one's
	// focus).
	var notesUnused string
	if j.c.Instructions == "" {
		var res *result
		if res, notesUnused = s.fromNotes(ctx, j, limits); res != nil {
			return res, nil
		}
	}
	res, err := s.summarize(ctx, j, j.shown)
	if err != nil {
		return nil, err
	}
	res = s.vet(ctx, j, res, shape{span: j.shown, restored: s.restore(j, nil), keepFrom: throughOf(j) + 1},
		func(res *result) string { return noProgress(j, limits, res) })
	res.notesUnused = notesUnused
	return res, nil
}

// vet places a summary and, when it is the model's, uses it only if it
// makes progress (by progress, when not nil) and keeps at least the
// tenant's compaction.min_retention; otherwise the funnel goes on to its
// next step, the extractive summary of the same messages, and the result
// says why.
func (s *Service) vet(ctx context.Context, j job, res *result, sh shape, progress func(*result) string) *result {
	s.place(j, res, sh)
	if res.method != events.MethodFull {
		return res
	}
	why := ""
	if progress != nil {
		if why = progress(res); why != "" {
			s.metrics.noProgress(ctx, events.MethodFull)
		}
	}
	if why == "" {
		if why = lowRetention(j, res.score); why != "" {
			s.metrics.lowRetention(ctx, events.MethodFull)
		}
	}
	if why == "" {
		return res
	}
	// Not a success: the funnel goes on to its next step.
	s.log.Warn("the model summary was not used; using the extractive summary", "tenant", j.state.Session.TenantID,
		"session", j.state.Session.SessionID, "compaction", j.c.ID, "reason", why)
	next := s.extractive(j, sh.span)
	next.sum, next.noProgress = res.sum, why
	s.place(j, next, sh)
	return next
}

// lowRetention says why a result keeps too little of what must survive the
// messages it replaces: its retention score is under the tenant's
// compaction.min_retention; "" when it is not, or the floor is off.
func lowRetention(j job, score retention.Score) string {
	floor := j.set.Compaction.MinRetention
	if floor <= 0 || score.Overall >= floor {
		return ""
	}
	var short []string
	for _, c := range retention.Categories() {
		if t := score.Categories[c]; t.Found < t.Total {
			short = append(short, fmt.Sprintf("%s %d/%d", c, t.Found, t.Total))
		}
	}
	return fmt.Sprintf("its retention is %.3f (%s), under compaction.min_retention %.3g", score.Overall, strings.Join(short, ", "), floor)
}

// noProgress says why a compaction's result is not one: still at or above
// the auto-compact threshold, or saving less than the tenant's
// compaction.min_saving_percent of the session's count; "" when it is.
func noProgress(j job, limits tokens.Limits, res *result) string {
	pre := j.state.Session.TokenCount
	post := view.Tokens(res.head) + view.Tokens(res.kept)
	switch {
	case j.c.Trigger == events.TriggerAuto && post >= limits.AutoCompact:
		return fmt.Sprintf("the result holds %d tokens, not under auto-compact at %d", post, limits.AutoCompact)
	case pre > 0 && (pre-post)*100 < pre*int64(j.set.Compaction.MinSavingPercent):
		return fmt.Sprintf("the result saves %d of %d tokens, under %d%%", max(pre-post, 0), pre, j.set.Compaction.MinSavingPercent)
	}
	return ""
}

// fromNotes is session-memory compaction: the session's notes, cut to the
// tenant's section and total limits, are the summary and the messages after
// the last one they cover stay. It returns nil to fall through to the next
// method: no notes, notes that are only the empty template, notes that end
// before the context starts, a result still above auto-compact or saving
// too little, or one that keeps less than the tenant's
// compaction.min_retention of what must survive the messages it replaces
// (then with the reason, for the compaction's record).
func (s *Service) fromNotes(ctx context.Context, j job, limits tokens.Limits) (*result, string) {
	notUsed := func(reason any) (*result, string) {
		s.log.Info("session notes not used for compaction", "tenant", j.state.Session.TenantID, "session", j.state.Session.SessionID, "compaction", j.c.ID, "reason", reason)
		return nil, ""
	}
	if j.notes == nil {
		return notUsed("the session has no notes yet")
	}
	if strings.TrimSpace(j.notes.Content) == "" || j.notes.LastSummarizedUUID == "" {
		return notUsed("the notes cover no message yet")
	}
	sm := j.set.SessionMemory
	summary, err := sessionnotes.ForCompaction(j.notes.Content, sm.TemplateText(), sm.SectionTokens, sm.TotalTokens)
	if err != nil {
		return notUsed(err)
	}
	stored := j.shown[len(j.state.Head):]
	k := j.set.Compaction.SessionMemory
	i, err := compaction.KeepFrom(stored, j.notes.LastSummarizedUUID, compaction.KeepLimits{
		MinTokens: k.MinTokens, MinTextMessages: k.MinTextMessages, MaxTokens: k.MaxTokens,
	})
	if err != nil {
		return notUsed(err) // the notes end before the context does: they cannot replace it
	}
	kept := stored[i:]
	sh := shape{span: j.shown[:len(j.state.Head)+i], kept: kept, restored: s.restore(j, kept), keepFrom: throughOf(j) + 1}
	if len(kept) > 0 {
		sh.keepFrom = kept[0].Position
	}
	res := &result{method: events.MethodSessionMemory, summary: summary}
	s.place(j, res, sh)
	if n := view.Tokens(res.head) + view.Tokens(res.kept); n >= limits.AutoCompact {
		return notUsed(fmt.Sprintf("the notes and the kept messages come to %d tokens, not under auto-compact at %d", n, limits.AutoCompact))
	}
	if why := noProgress(j, limits, res); why != "" {
		return notUsed(why)
	}
	if why := lowRetention(j, res.score); why != "" {
		s.metrics.lowRetention(ctx, events.MethodSessionMemory)
		notUsed(why)
		return nil, why
	}
	return res, ""
}

// awaitNotes gives the session's notes a moment to catch up before a
// compaction reads them: notes are written asynchronously, so the turns
// that triggered the compaction may still be on their way to the
// session-memory service, or an update of the notes may be running. It
// waits (up to the tenant's compaction.session_memory.wait_seconds) until
// the service has looked at every turn applied when the wait began and no
// update runs, then lets the compaction go on with whatever notes there
// are. A session the service never looked at is not waited for.
func (s *Service) awaitNotes(ctx context.Context, tenant, session string, set tenantcfg.Settings) error {
	wait := time.Duration(set.Compaction.SessionMemory.WaitSeconds) * time.Second
	if wait <= 0 || !set.SessionMemory.Enabled {
		return nil
	}
	start := s.now()
	target := int64(-1)
	for {
		p, err := s.store.NotesProgress(ctx, tenant, session)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("compactor: notes progress of %s/%s: %w", tenant, session, err)
		}
		if target < 0 {
			target = p.AppliedSeq
		}
		if p.SeenSeq >= target && !p.Running {
			if waited := s.now().Sub(start); waited > s.cfg.NotesPoll {
				s.log.Debug("waited for the session's notes", "tenant", tenant, "session", session, "waited", waited)
			}
			return nil
		}
		if s.now().Sub(start) >= wait {
			s.log.Info("compacting without waiting longer for the session's notes", "tenant", tenant, "session", session,
				"waited", wait, "notes_seen_seq", p.SeenSeq, "applied_seq", target, "update_running", p.Running)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeAfter(s.cfg.NotesPoll):
		}
	}
}

// partial compacts around a pivot message: events.DirectionUpTo summarizes up to
// it and keeps what follows; events.DirectionFrom keeps everything up to it as it
// was and summarizes what follows.
func (s *Service) partial(ctx context.Context, j job) (*result, error) {
	p := -1
	for i, m := range j.shown {
		if m.Stored() && m.UUID == j.c.PivotUUID {
			p = i
			break
		}
	}
	if p < 0 {
		return nil, failure{fmt.Sprintf("pivot message %q is not in the session's context", j.c.PivotUUID)}
	}
	// Never part a tool_use from its result: the pivot moves past results
	// that answer calls on its side.
	for p+1 < len(j.shown) && answersCallsIn(j.shown[p+1], j.shown[:p+1]) {
		p++
	}
	before, after := j.shown[:p+1], j.shown[p+1:]
	switch j.c.Direction {
	case events.DirectionUpTo:
		res, err := s.summarize(ctx, j, before)
		if err != nil {
			return nil, err
		}
		sh := shape{span: before, kept: after, restored: s.restore(j, after), keepFrom: throughOf(j) + 1}
		if len(after) > 0 {
			sh.keepFrom = after[0].Position
		}
		return s.vet(ctx, j, res, sh, nil), nil
	case events.DirectionFrom:
		if len(after) == 0 {
			return nil, failure{fmt.Sprintf("nothing follows pivot message %q to summarize", j.c.PivotUUID)}
		}
		res, err := s.summarize(ctx, j, after)
		if err != nil {
			return nil, err
		}
		return s.vet(ctx, j, res, shape{span: after, prefix: before, keepFrom: throughOf(j) + 1}, nil), nil
	default:
		return nil, failure{fmt.Sprintf("unknown direction %q (want %q or %q)", j.c.Direction, events.DirectionFrom, events.DirectionUpTo)}
	}
}

// summarize writes the summary of msgs: by the LLM unless the session's
// circuit is open for automatic compactions, else (or when the LLM fails)
// extractively. Only the end of ctx is an error.
func (s *Service) summarize(ctx context.Context, j job, msgs []view.Message) (*result, error) {
	res := &result{}
	instructions := j.c.Instructions
	if instructions == "" {
		instructions = j.set.Compaction.Instructions
	}
	if !s.circuitOpen(j) {
		in := compaction.SummaryInput{Tenant: j.state.Session.TenantID, Messages: msgs, Instructions: instructions}
		if len(msgs) == len(j.shown) {
			// The whole context: the agent's last request holds it, and
			// the call may fork that request.
			in.Session = j.state.Session.SessionID
		}
		sum, err := compaction.Summarize(ctx, s.provider, in)
		res.sum = sum
		if err == nil {
			res.method, res.summary = events.MethodFull, sum.Text
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		res.llmErr = err
		s.log.Warn("LLM compaction failed; using the extractive summary", "tenant", j.state.Session.TenantID,
			"session", j.state.Session.SessionID, "compaction", j.c.ID, "kind", llm.KindOf(err), "err", err)
	}
	ex := s.extractive(j, msgs)
	ex.sum, ex.llmErr = res.sum, res.llmErr
	return ex, nil
}

// extractive is the funnel's last step, which never fails: the summary
// the messages' own text makes, with the lines that name what the
// compaction's instructions ask to keep.
func (s *Service) extractive(j job, msgs []view.Message) *result {
	focus := j.c.Instructions
	if focus == "" {
		focus = j.set.Compaction.Instructions
	}
	return &result{method: events.MethodExtractive, summary: compaction.Extractive(msgs, compaction.ExtractLimits{Tools: j.set.Compaction.ToolNames(), Focus: focus})}
}

// restore lists what is restored after the compaction: recently read files
// not among the kept messages, the latest todo list, restorable attachments.
func (s *Service) restore(j job, kept []view.Message) []turn.Block {
	r := j.set.Compaction.Restore
	return compaction.Restore(j.all, kept, compaction.RestoreLimits{
		Files: r.Files, FileTokens: r.FileTokens, TotalTokens: r.TotalTokens,
	}, j.set.Compaction.ToolNames())
}

// head makes the messages the compaction puts before the kept ones: the
// prefix it keeps as it was (partial "from"), then one user message with the
// boundary marker, the summary and what is restored.
func (s *Service) head(j job, res *result, prefix []view.Message, restored []turn.Block) []view.Message {
	out := make([]view.Message, 0, len(prefix)+1)
	for _, m := range prefix {
		out = append(out, sessionctx.HeadMessage(m.Role, m.Content))
	}
	content := turn.Content{
		{Type: turn.BlockText, Text: Boundary(j.c, res.method)},
		{Type: turn.BlockText, Text: SummaryText(res.method, len(res.kept) > 0, res.summary)},
	}
	if pinned := PinnedText(j.set.Compaction.Pinned, j.state.Session.Pins); pinned != "" {
		content = append(content, turn.Block{Type: turn.BlockText, Text: pinned})
	}
	content = append(content, restored...)
	return append(out, sessionctx.HeadMessage("user", content))
}

// PinnedText carries the texts pinned by the tenant, then by the session,
// verbatim after a compaction's summary ("" when none is pinned).
func PinnedText(tenant, session []string) string {
	pins := append(slices.Clone(tenant), session...)
	if len(pins) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("These texts were pinned to this session, to be kept word for word whatever was summarized:")
	for _, p := range pins {
		b.WriteString("\n<pinned>\n")
		b.WriteString(p)
		b.WriteString("\n</pinned>")
	}
	return b.String()
}

// Boundary is the marker that starts a compacted context.
func Boundary(c store.Compaction, method string) string {
	dir := ""
	if c.Direction != "" {
		dir = fmt.Sprintf(" direction=%q", c.Direction)
	}
	return fmt.Sprintf("<mnemos:compact-boundary id=%q trigger=%q method=%q%s pre_tokens=\"%d\"/>", c.ID, c.Trigger, method, dir, c.PreTokens)
}

// SummaryText introduces a summary to the model that reads it next.
func SummaryText(method string, keptFollow bool, summary string) string {
	var b strings.Builder
	if method == events.MethodSessionMemory {
		b.WriteString("This session ran long, so its earlier messages were replaced by the running notes kept during the session, below.")
	} else {
		b.WriteString("This session ran long, so its earlier messages were replaced by the summary below, written from them.")
	}
	if keptFollow {
		b.WriteString(" The most recent messages follow as they were.")
	}
	b.WriteString(" Carry on with the work from where it stopped; do not ask the user to repeat what the summary already says.\n\n")
	b.WriteString(strings.TrimSpace(summary))
	return b.String()
}

// answersCallsIn reports whether m holds a tool_result for a tool_use in msgs.
func answersCallsIn(m view.Message, msgs []view.Message) bool {
	calls := map[string]bool{}
	for _, o := range msgs {
		for _, b := range o.Content {
			if b.Type == turn.BlockToolUse {
				calls[b.ID] = true
			}
		}
	}
	for _, b := range m.Content {
		if b.Type == turn.BlockToolResult && calls[b.ToolUseID] {
			return true
		}
	}
	return false
}

// throughOf is the last message position the compaction sees.
func throughOf(j job) int64 {
	if n := len(j.all); n > 0 {
		return j.all[n-1].Position
	}
	return -1
}

// commit records the compaction, makes it the session's context and token
// baseline, and announces it.
func (s *Service) commit(ctx context.Context, j job, res *result) error {
	sess := j.state.Session
	head, err := sessionctx.EncodeHead(res.head)
	if err != nil {
		return err
	}
	c := j.c
	c.Method, c.Summary, c.Head, c.KeepFrom, c.ThroughPosition = res.method, res.summary, head, res.keepFrom, throughOf(j)
	c.PreTokens = sess.TokenCount
	c.PostTokens = view.Tokens(res.head) + view.Tokens(res.kept)
	c.LLMCalls, c.LLMModel = res.sum.Attempts, res.sum.Model
	c.LLMRetries = max(res.sum.Attempts-1, 0)
	c.InputTokens, c.OutputTokens = res.sum.Usage.InputTokens, res.sum.Usage.OutputTokens
	c.CacheReadTokens, c.CacheWriteTokens = res.sum.Usage.CacheReadTokens, res.sum.Usage.CacheWriteTokens
	if c.RetentionDetail, err = res.score.Detail(); err != nil {
		return err
	}
	c.Retention = &res.score.Overall
	br := s.breaker(j, res)
	var why []string
	if res.notesUnused != "" {
		why = append(why, "the session notes were not used: "+res.notesUnused)
	}
	switch {
	case res.llmErr != nil:
		why = append(why, res.llmErr.Error())
	case res.noProgress != "":
		why = append(why, "the model summary was not used: "+res.noProgress)
	}
	c.Error = strings.Join(why, "; ")

	var status events.Tokens
	err = s.store.InTx(ctx, sess.TenantID, func(tx *store.Tx) error {
		now, err := tx.LockSession(ctx, sess.SessionID, sess.AgentID)
		if err != nil {
			return err
		}
		if err := tx.CompleteCompaction(ctx, c); err != nil {
			return err
		}
		pending, err := tx.MessageTokensAfter(ctx, sess.SessionID, c.ThroughPosition)
		if err != nil {
			return err
		}
		limits := accounting.Limits(j.set.Tokens, now)
		// The compacted context is the new baseline, with the request's
		// system prompt and tools (when the client named them) that every
		// request carries beside it; what came after is pending, calibrated.
		tally := accounting.TallyOf(now)
		tally.Baseline, tally.HasUsage, tally.Pending, tally.PendingDense = c.PostTokens+now.PrefixTokens, true, pending, 0
		count := tally.Count()
		status = accounting.Status(limits, count)
		if err := tx.ApplyCompaction(ctx, store.CompactedSession{
			SessionID: sess.SessionID, CompactionID: c.ID, KeepFrom: c.KeepFrom,
			BaselineTokens: tally.Baseline, PendingTokens: pending, TokenCount: count, State: status.State,
			CompactFailures: br.failures, CompactCircuitOpen: br.open, CompactCircuitUntil: br.until,
			StaleUsageAbove: staleAbove(c.PreTokens, tally.Baseline),
		}); err != nil {
			return err
		}
		at := s.now().UTC()
		if status.State != now.State {
			if err := outbox.Enqueue(ctx, tx, events.ContextThreshold{
				Schema: events.SchemaContextThreshold, TenantID: sess.TenantID, SessionID: sess.SessionID, CompactionID: c.ID,
				Seq: now.AppliedSeq, PreviousState: now.State, Tokens: status, At: at,
			}); err != nil {
				return err
			}
		}
		if br.opened {
			if err := s.enqueueCircuit(ctx, tx, sess, c, br.failures, res.llmErr); err != nil {
				return err
			}
		}
		return outbox.Enqueue(ctx, tx, events.CompactCompleted{
			Schema: events.SchemaCompactCompleted, TenantID: sess.TenantID, SessionID: sess.SessionID,
			CompactionID: c.ID, Trigger: c.Trigger, Method: c.Method, Direction: c.Direction,
			PreTokens: c.PreTokens, PostTokens: c.PostTokens, LLMCalls: c.LLMCalls, Tokens: status, At: at,
		})
	})
	if err != nil {
		return fmt.Errorf("compactor: commit %s: %w", c.ID, err)
	}
	s.metrics.completed(ctx, c, br.opened)
	// The compaction is the span of the delivery that asked for it.
	trace.SpanFromContext(ctx).SetAttributes(
		attribute.String("mnemos.compaction.id", c.ID), attribute.String("mnemos.compaction.trigger", c.Trigger),
		attribute.String("mnemos.compaction.method", c.Method), attribute.Int64("mnemos.compaction.pre_tokens", c.PreTokens),
		attribute.Int64("mnemos.compaction.post_tokens", c.PostTokens), attribute.Float64("mnemos.compaction.retention", res.score.Overall))
	s.log.InfoContext(ctx, "session compacted", "tenant", sess.TenantID, "session", sess.SessionID, "compaction", c.ID,
		"trigger", c.Trigger, "method", c.Method, "pre_tokens", c.PreTokens, "post_tokens", c.PostTokens,
		"count", status.Count, "llm_calls", c.LLMCalls, "retention", res.score.Overall)
	return nil
}

// autoCompacts reports whether the session compacts by itself: its own
// switch and its tenant's are both on. A request made before either was
// turned off is skipped.
func autoCompacts(j job) bool {
	return j.set.Compaction.Compacts(j.state.Session)
}

// circuitOpen reports whether the compaction skips the model: an
// automatic one (or one asked before a call) of a session whose circuit is
// open and still cooling down.
// Past the cool-down the circuit is half-open: the model is tried once
// more. A manual compaction always tries the model.
func (s *Service) circuitOpen(j job) bool {
	sess := j.state.Session
	automatic := j.c.Trigger == events.TriggerAuto || j.c.Trigger == events.TriggerPreflight
	return automatic && sess.CompactCircuitOpen && s.now().Before(sess.CompactCircuitUntil)
}

// circuit is a session's breaker after a compaction: its consecutive LLM
// failures, whether the circuit is open and until when it cools down, and
// whether this compaction opened it.
type circuit struct {
	failures     int
	open, opened bool
	until        time.Time
}

// breaker returns the session's breaker after res. A failed model call
// opens the circuit at the limit, or again after a half-open try, for a
// cool-down from now; an answer closes it.
func (s *Service) breaker(j job, res *result) circuit {
	sess := j.state.Session
	switch {
	case res.llmErr != nil:
		c := circuit{failures: sess.CompactFailures + 1, until: sess.CompactCircuitUntil}
		c.open = sess.CompactCircuitOpen || c.failures >= j.set.Compaction.BreakerFailures
		c.opened = c.open && !sess.CompactCircuitOpen
		if c.open {
			c.until = s.now().Add(j.set.Compaction.BreakerCooldown())
		}
		return c
	case res.method == events.MethodFull:
		return circuit{} // the model answered: the circuit closes
	default:
		return circuit{failures: sess.CompactFailures, open: sess.CompactCircuitOpen, until: sess.CompactCircuitUntil}
	}
}

// staleAbove is where usage starts to look like the context before the
// compaction rather than after it: halfway between the two.
func staleAbove(pre, post int64) int64 {
	if pre <= post {
		return 0
	}
	return post + (pre-post)/2
}

// end finishes a compaction that leaves the context as it was.
func (s *Service) end(ctx context.Context, j job, status, reason string) error {
	sess := j.state.Session
	c := j.c
	c.Status, c.Error = status, reason
	err := s.store.InTx(ctx, sess.TenantID, func(tx *store.Tx) error {
		if err := tx.EndCompaction(ctx, c); err != nil {
			return err
		}
		if err := tx.CompactionEnded(ctx, sess.SessionID, sess.CompactFailures, sess.CompactCircuitOpen); err != nil {
			return err
		}
		if status != store.CompactionFailed {
			return nil
		}
		return outbox.Enqueue(ctx, tx, events.CompactFailed{
			Schema: events.SchemaCompactFailed, TenantID: sess.TenantID, SessionID: sess.SessionID,
			CompactionID: c.ID, Trigger: c.Trigger, Reason: reason, At: s.now().UTC(),
		})
	})
	if err != nil {
		return fmt.Errorf("compactor: end %s: %w", c.ID, err)
	}
	s.metrics.ended(ctx, c.Trigger, status)
	s.log.Info("compaction ended without compacting", "tenant", sess.TenantID, "session", sess.SessionID, "compaction", c.ID, "status", status, "reason", reason)
	return nil
}

func (s *Service) enqueueCircuit(ctx context.Context, tx *store.Tx, sess sessionstate.Session, c store.Compaction, failures int, cause error) error {
	last := ""
	if cause != nil {
		last = cause.Error()
	}
	s.log.Warn("compaction circuit opened: automatic compactions of this session use the extractive summary",
		"tenant", sess.TenantID, "session", sess.SessionID, "failures", failures, "last_error", last)
	return outbox.Enqueue(ctx, tx, events.CircuitOpened{
		Schema: events.SchemaCircuitOpened, TenantID: sess.TenantID, SessionID: sess.SessionID, CompactionID: c.ID,
		Failures: failures, LastError: last, At: s.now().UTC(),
	})
}
