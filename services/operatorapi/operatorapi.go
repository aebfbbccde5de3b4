// Package operatorapi is the operator API, /admin/v1 on the admin
// listener (api/admin-openapi.yaml): an operator key, never a tenant's,
// makes, lists, suspends, resumes and erases tenants, and manages their
// keys, settings and upstreams; it reads the audit log of every tenant.
// Each change is audited in the tenant's log as operator:<key id>.
//
// A tenant's keys are served by the handlers of the tenants' own
// /v1/keys (keysapi), for the tenant the path names.
package operatorapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/services/gateway/erasureapi"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
	"github.com/mnemos-ai/mnemos/services/gateway/keysapi"
)

// Prefix is where the operator API's routes are.
const Prefix = "/admin/v1/"

// Limits of what a request may send.
const (
	maxBodyBytes     = 4 << 10
	maxSettingsBytes = 256 << 10
	maxNameBytes     = 800
)

// Handler serves the operator API.
type Handler struct {
	store    *store.Store
	keys     *keysapi.Handler
	eraser   *erasure.Eraser
	defaults tenantcfg.Settings
	log      *slog.Logger
	now      func() time.Time
}

// New serves the operator API over st. gatewayKeys are the tenants' keys
// this process checks, emptied at once when a key is revoked or rotated
// here (nil when the process runs no gateway); defaults are the settings
// a tenant's stored settings overlay.
func New(st *store.Store, gatewayKeys *httpapi.Keys, eraser *erasure.Eraser, defaults tenantcfg.Settings, log *slog.Logger) *Handler {
	return &Handler{
		store: st, keys: keysapi.New(httpapi.Base{Keys: gatewayKeys, Log: log}, st, nil), eraser: eraser,
		defaults: defaults, log: log, now: time.Now,
	}
}

// Register adds the routes to mux, each for an operator key, and the
// answer to a path under Prefix no route takes.
func (h *Handler) Register(mux httpapi.Mux) {
	mux.Handle("GET /admin/v1/tenants", h.auth(h.listTenants))
	mux.Handle("POST /admin/v1/tenants", h.auth(h.createTenant))
	mux.Handle("GET /admin/v1/tenants/{tenant}", h.auth(h.ofTenant(h.getTenant)))
	mux.Handle("DELETE /admin/v1/tenants/{tenant}", h.auth(h.ofTenant(h.deleteTenant)))
	mux.Handle("POST /admin/v1/tenants/{tenant}/suspend", h.auth(h.ofTenant(h.suspend(true))))
	mux.Handle("POST /admin/v1/tenants/{tenant}/resume", h.auth(h.ofTenant(h.suspend(false))))
	mux.Handle("GET /admin/v1/tenants/{tenant}/keys", h.auth(h.ofTenant(h.keys.List)))
	mux.Handle("POST /admin/v1/tenants/{tenant}/keys", h.auth(h.ofTenant(h.keys.Create)))
	mux.Handle("GET /admin/v1/tenants/{tenant}/keys/{id}", h.auth(h.ofTenant(h.keys.Get)))
	mux.Handle("DELETE /admin/v1/tenants/{tenant}/keys/{id}", h.auth(h.ofTenant(h.keys.Revoke)))
	mux.Handle("POST /admin/v1/tenants/{tenant}/keys/{id}/rotate", h.auth(h.ofTenant(h.keys.Rotate)))
	mux.Handle("GET /admin/v1/tenants/{tenant}/settings", h.auth(h.ofTenant(h.getSettings)))
	mux.Handle("PUT /admin/v1/tenants/{tenant}/settings", h.auth(h.ofTenant(h.putSettings)))
	mux.Handle("GET /admin/v1/tenants/{tenant}/upstreams/{provider}", h.auth(h.ofTenant(h.getUpstream)))
	mux.Handle("PUT /admin/v1/tenants/{tenant}/upstreams/{provider}", h.auth(h.ofTenant(h.putUpstream)))
	mux.Handle("DELETE /admin/v1/tenants/{tenant}/upstreams/{provider}", h.auth(h.ofTenant(h.deleteUpstream)))
	mux.Handle("GET /admin/v1/audit", h.auth(h.audit))
	httpapi.RegisterCatchAllAt(mux, Prefix)
}

// auth lets a request with an active operator key through to next, with
// its key as the actor of what it does; else 401 (a tenant's key too).
func (h *Handler) auth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, e := httpapi.BearerKey(r)
		if e != nil {
			httpapi.Refuse(w, httpapi.Mnemos, e)
			return
		}
		key, err := h.store.LookupOperatorKey(r.Context(), secret)
		switch {
		case errors.Is(err, store.ErrNotFound):
			httpapi.Fail(w, http.StatusUnauthorized, "unauthorized", "unknown or revoked operator key (a tenant's API key is no operator key)")
			return
		case err != nil:
			h.log.Error("operator key lookup failed", "err", err)
			httpapi.Fail(w, http.StatusServiceUnavailable, "unavailable", "could not verify the operator key; retry")
			return
		}
		next(w, r.WithContext(httpapi.WithActor(r.Context(), store.OperatorActor(key.ID))))
	})
}

