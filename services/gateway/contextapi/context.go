package contextapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/minio/highwayhash"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Rendered is the answer to a context request (api.Context), with
// what the Messages API proxy needs beside it. System and Messages stay
// empty: they are encoded apart, once (Encoded).
type Rendered struct {
	api.Context

	// Session is the session as read with the context (the Messages API
	// proxy needs its stored message count and switches).
	Session sessionstate.Session
	// Snapshot is the context snapshot the cache-break check left for the
	// caller to write (assemble's leaveSnapshot); nil when there is none.
	Snapshot *store.ContextSnapshot
}

// maxContextWait bounds how long a context request waits for a compaction.
const maxContextWait = 2 * time.Minute

func (h *Handler) getContext(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	h.serveContext(w, r, tenant, id, nil)
}

// serveContext answers a context request: GET's, or with m a POST's with
// its context-management edits.
func (h *Handler) serveContext(w http.ResponseWriter, r *http.Request, tenant, id string, m *management) {
	ctx := r.Context()
	wait, err := contextWait(r, h.cfg.ContextWait)
	if err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_wait", err.Error())
		return
	}
	set, err := h.settings.For(ctx, tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	deadline := time.Now().Add(wait)
	if m != nil && !h.compactForEdit(w, r, tenant, id, m, wait) {
		return
	}
	gate := &Gate{}
	defer gate.Done()
	asked := false
	for {
		var body Rendered
		var parts Encoded
		var blocked bool
		var f *httpapi.Error
		body, parts, blocked, err = h.assembleAdmitted(ctx, tenant, id, set, m, nil, gate, false)
		if errors.As(err, &f) {
			httpapi.TurnAway(w, r, httpapi.Mnemos, f)
			return
		}
		if h.SessionFailed(w, r, id, "assembling context", err) {
			return
		}
		// A session at or above auto-compact is compacted before the call:
		// the compaction in flight is joined, or one is asked for, and the
		// request waits for it (at most wait) rather than serve the
		// context the next call should not send.
		due := body.Tokens.AutoCompact > 0 && body.Tokens.Count >= body.Tokens.AutoCompact
		if due && !body.CompactionInFlight && !asked && wait > 0 {
			asked = true
			if ok, err := h.askAutoCompaction(ctx, tenant, id, set); err != nil {
				h.Internal(w, "asking for a compaction", err)
				return
			} else if ok {
				continue
			}
		}
		inTime := time.Now().Before(deadline)
		switch {
		case body.CompactionInFlight && (blocked || due) && inTime:
			// wait below, then read again
		case !blocked:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = parts.write(ctx, w) // a failed write means the client went away
			return
		default:
			// Over the blocking limit with nothing coming to fix it, or not
			// fixed in time: an over-limit context would only fail at the model.
			h.metrics.contextBlocked.Add(ctx, 1)
			w.Header().Set("Retry-After", "5")
			httpapi.Fail(w, http.StatusServiceUnavailable, "compaction_pending", fmt.Sprintf(
				"session %s holds %d tokens, at or above its blocking limit %d; a compaction is needed before the next model call (compaction in flight: %t)",
				id, body.Tokens.Count, body.Tokens.Blocking, body.CompactionInFlight))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.cfg.PollInterval):
		}
	}
}

// contextWait is how long a context request waits for a compaction:
// ?compaction_wait_ms= (milliseconds), else ?wait= (a Go duration or
// seconds), else def; at most maxContextWait, 0 for not at all.
func contextWait(r *http.Request, def time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get("compaction_wait_ms")
	if v == "" {
		return waitParam(r, def)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("compaction_wait_ms=%q: want whole milliseconds between 0 and %d", v, maxContextWait.Milliseconds())
	}
	d, err := waitMillis(ms)
	if err != nil {
		return 0, fmt.Errorf("compaction_wait_ms=%q: %w", v, err)
	}
	return d, nil
}

