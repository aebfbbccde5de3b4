package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/history"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// DefaultMaxImportBytes bounds the body of a session's import: it is held
// whole while every line is checked, before any event is published.
const DefaultMaxImportBytes = 64 << 20

// importSession publishes a session's history, turn events one a line (as
// GET /v1/sessions/{id}/export writes them), for the accountant: all of
// the body is read and checked first, and a bad line refuses the whole of
// it, naming the line, before anything is published. The events are then
// published in order, each admitted against the tenant's rate as a turn
// is (an import waits for the rate rather than being refused by it).
func (h *Handler) importSession(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	size := h.maxImportBytes()
	if r.ContentLength >= 0 && r.ContentLength < size {
		size = r.ContentLength
	}
	// The body is held as read and once more as published, beside one
	// event decoded at a time.
	cost := 2*size + httpapi.BodyFactor*h.eventLimit()
	release, ok := h.admission.Admit(w, r, httpapi.Mnemos, cost, fmt.Sprintf("an import of %d bytes", size))
	if !ok {
		return
	}
	defer release()
	if h.admission.IsHeavy(cost) {
		cpu.Apart(func() { h.importEvents(w, r, tenant, id) })
		return
	}
	h.importEvents(w, r, tenant, id)
}

func (h *Handler) importEvents(w http.ResponseWriter, r *http.Request, tenant, id string) {
	ctx := r.Context()
	set, err := h.settings.For(ctx, tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	limit, _ := h.tenantEventLimit(set)
	maxBody := h.maxImportBytes()
	lines, err := history.Read(http.MaxBytesReader(w, r.Body, maxBody), history.ReadOptions{Session: id, Tenant: tenant, MaxEventBytes: limit, Check: checkEvent(set)})
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		h.refuse(ctx, w, turn.Refuse(turn.ReasonTooLarge, "an import is at most %d bytes; import a longer history in parts, each its events in order", maxBody))
		return
	}
	if le, ok := history.AsLineError(err); ok {
		h.refuseLine(ctx, w, le)
		return
	}
	if err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return
	}
	if done := h.checkTarget(ctx, w, tenant, id, set.Limits, lines); done {
		return
	}
	res := api.SessionImport{SessionID: id, FirstSeq: lines[0].Seq, LastSeq: lines[len(lines)-1].Seq}
	subject := h.bus.Subject(bus.KindTurnCompleted, tenant, id)
	for i, l := range lines {
		if e := h.admitWaiting(ctx, tenant, id); e != nil {
			h.importStopped(w, e, res, lines[:i])
			return
		}
		var hdr nats.Header
		if h.cfg.Limits != nil {
			hdr = nats.Header{limits.HeaderAdmitted: []string{"gateway"}}
		}
		ack, err := h.bus.Publish(ctx, subject, bus.MsgID(tenant, l.EventID), l.Body, hdr)
		if err != nil {
			h.Log.Error("publishing an imported turn failed", "tenant", tenant, "session", id, "event_id", l.EventID, "err", err)
			h.importStopped(w, &httpapi.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: "1",
				Message: "the event bus did not accept the event of line " + fmt.Sprint(l.Number)}, res, lines[:i])
			return
		}
		h.ingested.Add(ctx, 1, metric.WithAttributes(attribute.String("transport", "import")))
		res.Events++
		res.Messages += l.Messages
		if ack.Duplicate {
			res.Duplicates++
		}
	}
	httpapi.WriteJSON(w, http.StatusAccepted, res)
}

// checkEvent refuses an event the accountant would refuse for its size or
// its window, as POST /v1/turns checks one.
func checkEvent(set tenantcfg.Settings) func(turn.Event) *turn.InputError {
	return func(ev turn.Event) *turn.InputError {
		n := len(ev.InputMessages)
		if ev.Response != nil {
			n++
		}
		if most := set.Limits.TurnMessages; most > 0 && n > most {
			return turn.Refuse(turn.ReasonTooManyMessages, "the event has %d messages; the tenant's turn_messages limit is %d", n, most)
		}
		return accounting.CheckWindow(set.Tokens, ev)
	}
}