// ofTenant reads the path's {tenant}, answers 400 for a bad id and 404 for
// a tenant that does not exist, else calls next with it.
func (h *Handler) ofTenant(next httpapi.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("tenant")
		if !bus.ValidToken(id) {
			httpapi.Fail(w, http.StatusBadRequest, "bad_tenant_id", "tenant ids are letters, digits, '_' and '-'; got "+httpapi.Describe(id))
			return
		}
		if _, err := h.store.TenantOf(r.Context(), id); h.failed(w, r, id, "reading a tenant", err) {
			return
		}
		next(w, r, id)
	}
}

func (h *Handler) listTenants(w http.ResponseWriter, r *http.Request) {
	tenants, err := h.store.Tenants(r.Context())
	if err != nil {
		h.internal(w, r, "listing tenants", err)
		return
	}
	out := api.TenantList{Tenants: make([]api.Tenant, len(tenants))}
	for i, t := range tenants {
		out.Tenants[i] = Wire(t)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) createTenant(w http.ResponseWriter, r *http.Request) {
	var req api.TenantRequest
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, maxBodyBytes), &req); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, httpapi.BodyErrorCode(err), "tenant: "+err.Error())
		return
	}
	if !bus.ValidToken(req.ID) {
		httpapi.Fail(w, http.StatusBadRequest, "bad_tenant_id", "tenant ids are letters, digits, '_' and '-'; got "+httpapi.Describe(req.ID))
		return
	}
	if err := httpapi.CheckText("name", req.Name, maxNameBytes); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", "tenant: "+err.Error())
		return
	}
	name := req.Name
	if name == "" {
		name = req.ID
	}
	t, key, secret, err := h.store.CreateTenant(r.Context(), req.ID, name, httpapi.Actor(r.Context()))
	if errors.Is(err, store.ErrTenantExists) {
		httpapi.Fail(w, http.StatusConflict, "tenant_exists", "tenant "+req.ID+" exists")
		return
	}
	if err != nil {
		h.internal(w, r, "making a tenant", err)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, api.TenantCreated{Tenant: Wire(t), Key: api.KeySecret{Key: keysapi.Wire(key, h.now()), Secret: secret}})
}

func (h *Handler) getTenant(w http.ResponseWriter, r *http.Request, tenant string) {
	t, err := h.store.TenantOf(r.Context(), tenant)
	if h.failed(w, r, tenant, "reading a tenant", err) {
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, Wire(t))
}

func (h *Handler) suspend(suspend bool) httpapi.Handler {
	return func(w http.ResponseWriter, r *http.Request, tenant string) {
		t, err := h.store.SuspendTenant(r.Context(), tenant, suspend, httpapi.Actor(r.Context()))
		if h.failed(w, r, tenant, "suspending or resuming a tenant", err) {
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, Wire(t))
	}
}

func (h *Handler) deleteTenant(w http.ResponseWriter, r *http.Request, tenant string) {
	er, err := h.eraser.EraseTenant(r.Context(), tenant, httpapi.Actor(r.Context()))
	if errors.Is(err, erasure.ErrBusy) {
		w.Header().Set("Retry-After", "5")
		httpapi.Fail(w, http.StatusServiceUnavailable, "erasure_busy", "rows kept arriving while the erasure ran; it is recorded and goes on by itself, or ask again")
		return
	}
	if h.failed(w, r, tenant, "erasing a tenant", err) {
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, erasureapi.Answer(er))
}