// waitMillis is a wait for a compaction given in milliseconds, 0 to
// maxContextWait.
func waitMillis(ms int64) (time.Duration, error) {
	if ms < 0 || ms > maxContextWait.Milliseconds() {
		return 0, fmt.Errorf("%d: want whole milliseconds between 0 and %d", ms, maxContextWait.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// askAutoCompaction asks for the automatic compaction a session at or
// above auto-compact is due, as the accountant would have: unless one is in
// flight, the session or its tenant turned automatic compaction off, or
// the thrash guard holds it back. ok reports that one was asked for.
func (h *Handler) askAutoCompaction(ctx context.Context, tenant, id string, set tenantcfg.Settings) (ok bool, err error) {
	err = h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		ok = false
		sess, err := tx.LockSession(ctx, id, turn.MainAgent)
		if err != nil {
			return err
		}
		limits := accounting.Limits(set.Tokens, sess)
		auto := set.Compaction.AutoCompaction(sess, sess.AppliedSeq, limits.AboveAutoCompact(sess.TokenCount))
		if !auto.Ask {
			return nil
		}
		request, asked, err := tx.RequestAutoCompaction(ctx, id, auto.Seqs)
		if err != nil || !asked {
			return err
		}
		ok = true
		return outbox.Enqueue(ctx, tx, events.CompactRequested{
			Schema: events.SchemaCompactRequested, TenantID: tenant, SessionID: id, Seq: sess.AppliedSeq,
			Request: request, Trigger: events.TriggerAuto, Tokens: accounting.Status(limits, sess.TokenCount), At: time.Now().UTC(),
		})
	})
	if err != nil {
		return false, fmt.Errorf("ask for the compaction of %s/%s: %w", tenant, id, err)
	}
	return ok, nil
}

// waitParam reads ?wait= (a Go duration or seconds), bounded by maxContextWait.
func waitParam(r *http.Request, def time.Duration) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, serr := strconv.ParseFloat(v, 64)
		if serr != nil {
			return 0, fmt.Errorf("wait=%q: want a duration like 30s or a number of seconds", v)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d < 0 || d > maxContextWait {
		return 0, fmt.Errorf("wait=%q: must be between 0 and %s", v, maxContextWait)
	}
	return d, nil
}

// assemble renders a session's context — the memory section as frozen for
// the session's compaction, then its messages, with the memories recall
// surfaced beside its user messages — first recording any micro-compaction
// now due, and the cut m's edits make, and deciding what is shown beside
// each user message (waiting, boundedly, for the prefetch of the latest
// one), and accounts for cache breaks. blocked reports a count at or above
// the blocking limit. The context snapshot the cache-break check records is
// written here, or with leaveSnapshot left in the body for the caller to
// write in a transaction of its own (the proxy's, with its round).
func (h *Handler) assemble(ctx context.Context, tenant, id string, set tenantcfg.Settings, m *management, ahead Ahead, gate *Gate, leaveSnapshot bool) (Rendered, Encoded, bool, error) {
	pacer := gate.pacer() // a heavy render's (renderAdmission)
	var st sessionctx.State
	var section []string
	var beside recall.Beside
	var snapshot *store.ContextSnapshot
	for micro, edited := false, false; ; {
		var err error
		if st, section, beside, snapshot, err = h.readContext(ctx, tenant, id, set, gate); err != nil {
			return Rendered{}, Encoded{}, false, err
		}
		switch {
		case beside.Waiting != "":
			if err := h.awaitPrefetch(ctx, tenant, id, beside); err != nil {
				return Rendered{}, Encoded{}, false, err
			}
			continue
		case !micro && len(h.microDue(st, set, ahead)) > 0:
			micro = true
			if err := h.microCompact(ctx, tenant, id, set, ahead, pacer); err != nil {
				return Rendered{}, Encoded{}, false, err
			}
			continue // read again: the messages a newer turn added are decided for too
		case !edited && m != nil && !m.edits.Decide(editContext(st)).Empty():
			edited = true
			if err := h.cutContext(ctx, tenant, id, set, m.edits, pacer); err != nil {
				return Rendered{}, Encoded{}, false, err
			}
			continue
		}
		break
	}
	limits := accounting.Limits(set.Tokens, st.Session)
	blocks := make([]turn.Block, len(section))
	for i, text := range section {
		blocks[i] = turn.Block{Type: turn.BlockText, Text: text}
	}
	in := assembly.Input{System: blocks, Head: st.Head, Messages: st.Messages, Cleared: st.Cleared, Cuts: st.Cuts, Beside: beside.Blocks}
	if pacer != nil {
		in.Pause = func() { _ = pacer.Pause(ctx) } // a request that ends stops at its next read
	}
	rendered := assembly.Render(in)
	system, messages, err := rendered.EncodeParts()
	if err != nil {
		return Rendered{}, Encoded{}, false, err
	}
	next, err := h.recordCacheBreak(ctx, tenant, st.Session, snapshot, system, messages, leaveSnapshot, pacer)
	if err != nil {
		return Rendered{}, Encoded{}, false, err
	}
	body := Rendered{Context: api.Context{
		SessionID: id, MessageUUIDs: rendered.UUIDs,
		CacheBreakpoints: rendered.Breakpoints, Tokens: accounting.Status(limits, st.Session.TokenCount),
		ContextTokens: rendered.Tokens, ClearedToolResults: len(st.Cleared),
		CompactionInFlight: st.Session.CompactionInFlight, Epoch: st.Session.ContextEpoch, LLMProvider: h.cfg.LLMProvider,
	}, Session: st.Session, Snapshot: next}
	if m != nil {
		body.ContextManagement = m.answer(editContext(st))
	}
	if c := st.Compaction; c.ID != "" {
		body.Compaction = &api.CompactionRef{ID: c.ID, Trigger: c.Trigger, Method: c.Method, Direction: c.Direction,
			PreTokens: c.PreTokens, PostTokens: c.PostTokens, FinishedAt: c.FinishedAt.UTC()}
	}
	encoded, err := body.encode(system, messages, pacer)
	if err != nil {
		return Rendered{}, Encoded{}, false, err
	}
	return body, encoded, st.Session.TokenCount >= limits.Blocking, nil
}

// readContext reads what a render of the session needs, in one
// transaction: its state (sessionctx), the last context snapshot, the
// frozen memory section and what is shown beside its user messages. What
// it decided for good is kept in the gateway's caches once the
// transaction has committed.
func (h *Handler) readContext(ctx context.Context, tenant, id string, set tenantcfg.Settings, gate *Gate) (
	st sessionctx.State, section []string, beside recall.Beside, snapshot *store.ContextSnapshot, err error,
) {
	var ok bool
	if st, section, beside, snapshot, ok, err = h.readContextAhead(ctx, tenant, id, gate); ok || err != nil {
		return st, section, beside, snapshot, err
	}
	var known *knownDecisions
	var newSection string // the key of a section this read stored or read
	err = h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		sess, err := tx.Session(ctx, id)
		if err != nil {
			return err
		}
		known = &knownDecisions{cache: h.decisions, session: incarnation(sess)}
		if err := gate.admit(ctx, h, sess); err != nil {
			return err
		}
		if st, err = h.contexts.LoadFor(ctx, tx, sess, gate.pacer()); err != nil {
			return err
		}
		switch snap, err := tx.ContextSnapshot(ctx, id); {
		case errors.Is(err, store.ErrNotFound):
			snapshot = nil
		case err != nil:
			return err
		default:
			snapshot = &snap
		}
		if section, newSection, err = h.frozenSection(ctx, tx, st, set); err != nil {
			return err
		}
		beside, err = recall.AttachKnown(ctx, tx, st.Session, st.Messages, set.Recall, time.Now(), known)
		return err
	})
	if err != nil {
		return st, nil, recall.Beside{}, nil, err
	}
	known.keep()
	if newSection != "" {
		h.sections.Put(newSection, section)
	}
	return st, section, beside, snapshot, nil
}

