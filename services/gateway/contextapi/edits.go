package contextapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/ctxedit"
	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// maxContextRequest bounds a POST context body (instructions of 20,000
// bytes and room for the rest).
const maxContextRequest = 64 << 10

// management is what a POST context request asks of context management:
// its edits, and the compaction its compaction edit made, if any.
type management struct {
	edits      ctxedit.Config
	compaction *ctxedit.Applied
}

// answer lists the applied edits of the context c, in the order of the
// request's edits.
func (m *management) answer(c ctxedit.Context) *api.ContextManagement {
	report := m.edits.Report(c)
	out := &api.ContextManagement{AppliedEdits: []api.AppliedEdit{}}
	for _, e := range m.edits.Edits {
		switch {
		case e.Compact != nil:
			if m.compaction != nil {
				out.AppliedEdits = append(out.AppliedEdits, *m.compaction)
			}
		case len(report) > 0 && report[0].Type == e.Type:
			out.AppliedEdits = append(out.AppliedEdits, report[0])
			report = report[1:]
		}
	}
	return out
}

// postContext answers POST /v1/sessions/{id}/context: the context GET
// answers, after the request's context-management edits, with what they
// applied.
func (h *Handler) postContext(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	var req api.ContextRequest
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, maxContextRequest), &req); err != nil && !errors.Is(err, io.EOF) {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.RefuseRequest(w, r, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is larger than %d bytes", maxContextRequest))
			return
		}
		h.RefuseRequest(w, r, http.StatusBadRequest, httpapi.BodyErrorCode(err), "context body: "+err.Error())
		return
	}
	m := &management{}
	if len(req.ContextManagement) > 0 && string(req.ContextManagement) != "null" {
		cfg, err := ctxedit.Parse(req.ContextManagement)
		if e, ok := ctxedit.AsError(err); ok {
			h.RefuseRequest(w, r, http.StatusBadRequest, e.Code, e.Msg)
			return
		}
		if err != nil {
			h.RefuseRequest(w, r, http.StatusBadRequest, ctxedit.CodeBadEdits, err.Error())
			return
		}
		m.edits = cfg
	}
	h.serveContext(w, r, tenant, id, m)
}

// editContext is what the edits decide on in st.
func editContext(st sessionctx.State) ctxedit.Context {
	return ctxedit.Context{Messages: st.Messages, Cleared: st.Cleared, Cuts: st.Cuts, InputTokens: st.Session.TokenCount}
}

// cutContext records the cut edits make now, under the session's lock so
// concurrent requests decide once: each decision a replacement, and one
// context break (the epoch moves on, the tokens saved leave the count),
// like micro-compaction's.
func (h *Handler) cutContext(ctx context.Context, tenant, id string, set tenantcfg.Settings, edits ctxedit.Config, pacer *cpu.Pacer) error {
	var cut ctxedit.Cut
	err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		sess, err := tx.LockSession(ctx, id, turn.MainAgent)
		if err != nil {
			return err
		}
		st, err := h.contexts.LoadFor(ctx, tx, sess, pacer)
		if err != nil {
			return err
		}
		if cut = edits.Decide(editContext(st)); cut.Empty() {
			return nil // another request decided first
		}
		record := func(kind, text string, ids []string) error {
			for _, key := range ids {
				if err := tx.RecordReplacement(ctx, store.Replacement{SessionID: id, ToolUseID: key, Kind: kind, Text: text}); err != nil {
					return err
				}
			}
			return nil
		}
		if err := record(store.ReplaceClearToolUses, assembly.ClearedText, cut.ToolUses); err != nil {
			return err
		}
		if err := record(store.ReplaceClearToolInput, assembly.ClearedInput, cut.Inputs); err != nil {
			return err
		}
		if err := record(store.ReplaceClearThinking, "", cut.Thinking); err != nil {
			return err
		}
		limits := accounting.Limits(set.Tokens, sess)
		count := max(sess.TokenCount-cut.Saved, 0)
		return tx.ContextBreak(ctx, id, cut.Saved, count, string(limits.State(count)))
	})
	if err != nil {
		return fmt.Errorf("context edits: %w", err)
	}
	if cut.Empty() {
		return nil
	}
	for kind, n := range map[string]int{"tool_result": len(cut.ToolUses), "tool_input": len(cut.Inputs), "thinking": len(cut.Thinking)} {
		if n > 0 {
			h.metrics.edits.Add(ctx, int64(n), metric.WithAttributes(attribute.String("kind", kind)))
		}
	}
	h.metrics.editsSaved.Add(ctx, cut.Saved)
	h.Log.Info("context edits", "tenant", tenant, "session", id, "tool_results", len(cut.ToolUses),
		"tool_inputs", len(cut.Inputs), "thinking", len(cut.Thinking), "tokens_saved", cut.Saved)
	return nil
}

// compactForEdit runs m's compaction edit, if it has one (see
// compactionEdit). ok false means an answer was written.
func (h *Handler) compactForEdit(w http.ResponseWriter, r *http.Request, tenant, id string, m *management, wait time.Duration) (ok bool) {
	c, ok := m.edits.Compaction()
	if !ok {
		return true
	}
	var err error
	m.compaction, err = h.compactionEdit(r.Context(), tenant, id, c, wait)
	return !h.SessionFailed(w, r, id, "compacting for the compaction edit", err)
}

// compactionEdit runs the compaction edit c: a session whose count is
// past its trigger is compacted before the context is answered, through
// the compaction funnel (a compaction in flight is joined, else one is
// asked for with c's instructions), waiting at most wait. It asks at most
// once per stored message: when a compaction was asked since the
// session's last message, a count still past the trigger asks for none.
// It returns what the edit applied, or nil when it did nothing.
func (h *Handler) compactionEdit(ctx context.Context, tenant, id string, c ctxedit.Compact, wait time.Duration) (*ctxedit.Applied, error) {
	due := false
	err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		sess, err := tx.Session(ctx, id)
		if err != nil || !c.Due(sess.TokenCount) {
			return err
		}
		if sess.CompactionInFlight {
			due = true
			return nil
		}
		asked, err := askedSinceLastMessage(ctx, tx, sess)
		due = !asked
		return err
	})
	if err != nil || !due {
		return nil, err
	}
	comp, err := h.CompactBeforeCall(ctx, tenant, id, wait, c.Instructions)
	if err != nil {
		return nil, err
	}
	a := &ctxedit.Applied{Type: ctxedit.TypeCompact, CompactionID: comp.ID, Status: comp.Status}
	if comp.Status == store.CompactionCompleted {
		a.ClearedInputTokens = max(comp.PreTokens-comp.PostTokens, 0)
		a.Paused = c.PauseAfterCompaction
	}
	return a, nil
}

// askedSinceLastMessage reports whether the session's latest compaction
// was asked for at or after its last message was stored (or it stores
// none): compacting again would find nothing new.
func askedSinceLastMessage(ctx context.Context, tx *store.Tx, sess sessionstate.Session) (bool, error) {
	if sess.MessageCount == 0 {
		return true, nil
	}
	last, err := tx.MessagesFrom(ctx, sess.SessionID, sess.MessageCount-1)
	if err != nil || len(last) == 0 {
		return len(last) == 0, err
	}
	latest, err := tx.LatestCompaction(ctx, sess.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !latest.CreatedAt.Before(last[len(last)-1].CreatedAt), nil
}
