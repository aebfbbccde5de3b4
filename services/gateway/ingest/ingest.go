// Package ingest serves POST /v1/turns, where a turn event is checked
// against its tenant's limits and published on the bus for the accountant,
// and a session's import, which does the same for a history of them.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Config of turn ingest.
type Config struct {
	// MaxEventBytes bounds an event (the bus's max payload may bound it lower).
	MaxEventBytes int
	// Limits admits each event against its tenant's limits; nil admits everything.
	Limits *limits.Limiter
	// MaxImportBytes bounds the body of a session's import (0:
	// DefaultMaxImportBytes).
	MaxImportBytes int64
}

// Handler serves turn ingest.
type Handler struct {
	httpapi.Base
	cfg       Config
	store     *store.Store
	bus       *bus.Bus
	settings  *tenantcfg.Cache
	admission *httpapi.Admission
	ingested  metric.Int64Counter
	rejected  metric.Int64Counter
}

// New serves turn ingest, publishing on b; expensive requests are
// admitted by admission.
func New(cfg Config, base httpapi.Base, admission *httpapi.Admission, st *store.Store, b *bus.Bus, settings *tenantcfg.Cache, meter metric.Meter) (*Handler, error) {
	h := &Handler{Base: base, cfg: cfg, store: st, bus: b, settings: settings, admission: admission}
	var err error
	if h.ingested, err = meter.Int64Counter("mnemos.turns.ingested", metric.WithDescription("Turn events accepted at the gateway.")); err != nil {
		return nil, fmt.Errorf("ingest.New: %w", err)
	}
	if h.rejected, err = meter.Int64Counter("mnemos.turns.refused", metric.WithDescription("Turn events refused at the gateway, by reason.")); err != nil {
		return nil, fmt.Errorf("ingest.New: %w", err)
	}
	return h, nil
}

// Register adds POST /v1/turns and a session's import to mux, admitted
// before their body is read.
func (h *Handler) Register(mux httpapi.Mux) {
	mux.Handle("POST /v1/turns", h.Auth(store.ScopeIngest, h.admission.Expensive(httpapi.Mnemos, h.admission.WithBody(httpapi.Mnemos, h.eventLimit, h.postTurn))))
	mux.Handle("POST /v1/sessions/{id}/import", h.Auth(store.ScopeIngest, h.admission.Expensive(httpapi.Mnemos, h.importSession)))
}

func (h *Handler) postTurn(w http.ResponseWriter, r *http.Request, tenant string) {
	ctx := r.Context()
	set, err := h.settings.For(ctx, tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	limit, limitName := h.tenantEventLimit(set)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(limit)))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		h.refuse(ctx, w, turn.Refuse(turn.ReasonTooLarge, "event is larger than %s of %d bytes", limitName, limit))
		return
	}
	if err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
		return
	}
	ev, err := turn.Decode(body, turn.DecodeOptions{MaxBytes: limit, Tenant: tenant})
	if err != nil {
		h.refuse(ctx, w, err)
		return
	}
	if ie := accounting.CheckWindow(set.Tokens, ev); ie != nil {
		h.refuse(ctx, w, ie)
		return
	}
	// A session being erased takes no turn until the erasure is done, so
	// that none of it comes back; the turn then starts a new session.
	erasing, err := h.store.SessionErasing(ctx, tenant, ev.SessionID)
	if err != nil {
		h.Log.Error("checking for the session's erasure failed", "tenant", tenant, "session", ev.SessionID, "err", err)
		w.Header().Set("Retry-After", "1")
		httpapi.Fail(w, http.StatusServiceUnavailable, "unavailable", "could not check the session; retry with the same event_id")
		return
	}
	if erasing {
		w.Header().Set("Retry-After", "5")
		httpapi.Fail(w, http.StatusConflict, "session_erasing", "session "+ev.SessionID+" is being erased; send its turns after the erasure is done")
		return
	}
	if err := h.checkBounds(ctx, tenant, set.Limits, ev); err != nil {
		if _, ok := turn.AsInputError(err); ok {
			h.refuse(ctx, w, err)
			return
		}
		h.Log.Error("reading the session for its limits failed", "tenant", tenant, "session", ev.SessionID, "err", err)
		w.Header().Set("Retry-After", "1")
		httpapi.Fail(w, http.StatusServiceUnavailable, "unavailable", "could not check the session's limits; retry with the same event_id")
		return
	}
	var hdr nats.Header
	if h.cfg.Limits != nil {
		err := h.cfg.Limits.Admit(ctx, tenant, ev.SessionID)
		if ex, ok := limits.AsExceeded(err); ok {
			h.rejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", ex.Reason), attribute.String("transport", "http")))
			w.Header().Set("Retry-After", ex.RetryAfterSeconds())
			httpapi.Fail(w, http.StatusTooManyRequests, ex.Reason, ex.Detail)
			return
		}
		if err != nil {
			h.Log.Error("checking limits failed", "tenant", tenant, "session", ev.SessionID, "err", err)
			w.Header().Set("Retry-After", "1")
			httpapi.Fail(w, http.StatusServiceUnavailable, "unavailable", "could not check the tenant's limits; retry with the same event_id")
			return
		}
		hdr = nats.Header{limits.HeaderAdmitted: []string{"gateway"}} // counted once: the accountant skips it
	}
	// The event travels as sent; its subject names the tenant, which is
	// where consumers take it from.
	subject := h.bus.Subject(bus.KindTurnCompleted, tenant, ev.SessionID)
	ack, err := h.bus.Publish(ctx, subject, bus.MsgID(tenant, ev.EventID), body, hdr)
	if err != nil {
		h.Log.Error("publishing turn failed", "tenant", tenant, "session", ev.SessionID, "event_id", ev.EventID, "err", err)
		httpapi.Fail(w, http.StatusServiceUnavailable, "unavailable", "the event bus did not accept the event; retry with the same event_id")
		return
	}
	h.ingested.Add(ctx, 1, metric.WithAttributes(attribute.String("transport", "http")))
	httpapi.WriteJSON(w, http.StatusAccepted, api.TurnAccepted{EventID: ev.EventID, Subject: subject, Duplicate: ack.Duplicate})
}