// readContextAhead is readContext in one round trip to Postgres instead of
// a transaction's six, when the gateway knows all that the session's row
// does not say: its messages up to its last read (sessionctx.Ahead), its
// frozen memory section, and recall's decision on each user message. It
// reports false when it does not (a session's first read here, its first
// after a compaction, a user message not yet decided on, a paced read):
// readContext then reads in a transaction.
func (h *Handler) readContextAhead(ctx context.Context, tenant, id string, gate *Gate) (
	st sessionctx.State, section []string, beside recall.Beside, snapshot *store.ContextSnapshot, ok bool, err error,
) {
	if gate.pacer() != nil {
		return st, nil, beside, nil, false, nil // a heavy render reads a paced page at a time
	}
	reads := store.NewReads(tenant)
	row := store.Queue(reads, func(tx *store.Tx) (sessionstate.Session, error) { return tx.Session(ctx, id) })
	ahead := h.contexts.Ahead(ctx, reads, tenant, id) // after the row (see Ahead)
	if ahead == nil {
		return st, nil, beside, nil, false, nil
	}
	snap := store.Queue(reads, func(tx *store.Tx) (store.ContextSnapshot, error) { return tx.ContextSnapshot(ctx, id) })
	if err := h.store.Read(ctx, reads); err != nil {
		return st, nil, beside, nil, false, err
	}
	sess, err := row.Get()
	if err != nil {
		return st, nil, beside, nil, false, err
	}
	section, known := h.sections.Get(incarnation(sess) + "\x00" + sess.CompactionID)
	if !known {
		return st, nil, beside, nil, false, nil
	}
	if err := gate.admit(ctx, h, sess); err != nil {
		return st, nil, beside, nil, false, err
	}
	if st, ok, err = ahead.State(sess); !ok || err != nil {
		return st, nil, beside, nil, false, err
	}
	if beside, ok = recall.AttachDecided(st.Messages, &knownDecisions{cache: h.decisions, session: incarnation(sess)}); !ok {
		return st, nil, beside, nil, false, nil
	}
	switch s, err := snap.Get(); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return st, nil, beside, nil, false, err
	default:
		snapshot = &s
	}
	return st, section, beside, snapshot, true, nil
}

