package contextapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// preflightRequest is a preflight's body, with what the gateway reads of it.
type preflightRequest struct{ api.PreflightRequest }

// request is what the preflight says of the coming request.
func (req preflightRequest) request() accounting.Request {
	return accounting.Request{Model: req.Model, Prefix: req.RequestPrefix, ClientCompaction: req.ClientCompaction != nil}
}

// on is session s with the window and output the request names in place of
// the session's own; the model is accounting.Request's.
func (req preflightRequest) on(s sessionstate.Session) sessionstate.Session {
	if req.ContextWindow != 0 {
		s.ContextWindow = req.ContextWindow
	}
	if req.MaxOutputTokens != 0 {
		s.MaxOutputTokens = req.MaxOutputTokens
	}
	return s
}

// preflightBody is the answer to a preflight of count p, without a
// compaction.
func preflightBody(p accounting.Preflight) api.Preflight {
	return api.Preflight{Tokens: p.Tokens, CompactFirst: p.CompactFirst, Blocked: p.Blocked, CompactionInFlight: p.CompactionInFlight}
}

func (h *Handler) preflight(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.SessionIDs)
	if !ok {
		return
	}
	var req preflightRequest
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, h.cfg.MaxPreflightBytes), &req); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, httpapi.BodyErrorCode(err), "preflight body: "+err.Error())
		return
	}
	wait := h.cfg.ContextWait
	if req.CompactionWaitMs != nil {
		var err error
		if wait, err = waitMillis(*req.CompactionWaitMs); err != nil {
			httpapi.Fail(w, http.StatusBadRequest, "bad_wait", "compaction_wait_ms: "+err.Error())
			return
		}
	}
	set, err := h.settings.For(r.Context(), tenant)
	if err != nil {
		h.Internal(w, "reading tenant settings", err)
		return
	}
	stored, err := h.store.GetSession(r.Context(), tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		stored = sessionstate.Session{TenantID: tenant, SessionID: id, AutoCompactEnabled: true, State: string(tokens.StateOK)}
		// As the accountant will count its first turn: from the tenant's prior.
		if stored.EstimateFactor, stored.DenseFactor, err = h.store.EstimatePrior(r.Context(), tenant); err != nil {
			h.Internal(w, "reading the tenant's calibration", err)
			return
		}
	} else if err != nil {
		h.Internal(w, "reading session", err)
		return
	}
	s := req.on(stored)
	if req.ContextWindow != 0 || req.MaxOutputTokens != 0 {
		// Checked only when the request names one: a session's own
		// numbers came with its turns.
		model := s.Model
		if req.Model != "" {
			model = req.Model
		}
		if werr := set.Tokens.CheckWindow(model, s.ContextWindow, s.MaxOutputTokens); werr != nil {
			h.RefuseRequest(w, r, http.StatusBadRequest, "bad_"+werr.Field, werr.Error())
			return
		}
	}
	if p := req.RequestPrefix; p != nil {
		if _, _, err := tokens.EstimatePrefix(*p); err != nil {
			h.RefuseRequest(w, r, http.StatusBadRequest, "bad_request_prefix", "request_prefix: "+err.Error())
			return
		}
		if _, _, ok, _ := accounting.PrefixOf(stored, p); !ok {
			h.RefuseRequest(w, r, http.StatusBadRequest, "unknown_prefix_hash",
				fmt.Sprintf("request_prefix names only hash %q, which is not the session's: send system and tools (or tokens or bytes) with it once", p.Hash))
			return
		}
	}
	count := func(s sessionstate.Session) (accounting.Preflight, error) {
		return h.countPreflight(r, tenant, set, req, s)
	}
	p, err := count(s)
	if err != nil {
		h.Internal(w, "counting the preflight", err)
		return
	}
	out := preflightBody(p)
	if req.Compact && out.CompactFirst && !stored.CreatedAt.IsZero() {
		c, err := h.CompactBeforeCall(r.Context(), tenant, id, wait, "")
		if err != nil {
			h.Internal(w, "compacting before the call", err)
			return
		}
		if stored, err = h.store.GetSession(r.Context(), tenant, id); err != nil {
			h.Internal(w, "reading session", err)
			return
		}
		if p, err = count(req.on(stored)); err != nil {
			h.Internal(w, "counting the preflight", err)
			return
		}
		body := h.compactionBody(c)
		out = preflightBody(p)
		out.Compaction = &body
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// countPreflight counts req on session s as the accountant would, or, when
// the tenant asks for exact preflights and enough of the count is
// estimated, by the tenant's upstream (ExactCounter: the proxy).
func (h *Handler) countPreflight(r *http.Request, tenant string, set tenantcfg.Settings, req preflightRequest, s sessionstate.Session) (accounting.Preflight, error) {
	var estimate int64
	if req.request().ModelChanged(s) {
		var err error
		if estimate, err = h.store.ContextEstimate(r.Context(), tenant, s); err != nil {
			return accounting.Preflight{}, err
		}
	}
	s.AutoCompactEnabled = set.Compaction.Compacts(s) // compact_first only when the session compacts by itself
	f, err := accounting.ForecastWith(set.Tokens, set.Offload, s, req.request(), estimate, req.InputMessages)
	if err != nil {
		return accounting.Preflight{}, err
	}
	if share := set.Proxy.PreflightExactPercent; h.exact != nil && share > 0 && float64(f.Estimated())*100 >= share*float64(f.Count) {
		model := s.Model
		if req.Model != "" {
			model = req.Model
		}
		if exact, ok := h.exact.ExactPreflight(r.Context(), r, tenant, model, f, req.RequestPrefix); ok {
			return f.Preflight(exact), nil
		}
	}
	return f.Preflight(f.Count), nil
}
