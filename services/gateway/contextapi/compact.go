package contextapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

func (h *Handler) compactionBody(c store.Compaction) api.Compaction {
	b := api.Compaction{
		ID: c.ID, SessionID: c.SessionID, Status: c.Status, Trigger: c.Trigger, Method: c.Method,
		Direction: c.Direction, PivotUUID: c.PivotUUID, PreTokens: c.PreTokens, PostTokens: c.PostTokens,
		Summary: c.Summary, LLMProvider: h.cfg.LLMProvider, LLMModel: c.LLMModel, LLMCalls: c.LLMCalls, LLMRetries: c.LLMRetries,
		Usage:     api.Usage{InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CacheReadTokens: c.CacheReadTokens, CacheWriteTokens: c.CacheWriteTokens},
		Retention: c.Retention,
		Error:     c.Error, CreatedAt: c.CreatedAt.UTC(), Instructions: c.Instructions,
		StatusURL: "/v1/compactions/" + c.ID, ContextURL: "/v1/sessions/" + c.SessionID + "/context",
	}
	if !c.FinishedAt.IsZero() {
		t := c.FinishedAt.UTC()
		b.FinishedAt = &t
	}
	// The detail is stored as the compactor encoded its tallies
	// (retention.Score.Detail); one that does not decode is left out of
	// the answer rather than failing it.
	if len(c.RetentionDetail) > 0 {
		if err := json.Unmarshal(c.RetentionDetail, &b.RetentionDetail); err != nil {
			h.Log.Warn("a compaction's retention detail does not decode", "compaction", c.ID, "err", err)
			b.RetentionDetail = nil
		}
	}
	return b
}

func (h *Handler) postCompact(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	var req api.CompactRequest
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, 64<<10), &req); err != nil && !errors.Is(err, io.EOF) { // an empty body takes every default
		httpapi.Fail(w, http.StatusBadRequest, httpapi.BodyErrorCode(err), "compact body: "+err.Error())
		return
	}
	if msg := checkCompact(req); msg != "" {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", msg)
		return
	}
	c := store.Compaction{
		ID: uuid.NewString(), SessionID: id, Trigger: events.TriggerManual, Direction: req.Direction,
		PivotUUID: req.PivotUUID, Instructions: req.Instructions,
	}
	err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		sess, err := tx.Session(ctx, id)
		if err != nil {
			return err
		}
		c, err = requestCompaction(ctx, tx, sess, c)
		return err
	})
	if h.SessionFailed(w, r, id, "requesting compaction", err) {
		return
	}
	h.metrics.manualCompactions.Add(ctx, 1)
	if req.Wait == nil || *req.Wait {
		timeout := 60 * time.Second
		if req.TimeoutSeconds > 0 {
			timeout = time.Duration(req.TimeoutSeconds) * time.Second
		}
		done, err := h.awaitCompaction(ctx, tenant, c.ID, timeout)
		if err != nil {
			h.Internal(w, "waiting for compaction", err)
			return
		}
		if done.Status == store.CompactionCompleted || done.Status == store.CompactionFailed || done.Status == store.CompactionSkipped {
			httpapi.WriteStableJSON(w, http.StatusOK, h.compactionBody(done))
			return
		}
		c = done
	}
	w.Header().Set("Location", "/v1/compactions/"+c.ID)
	httpapi.WriteStableJSON(w, http.StatusAccepted, h.compactionBody(c))
}

// checkCompact says what is wrong with a compact request ("": nothing).
func checkCompact(req api.CompactRequest) string {
	switch req.Direction {
	case "":
		if req.PivotUUID != "" {
			return "pivot_uuid needs a direction: \"from\" or \"up_to\""
		}
	case "from", "up_to":
		if req.PivotUUID == "" {
			return fmt.Sprintf("direction %q needs a pivot_uuid", req.Direction)
		}
	default:
		return fmt.Sprintf("direction %q: want \"from\" or \"up_to\"", req.Direction)
	}
	if req.TimeoutSeconds < 0 || req.TimeoutSeconds > 300 {
		return "timeout_seconds must be between 0 and 300"
	}
	if len(req.Instructions) > 20_000 {
		return "instructions are longer than 20,000 bytes"
	}
	if strings.ContainsRune(req.Instructions+req.PivotUUID, 0) {
		return "instructions and pivot_uuid cannot hold a NUL character (\\u0000)"
	}
	return ""
}