// frozenSection is the memory section of st's session as frozen for its
// compaction: from the gateway's cache (decisions.go), else read (or made
// and stored) in tx, with the key to keep it under once tx commits ("" when
// it came from the cache).
func (h *Handler) frozenSection(ctx context.Context, tx *store.Tx, st sessionctx.State, set tenantcfg.Settings) ([]string, string, error) {
	key := incarnation(st.Session) + "\x00" + st.Session.CompactionID
	if section, ok := h.sections.Get(key); ok {
		return section, "", nil
	}
	section, err := memory.FrozenSection(ctx, tx, memory.SessionSection{
		SessionID: st.Session.SessionID, MemoryScope: st.Session.MemoryScope, CompactionID: st.Session.CompactionID,
		KeepsPrefix: st.Compaction.Direction == "from",
	}, set.Memory)
	return section, key, err
}

// Gate admits a render inside the context's own read, with no
// transaction of its own: a session whose stored totals (all its messages,
// an upper bound of its context) make a light render reserves that much of
// the budget there; any other goes through renderAdmission, which sizes the
// context exactly and may pace it (errHeavyRender).
type Gate struct {
	admitted bool
	release  func()
	// paced is the pacer of a heavy render (renderAdmission), nil for a
	// light one.
	paced *cpu.Pacer
}

// pacer is the render's pacer; nil for a light render or a nil gate.
func (gt *Gate) pacer() *cpu.Pacer {
	if gt == nil {
		return nil
	}
	return gt.paced
}

// errHeavyRender reports a render the gate cannot admit by the session's
// totals alone.
var errHeavyRender = errors.New("the render needs renderAdmission")

// admit admits the render of sess, once; a nil gate admits everything.
func (gt *Gate) admit(ctx context.Context, h *Handler, sess sessionstate.Session) error {
	if gt == nil || gt.admitted {
		return nil
	}
	cost := renderCost(store.ContextSize{Messages: sess.MessageCount, Bytes: sess.MessageBytes})
	if h.admission.IsHeavy(cost) {
		return errHeavyRender
	}
	if f := h.admission.Budget(ctx, cost, fmt.Sprintf("the context of session %s (%d messages, %d KiB stored)", sess.SessionID, sess.MessageCount, sess.MessageBytes>>10)); f != nil {
		return f
	}
	gt.admitted, gt.release = true, func() { h.admission.Release(cost) }
	return nil
}