// checkBounds refuses a turn over the tenant's caps on a turn's messages, a
// session's messages and how far ahead its seq may be. The session's side
// is one read by key; the accountant checks again under the session's lock
// and is the authority (events still waiting are not counted here). A seq
// the session applied already is a retry or a late event: the accountant
// decides, so the session's size does not refuse it.
func (h *Handler) checkBounds(ctx context.Context, tenant string, lim limits.Config, ev turn.Event) error {
	n := len(ev.InputMessages)
	if ev.Response != nil {
		n++
	}
	if lim.TurnMessages > 0 && n > lim.TurnMessages {
		return turn.Refuse(turn.ReasonTooManyMessages, "the turn has %d messages; the tenant's turn_messages limit is %d", n, lim.TurnMessages)
	}
	if lim.SeqWindow <= 0 && lim.SessionMessages <= 0 {
		return nil
	}
	p, err := h.store.SessionProgress(ctx, tenant, ev.SessionID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if lim.SeqWindow > 0 && ev.Seq > p.AppliedSeq+lim.SeqWindow {
		return turn.Refuse(turn.ReasonSeqTooFar, "seq %d is more than the tenant's seq_window of %d ahead of the session's applied seq %d", ev.Seq, lim.SeqWindow, p.AppliedSeq)
	}
	if limit := int64(lim.SessionMessages); limit > 0 && ev.Seq > p.AppliedSeq && p.MessageCount+int64(n) > limit {
		return turn.Refuse(turn.ReasonSessionFull, "the session holds %d messages; the turn's %d would pass the tenant's session_messages limit of %d", p.MessageCount, n, limit)
	}
	return nil
}

func (h *Handler) refuse(ctx context.Context, w http.ResponseWriter, err error) {
	ie, ok := turn.AsInputError(err)
	if !ok {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	h.rejected.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", string(ie.Reason)), attribute.String("transport", "http")))
	status := http.StatusBadRequest
	switch ie.Reason {
	case turn.ReasonTooLarge:
		status = http.StatusRequestEntityTooLarge
		h.cfg.Limits.Record(ctx, limits.LimitEventBytes)
	case turn.ReasonTooManyMessages:
		status = http.StatusRequestEntityTooLarge
		h.cfg.Limits.Record(ctx, limits.LimitTurnMessages)
	case turn.ReasonSessionFull:
		status = http.StatusRequestEntityTooLarge
		h.cfg.Limits.Record(ctx, limits.LimitSessionMessages)
	case turn.ReasonSeqTooFar:
		h.cfg.Limits.Record(ctx, limits.LimitSeqWindow)
	case turn.ReasonTenantMismatch:
		status = http.StatusForbidden
	}
	httpapi.Fail(w, status, string(ie.Reason), ie.Detail)
}

// tenantEventLimit is the largest turn event the tenant may send, and
// what sets it.
func (h *Handler) tenantEventLimit(set tenantcfg.Settings) (int, string) {
	limit, limitName := h.cfg.MaxEventBytes, "the server's limit"
	if mp := int(h.bus.MaxPayload()); mp > 0 && mp < limit {
		limit = mp // the bus cannot carry more than its server's max_payload
	}
	if tb := set.Limits.TurnBytes; tb > 0 && tb < limit {
		limit, limitName = tb, "the tenant's turn_bytes limit"
	}
	return limit, limitName
}

// eventLimit is the largest turn event the gateway reads: its own limit, or
// the bus's max payload when smaller.
func (h *Handler) eventLimit() int64 {
	limit := int64(h.cfg.MaxEventBytes)
	if mp := h.bus.MaxPayload(); mp > 0 && mp < limit {
		limit = mp
	}
	return limit
}