// checkTarget refuses an import the session cannot take: one being
// erased (409 session_erasing), one holding other events at the import's
// seqs (409 seq_conflict; the same import sent again is let through, its
// events are duplicates), one it would fill past session_messages (413).
// It reports whether it answered.
func (h *Handler) checkTarget(ctx context.Context, w http.ResponseWriter, tenant, id string, lim limits.Config, lines []history.Line) bool {
	erasing, err := h.store.SessionErasing(ctx, tenant, id)
	if err != nil {
		h.Internal(w, "checking for the session's erasure", err)
		return true
	}
	if erasing {
		w.Header().Set("Retry-After", "5")
		httpapi.Fail(w, http.StatusConflict, "session_erasing", "session "+id+" is being erased; import into it after the erasure is done")
		return true
	}
	first := lines[0]
	var p struct {
		applied, messages int64
		holder            string
	}
	err = h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		s, err := tx.Session(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		p.applied, p.messages = s.AppliedSeq, s.MessageCount
		if s.AppliedSeq < first.Seq {
			return nil
		}
		t, err := tx.TurnBySeq(ctx, id, first.Seq)
		if errors.Is(err, store.ErrNotFound) {
			return nil // skipped after a gap
		}
		p.holder = t.EventID
		return err
	})
	if err != nil {
		h.Internal(w, "reading the session", err)
		return true
	}
	if p.holder != "" && p.holder != first.EventID {
		httpapi.Fail(w, http.StatusConflict, string(turn.ReasonSeqConflict), fmt.Sprintf(
			"session %s holds seq %d already (event %s, applied through seq %d); import into a session id of its own, or erase this one first",
			id, first.Seq, p.holder, p.applied))
		return true
	}
	total := int64(0)
	for _, l := range lines {
		if l.Seq > p.applied {
			total += int64(l.Messages)
		}
	}
	if most := int64(lim.SessionMessages); most > 0 && p.messages+total > most {
		h.refuse(ctx, w, turn.Refuse(turn.ReasonSessionFull, "the session holds %d messages; the import's %d would pass the tenant's session_messages limit of %d", p.messages, total, most))
		return true
	}
	return false
}

// admitWaiting counts one imported event against the tenant's limits,
// waiting out the rate limit as long as the request lasts.
func (h *Handler) admitWaiting(ctx context.Context, tenant, id string) *httpapi.Error {
	for {
		err := h.cfg.Limits.Admit(ctx, tenant, id)
		if err == nil {
			return nil
		}
		ex, ok := limits.AsExceeded(err)
		if !ok {
			h.Log.Error("checking limits failed", "tenant", tenant, "session", id, "err", err)
			return &httpapi.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", RetryAfter: "1", Message: "could not check the tenant's limits"}
		}
		if ex.Reason != limits.ReasonRateLimited {
			h.rejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", ex.Reason), attribute.String("transport", "import")))
			return &httpapi.Error{Status: http.StatusTooManyRequests, Code: ex.Reason, RetryAfter: ex.RetryAfterSeconds(), Message: ex.Detail}
		}
		t := time.NewTimer(max(ex.RetryAfter, 10*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return &httpapi.Error{} // the client left
		case <-t.C:
		}
	}
}

// importStopped answers an import that stopped before its last event,
// saying how far it went (published, the lines before): the same body sent
// again publishes the rest, the events published being duplicates then.
func (h *Handler) importStopped(w http.ResponseWriter, e *httpapi.Error, res api.SessionImport, published []history.Line) {
	if e.Status == 0 {
		return // the client left
	}
	if n := len(published); n > 0 {
		e.Message = fmt.Sprintf("%s; the %d events through line %d (seq %d) were published and will apply: send the same body again to publish the rest",
			e.Message, n, published[n-1].Number, published[n-1].Seq)
	}
	if e.RetryAfter != "" {
		w.Header().Set("Retry-After", e.RetryAfter)
	}
	httpapi.Fail(w, e.Status, e.Code, e.Message)
}

// refuseLine answers a line refused, counted by its reason.
func (h *Handler) refuseLine(ctx context.Context, w http.ResponseWriter, le *history.LineError) {
	h.refuse(ctx, w, turn.Refuse(le.Err.Reason, "%s", le.Error()))
}

func (h *Handler) maxImportBytes() int64 {
	if h.cfg.MaxImportBytes > 0 {
		return h.cfg.MaxImportBytes
	}
	return DefaultMaxImportBytes
}