// Done gives back what the gate took.
func (gt *Gate) Done() {
	if gt.release != nil {
		gt.release()
	}
}

// assembleAdmitted is assemble under render admission (Gate): a
// render the gate cannot admit is sized exactly, waits for a heavy slot and
// runs paced (the gate holds the pacer). A *httpapi.Error error turns the
// request away.
func (h *Handler) assembleAdmitted(ctx context.Context, tenant, id string, set tenantcfg.Settings, m *management, ahead Ahead, gate *Gate, leaveSnapshot bool) (Rendered, Encoded, bool, error) {
	for {
		var body Rendered
		var parts Encoded
		var blocked bool
		var err error
		assemble := func() { body, parts, blocked, err = h.assemble(ctx, tenant, id, set, m, ahead, gate, leaveSnapshot) }
		if gate.pacer() != nil {
			cpu.Apart(assemble) // a heavy render, paced by the CPU it gets
		} else {
			assemble()
		}
		if !errors.Is(err, errHeavyRender) {
			return body, parts, blocked, err
		}
		pacer, release, f, err := h.renderAdmission(ctx, tenant, id)
		if err != nil {
			return Rendered{}, Encoded{}, false, err
		}
		if f != nil {
			return Rendered{}, Encoded{}, false, f
		}
		gate.admitted, gate.release, gate.paced = true, release, pacer
	}
}

// Render renders session id's context for a model request the proxy
// manages: under render admission (gate, held until gate.Done), with the
// context snapshot of its cache-break check left in the answer for the
// caller to write. A heavy render is paced by the gate's pacer.
func (h *Handler) Render(ctx context.Context, tenant, id string, set tenantcfg.Settings, ahead Ahead, gate *Gate) (Rendered, Encoded, error) {
	body, parts, _, err := h.assembleAdmitted(ctx, tenant, id, set, nil, ahead, gate, true)
	return body, parts, err
}

// pageWrite is how many messages a paced answer writes between calls of
// the pacer: well under a millisecond of writing.
const pageWrite = 100

// Encoded is the answer to a context request in parts, written one
// after the other: the answer is never joined into one buffer, so a render
// holds its encoded messages once.
type Encoded struct {
	System, Messages [][]byte
	// rest is the encoded api.Context without system and messages.
	rest []byte
	// pacer paces the writing of a heavy render's answer; nil for others.
	pacer *cpu.Pacer
}

// write writes the answer: "system" and "messages" from their parts,
// then the other fields.
func (e Encoded) write(ctx context.Context, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	pacer := e.pacer // a heavy answer is written paced too
	list := func(parts [][]byte) {
		_ = bw.WriteByte('[') // bufio keeps the first error; Flush reports it
		for i, p := range parts {
			if i > 0 {
				_ = bw.WriteByte(',')
			}
			_, _ = bw.Write(p)
			if i%pageWrite == pageWrite-1 {
				_ = pacer.Pause(ctx)
			}
		}
		_ = bw.WriteByte(']')
	}
	_, _ = bw.WriteString(`{"system":`)
	list(e.System)
	_, _ = bw.WriteString(`,"messages":`)
	list(e.Messages)
	_ = bw.WriteByte(',')
	_, _ = bw.Write(e.rest[1:]) // rest is {"session_id":…}
	_ = bw.WriteByte('\n')
	return bw.Flush()
}

// encode encodes the answer, "system" and "messages" from their parts,
// encoded once (they are most of the bytes).
func (b Rendered) encode(system, messages [][]byte, pacer *cpu.Pacer) (Encoded, error) {
	// rest is every field but those two, which the shallower fields of the
	// same names, always empty, hide from the encoder.
	rest, err := turn.Marshal(struct {
		api.Context
		System   []turn.Block  `json:"system,omitempty"`
		Messages []api.Message `json:"messages,omitempty"`
	}{Context: b.Context})
	if err != nil {
		return Encoded{}, fmt.Errorf("encode context: %w", err)
	}
	return Encoded{System: system, Messages: messages, rest: rest, pacer: pacer}, nil
}