// awaitCompaction polls compaction id until it ends or timeout passes, and
// returns its last state.
func (h *Handler) awaitCompaction(ctx context.Context, tenant, id string, timeout time.Duration) (store.Compaction, error) {
	deadline := time.Now().Add(timeout)
	for {
		var c store.Compaction
		err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			var err error
			c, err = tx.Compaction(ctx, id)
			return err
		})
		if err != nil {
			return store.Compaction{}, err
		}
		switch c.Status {
		case store.CompactionCompleted, store.CompactionFailed, store.CompactionSkipped:
			return c, nil
		}
		if !time.Now().Before(deadline) {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(h.cfg.PollInterval):
		}
	}
}

// CompactBeforeCall compacts a session before its caller's next model
// call: it joins the compaction in flight, or asks for one (trigger
// preflight: the input the caller is about to send makes it due, so the
// compactor does not check the stored count against the threshold), and
// waits for it at most wait. instructions, when not empty, replace the
// tenant's summary instructions of a compaction it asks for (one it joins
// keeps its own). The compaction it answers may still be running when the
// wait ran out.
func (h *Handler) CompactBeforeCall(ctx context.Context, tenant, id string, wait time.Duration, instructions string) (store.Compaction, error) {
	c := store.Compaction{ID: uuid.NewString(), SessionID: id, Trigger: events.TriggerPreflight, Instructions: instructions}
	err := h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		sess, err := tx.LockSession(ctx, id, turn.MainAgent)
		if err != nil {
			return err
		}
		if sess.CompactionInFlight {
			running, err := tx.UnfinishedCompaction(ctx, id)
			if !errors.Is(err, store.ErrNotFound) {
				c = running
				return err
			}
			// An automatic request the compactor has not taken yet: its
			// compaction, made now, is the one the compactor takes.
			c, err = tx.RequestCompaction(ctx, store.Compaction{
				ID: events.AutoCompactionID(tenant, id, sess.CompactRequests), SessionID: id,
				Request: sess.CompactRequests, Trigger: events.TriggerAuto,
			})
			return err
		}
		c, err = requestCompaction(ctx, tx, sess, c)
		return err
	})
	if err != nil {
		return store.Compaction{}, err
	}
	return h.awaitCompaction(ctx, tenant, c.ID, wait)
}

// requestCompaction makes compaction c of session sess (read or locked in
// tx), marks the session's compaction in flight and asks the compactor for
// it, through the outbox.
func requestCompaction(ctx context.Context, tx *store.Tx, sess sessionstate.Session, c store.Compaction) (store.Compaction, error) {
	c, err := tx.RequestCompaction(ctx, c)
	if err != nil {
		return c, err
	}
	if err := tx.MarkCompactionRequested(ctx, sess.SessionID); err != nil {
		return c, err
	}
	return c, outbox.Enqueue(ctx, tx, events.CompactRequested{
		Schema: events.SchemaCompactRequested, TenantID: sess.TenantID, SessionID: sess.SessionID, Seq: sess.AppliedSeq,
		CompactionID: c.ID, Trigger: c.Trigger, At: time.Now().UTC(),
	})
}

func (h *Handler) getCompaction(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.CompactionIDs)
	if !ok {
		return
	}
	var c store.Compaction
	err := h.store.InTx(r.Context(), tenant, func(tx *store.Tx) error {
		var err error
		c, err = tx.Compaction(r.Context(), id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		httpapi.Fail(w, http.StatusNotFound, "not_found", "no compaction "+id)
		return
	}
	if err != nil {
		h.Internal(w, "reading compaction", err)
		return
	}
	httpapi.WriteStableJSON(w, http.StatusOK, h.compactionBody(c))
}

func (h *Handler) listCompactions(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	var cs []store.Compaction
	err := h.store.InTx(r.Context(), tenant, func(tx *store.Tx) error {
		if _, err := tx.Session(r.Context(), id); err != nil {
			return err // a session that does not exist has no empty list
		}
		var err error
		cs, err = tx.Compactions(r.Context(), id)
		return err
	})
	if h.SessionFailed(w, r, id, "listing compactions", err) {
		return
	}
	out := make([]api.Compaction, len(cs))
	for i, c := range cs {
		out[i] = h.compactionBody(c)
		out[i].Summary = ""
	}
	httpapi.WriteStableJSON(w, http.StatusOK, api.CompactionList{SessionID: id, Compactions: out})
}