func (h *Handler) getSettings(w http.ResponseWriter, r *http.Request, tenant string) {
	doc, err := h.store.TenantSettings(r.Context(), tenant)
	if h.failed(w, r, tenant, "reading a tenant's settings", err) {
		return
	}
	out, err := Settings(h.defaults, doc)
	if err != nil { // stored before a check refused it: say so, do not hide it
		h.internal(w, r, "reading a tenant's settings", err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) putSettings(w http.ResponseWriter, r *http.Request, tenant string) {
	var doc map[string]json.RawMessage
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, maxSettingsBytes), &doc); err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			httpapi.Fail(w, http.StatusRequestEntityTooLarge, "too_large", "settings: the document is over "+strconv.Itoa(maxSettingsBytes)+" bytes")
			return
		}
		httpapi.Fail(w, http.StatusBadRequest, httpapi.BodyErrorCode(err), "settings: "+err.Error())
		return
	}
	if doc == nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_settings", "settings: want a JSON object")
		return
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		h.internal(w, r, "encoding a tenant's settings", err)
		return
	}
	out, err := Settings(h.defaults, raw)
	if err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_settings", err.Error())
		return
	}
	if err := h.store.SetTenantSettingsBy(r.Context(), tenant, raw, httpapi.Actor(r.Context())); h.failed(w, r, tenant, "storing a tenant's settings", err) {
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// Settings are a tenant's stored settings and the effective ones, the
// defaults under them; an error when what is stored does not check.
func Settings(defaults tenantcfg.Settings, stored []byte) (api.TenantSettings, error) {
	effective, err := tenantcfg.Overlay(defaults, stored)
	if err != nil {
		return api.TenantSettings{}, err
	}
	eff, err := json.Marshal(effective)
	if err != nil {
		return api.TenantSettings{}, err
	}
	if len(bytes.TrimSpace(stored)) == 0 {
		stored = []byte("{}")
	}
	return api.TenantSettings{Stored: stored, Effective: eff}, nil
}

// provider reads the path's {provider}, or answers 400.
func provider(w http.ResponseWriter, r *http.Request) (store.Provider, bool) {
	p, err := store.ParseProvider(r.PathValue("provider"))
	if err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_provider", err.Error())
		return "", false
	}
	return p, true
}

func (h *Handler) getUpstream(w http.ResponseWriter, r *http.Request, tenant string) {
	p, ok := provider(w, r)
	if !ok {
		return
	}
	up, err := h.store.TenantUpstream(r.Context(), tenant, p)
	if errors.Is(err, store.ErrNotFound) {
		httpapi.Fail(w, http.StatusNotFound, "not_found", "tenant "+tenant+" has no "+string(p)+" upstream of its own: it uses the process's")
		return
	}
	if h.failed(w, r, tenant, "reading a tenant's upstream", err) {
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Upstream{Provider: string(p), URL: up.URL})
}

func (h *Handler) putUpstream(w http.ResponseWriter, r *http.Request, tenant string) {
	p, ok := provider(w, r)
	if !ok {
		return
	}
	var req api.UpstreamRequest
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, maxBodyBytes), &req); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, httpapi.BodyErrorCode(err), "upstream: "+err.Error())
		return
	}
	up, err := store.NewUpstream(req.URL, req.Key)
	if err != nil {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if err := h.store.SetTenantUpstreamBy(r.Context(), tenant, p, up, httpapi.Actor(r.Context())); h.failed(w, r, tenant, "setting a tenant's upstream", err) {
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, api.Upstream{Provider: string(p), URL: up.URL})
}

func (h *Handler) deleteUpstream(w http.ResponseWriter, r *http.Request, tenant string) {
	p, ok := provider(w, r)
	if !ok {
		return
	}
	had, err := h.store.DeleteTenantUpstreamBy(r.Context(), tenant, p, httpapi.Actor(r.Context()))
	if h.failed(w, r, tenant, "clearing a tenant's upstream", err) {
		return
	}
	if !had {
		httpapi.Fail(w, http.StatusNotFound, "not_found", "tenant "+tenant+" has no "+string(p)+" upstream of its own")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) audit(w http.ResponseWriter, r *http.Request) {
	tenant := r.URL.Query().Get("tenant")
	if tenant == "" {
		h.keys.AuditPage(w, r, func(before int64, limit int) ([]store.AuditRecord, error) {
			return h.store.AuditLogAll(r.Context(), before, limit)
		}, true)
		return
	}
	if !bus.ValidToken(tenant) {
		httpapi.Fail(w, http.StatusBadRequest, "bad_tenant_id", "tenant="+httpapi.Describe(tenant)+": tenant ids are letters, digits, '_' and '-'")
		return
	}
	h.keys.AuditPage(w, r, func(before int64, limit int) ([]store.AuditRecord, error) {
		return h.store.AuditLog(r.Context(), tenant, before, limit)
	}, true)
}

// failed answers a request about tenant whose work failed with err: 404
// when the tenant does not exist, 500 otherwise. It reports whether err
// was a failure.
func (h *Handler) failed(w http.ResponseWriter, r *http.Request, tenant, doing string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrUnknownTenant):
		httpapi.Fail(w, http.StatusNotFound, "not_found", "no tenant "+tenant)
	default:
		h.internal(w, r, doing, err)
	}
	return true
}

// internal answers 500, unless the client left.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, doing string, err error) {
	if r.Context().Err() != nil {
		return
	}
	httpapi.Internal(w, httpapi.Mnemos, h.log, doing, err)
}

// Wire is a tenant as the operator API shows it.
func Wire(t store.Tenant) api.Tenant {
	out := api.Tenant{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt.UTC(), Suspended: t.SuspendedAt != nil}
	if t.SuspendedAt != nil {
		at := t.SuspendedAt.UTC()
		out.SuspendedAt = &at
	}
	return out
}