// Ahead is what a client is about to send in a session as it is stored,
// when the client holds messages the session has not stored yet (its
// rounds before not applied yet, and what it adds now); nil for a request
// of the session's context alone.
type Ahead interface {
	// Count is the count of the request.
	Count(sessionstate.Session) int64
	// Pending are the client's messages the session has not stored.
	Pending(sessionstate.Session) []turn.Message
}

// microDue lists the tool results micro-compaction would clear now: by the
// session's count, or the count ahead when that is more. A client that sends
// its next round before the one before it is applied would otherwise have
// its results cleared a call later than when it calls with them applied.
func (h *Handler) microDue(st sessionctx.State, set tenantcfg.Settings, ahead Ahead) []string {
	limits := accounting.Limits(set.Tokens, st.Session)
	now := time.Now
	if h.cfg.Now != nil {
		now = h.cfg.Now
	}
	in := assembly.MicroInput{Messages: st.Messages, Cleared: st.Cleared, Count: st.Session.TokenCount, Warning: limits.Warning,
		LastResponse: st.Session.LastResponseAt, Now: now()}
	if ahead != nil {
		in.Count, in.Pending = max(in.Count, ahead.Count(st.Session)), ahead.Pending(st.Session)
	}
	return set.Micro.Decide(in)
}

// microCompact records the micro-compaction due, under the session's lock so
// concurrent requests decide once.
func (h *Handler) microCompact(ctx context.Context, tenant, id string, set tenantcfg.Settings, ahead Ahead, pacer *cpu.Pacer) error {
	var cleared int
	var saved int64
	err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		sess, err := tx.LockSession(ctx, id, turn.MainAgent)
		if err != nil {
			return err
		}
		st, err := h.contexts.LoadFor(ctx, tx, sess, pacer)
		if err != nil {
			return err
		}
		due := h.microDue(st, set, ahead)
		if len(due) == 0 {
			return nil // another request decided first
		}
		clear := map[string]bool{}
		for _, id := range due {
			clear[id] = true
		}
		for _, res := range assembly.Compactable(st.Messages, set.Micro.Tools, st.Cleared) {
			if clear[res.ToolUseID] {
				saved += res.Saving()
			}
		}
		for _, toolUseID := range due {
			if err := tx.RecordReplacement(ctx, store.Replacement{
				SessionID: id, ToolUseID: toolUseID, Kind: store.ReplaceMicrocompact, Text: assembly.ClearedText,
			}); err != nil {
				return err
			}
			st.Cleared[toolUseID] = true
		}
		limits := accounting.Limits(set.Tokens, st.Session)
		count := max(st.Session.TokenCount-saved, 0)
		state := string(limits.State(count))
		if err := tx.ContextBreak(ctx, id, saved, count, state); err != nil {
			return err
		}
		cleared = len(due)
		return nil
	})
	if err != nil {
		return fmt.Errorf("micro-compaction: %w", err)
	}
	if cleared > 0 {
		h.metrics.microCleared.Add(ctx, int64(cleared))
		h.metrics.microSaved.Add(ctx, saved)
		h.Log.Info("micro-compaction", "tenant", tenant, "session", id, "cleared", cleared, "tokens_saved", saved)
	}
	return nil
}

// awaitPrefetch waits until the prefetch of the latest user message
// (b.Waiting) is recorded or, at b.Until, decides that nothing is shown
// beside it; a prefetch that ends later is too late for the message.
func (h *Handler) awaitPrefetch(ctx context.Context, tenant, id string, b recall.Beside) error {
	for time.Now().Before(b.Until) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(h.cfg.PollInterval, time.Until(b.Until))):
		}
		var decided bool
		err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			var err error
			decided, err = recall.Decided(ctx, tx, id, b.Waiting)
			return err
		})
		if err != nil || decided {
			return err
		}
	}
	return h.store.InTx(ctx, tenant, func(tx *store.Tx) error { return recall.Close(ctx, tx, id, b.Waiting) })
}

// recordCacheBreak accounts for a cache break (accountCacheBreak) and
// writes the snapshot it returns, or with leave returns it for the caller
// to write.
func (h *Handler) recordCacheBreak(ctx context.Context, tenant string, sess sessionstate.Session, prev *store.ContextSnapshot, system, messages [][]byte, leave bool, pacer *cpu.Pacer) (*store.ContextSnapshot, error) {
	next := h.accountCacheBreak(ctx, tenant, sess, prev, system, messages, pacer)
	if next == nil || leave {
		return next, nil
	}
	return nil, h.store.InTx(ctx, tenant, func(tx *store.Tx) error { return tx.PutContextSnapshot(ctx, *next) })
}

// accountCacheBreak compares the rendered prefix with the session's last one
// (prev, read with the context; nil before the first), and returns the
// snapshot to record when it changed (nil when nothing changed).
// A prefix that no longer starts with the last one is a cache break:
// expected when a compaction, a micro-compaction or an edit's cut was
// recorded since (each moves the session's epoch), else unexpected, and
// counted either way.
// The prefix is the system and messages parts one after the other
// (assembly.Join), hashed as they are rather than joined.
func (h *Handler) accountCacheBreak(ctx context.Context, tenant string, sess sessionstate.Session, prev *store.ContextSnapshot, system, messages [][]byte, pacer *cpu.Pacer) *store.ContextSnapshot {
	// A heavy render (pacer set) hashes paced too.
	cut := int64(-1)
	if prev != nil {
		cut = prev.PrefixLen
	}
	sum, length, head := hashParts(func() { _ = pacer.Pause(ctx) }, cut, system, messages)
	if prev != nil && len(prev.PrefixHash) != len(sum) {
		prev = nil // an earlier release's hash: nothing to compare, only to replace
	}
	if prev != nil {
		if prev.PrefixLen == length && bytes.Equal(prev.PrefixHash, sum) && prev.Epoch == sess.ContextEpoch {
			return nil // nothing changed: nothing to write
		}
		kept := head != nil && bytes.Equal(prev.PrefixHash, head)
		if !kept {
			expected := prev.Epoch < sess.ContextEpoch
			kind := "unexpected"
			if expected {
				kind = "expected"
			}
			h.metrics.cacheBreaks.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", kind)))
			if !expected {
				h.Log.Warn("unexpected cache break: the context no longer starts with the previous one",
					"tenant", tenant, "session", sess.SessionID, "epoch", sess.ContextEpoch)
			}
		}
	}
	return &store.ContextSnapshot{SessionID: sess.SessionID, Epoch: sess.ContextEpoch, PrefixLen: length, PrefixHash: sum}
}

// prefixHashKey is the fixed key of the rendered prefixes' hashes: a snapshot
// one process wrote is compared by another, after restarts.
var prefixHashKey = []byte("mnemos context prefix, v2 (hwy)!")

// hashParts hashes the concatenation of parts: the HighwayHash-128 (under
// prefixHashKey) of all of it and its length, and the hash of its first cut
// bytes (nil when cut is negative or longer than the whole). One pass: the
// head is the running hash's sum at cut bytes (Sum leaves the hash's state
// as it was). It calls pause after every pageWrite parts.
//
// The hash tells a changed prefix from the same one, not an adversary's
// forgery from it (a client could at most hide a break in its own cache
// from the metrics), and it runs over the whole prefix every round: nearly
// five times as fast as SHA-256, which the snapshots of earlier releases
// hold (32 bytes, where these are 16: accountCacheBreak tells them apart).
func hashParts(pause func(), cut int64, parts ...[][]byte) (sum []byte, length int64, head []byte) {
	h, err := highwayhash.New128(prefixHashKey)
	if err != nil {
		panic(err) // only for a key that is not 32 bytes
	}
	n := 0
	if cut == 0 {
		head = h.Sum(nil)
	}
	for _, list := range parts {
		for _, p := range list {
			if head == nil && cut > length && cut < length+int64(len(p)) {
				k := cut - length
				h.Write(p[:k])
				head = h.Sum(nil)
				h.Write(p[k:])
			} else {
				h.Write(p)
			}
			length += int64(len(p))
			if head == nil && cut == length {
				head = h.Sum(nil)
			}
			if n++; n%pageWrite == 0 {
				pause()
			}
		}
	}
	return h.Sum(nil), length, head
}
