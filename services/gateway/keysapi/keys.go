// Package keysapi serves a tenant's API keys and its audit log to a key
// with the admin scope: a tenant administrator manages its own tenant's
// keys, and row-level security keeps every other tenant's out of reach.
// The operator API serves the same handlers for the tenant its path names.
package keysapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Limits of what a request may ask.
const (
	maxNameRunes = 200
	maxOverlap   = 30 * 24 * time.Hour
	maxBodyBytes = 4 << 10
)

// Handler serves /v1/keys and /v1/audit.
type Handler struct {
	httpapi.Base
	store *store.Store
	now   func() time.Time
}

// New serves the keys of st's tenants; now is the clock expiries are
// checked against (time.Now when nil). base.Keys may be nil where no keys
// are checked (the operator API of a process that runs no gateway): a
// refusal is not counted then, and no cache is to be emptied.
func New(base httpapi.Base, st *store.Store, now func() time.Time) *Handler {
	if now == nil {
		now = time.Now
	}
	return &Handler{Base: base, store: st, now: now}
}

// Register adds the routes to mux, each for a key with the admin scope.
func (h *Handler) Register(mux httpapi.Mux) {
	mux.Handle("GET /v1/keys", h.Auth(store.ScopeAdmin, h.List))
	mux.Handle("POST /v1/keys", h.Auth(store.ScopeAdmin, h.Create))
	mux.Handle("GET /v1/keys/{id}", h.Auth(store.ScopeAdmin, h.Get))
	mux.Handle("DELETE /v1/keys/{id}", h.Auth(store.ScopeAdmin, h.Revoke))
	mux.Handle("POST /v1/keys/{id}/rotate", h.Auth(store.ScopeAdmin, h.Rotate))
	mux.Handle("GET /v1/audit", h.Auth(store.ScopeAdmin, h.Audit))
}

// List answers the tenant's keys.
func (h *Handler) List(w http.ResponseWriter, r *http.Request, tenant string) {
	keys, err := h.store.APIKeys(r.Context(), tenant)
	if err != nil {
		h.Internal(w, "listing keys", err)
		return
	}
	out := api.KeyList{Keys: make([]api.Key, len(keys))}
	for i, k := range keys {
		out.Keys[i] = Wire(k, h.now())
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// Create makes a key of the tenant and answers its secret.
func (h *Handler) Create(w http.ResponseWriter, r *http.Request, tenant string) {
	var req api.KeyRequest
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, maxBodyBytes), &req); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, httpapi.BodyErrorCode(err), "key: "+err.Error())
		return
	}
	if msg := h.check(req); msg != "" {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", "key: "+msg)
		return
	}
	key, secret, err := h.store.CreateAPIKey(r.Context(), tenant, store.NewAPIKey{Name: req.Name, Scopes: req.Scopes, ExpiresAt: req.ExpiresAt}, httpapi.Actor(r.Context()))
	if err != nil {
		h.Internal(w, "making a key", err)
		return
	}
	httpapi.WriteJSON(w, http.StatusCreated, api.KeySecret{Key: Wire(key, h.now()), Secret: secret})
}

// check says what is wrong with a request for a key, or "".
func (h *Handler) check(req api.KeyRequest) string {
	if err := store.CheckScopes(req.Scopes); err != nil {
		return err.Error()
	}
	if err := httpapi.CheckText("name", req.Name, 4*maxNameRunes); err != nil {
		return err.Error()
	}
	if utf8.RuneCountInString(req.Name) > maxNameRunes {
		return "the name is longer than " + strconv.Itoa(maxNameRunes) + " characters"
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(h.now()) {
		return "expires_at is not in the future"
	}
	return ""
}

// Get answers the tenant's key {id}.
func (h *Handler) Get(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.KeyIDs)
	if !ok {
		return
	}
	key, err := h.store.APIKey(r.Context(), tenant, id)
	if h.failed(w, r, id, "reading a key", err) {
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, Wire(key, h.now()))
}

// Revoke revokes the tenant's key {id}.
func (h *Handler) Revoke(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.KeyIDs)
	if !ok {
		return
	}
	key, err := h.store.RevokeAPIKey(r.Context(), tenant, id, httpapi.Actor(r.Context()))
	if h.failed(w, r, id, "revoking a key", err) {
		return
	}
	h.Keys.Forget()
	httpapi.WriteJSON(w, http.StatusOK, Wire(key, h.now()))
}

// Rotate makes a key in place of the tenant's key {id}.
func (h *Handler) Rotate(w http.ResponseWriter, r *http.Request, tenant string) {
	id, ok := h.PathID(w, r, httpapi.KeyIDs)
	if !ok {
		return
	}
	var req api.RotateRequest
	if err := httpapi.DecodeBody(http.MaxBytesReader(w, r.Body, maxBodyBytes), &req); err != nil {
		httpapi.Fail(w, http.StatusBadRequest, httpapi.BodyErrorCode(err), "rotate: "+err.Error())
		return
	}
	overlap := time.Duration(req.OverlapSeconds) * time.Second
	if req.OverlapSeconds < 0 || overlap > maxOverlap {
		httpapi.Fail(w, http.StatusBadRequest, "bad_request", "rotate: overlap_seconds must be between 0 and "+strconv.Itoa(int(maxOverlap.Seconds())))
		return
	}
	old, rotated, secret, err := h.store.RotateAPIKey(r.Context(), tenant, id, overlap, httpapi.Actor(r.Context()))
	if errors.Is(err, store.ErrKeyInactive) {
		httpapi.Fail(w, http.StatusConflict, "key_inactive", "key "+id+" is revoked or expired: make a new key instead")
		return
	}
	if h.failed(w, r, id, "rotating a key", err) {
		return
	}
	h.Keys.Forget()
	previous := Wire(old, h.now())
	httpapi.WriteJSON(w, http.StatusCreated, api.KeySecret{Key: Wire(rotated, h.now()), Secret: secret, Previous: &previous})
}

// Audit answers a page of the tenant's audit log (?before=, ?limit=).
func (h *Handler) Audit(w http.ResponseWriter, r *http.Request, tenant string) {
	h.AuditPage(w, r, func(before int64, limit int) ([]store.AuditRecord, error) {
		return h.store.AuditLog(r.Context(), tenant, before, limit)
	}, false)
}

// AuditPage answers the page of an audit log that read gives for the
// request's ?before= and ?limit=; withTenant keeps each record's tenant
// in the answer (the operator's, which spans tenants).
func (h *Handler) AuditPage(w http.ResponseWriter, r *http.Request, read func(before int64, limit int) ([]store.AuditRecord, error), withTenant bool) {
	q := r.URL.Query()
	before, limit := int64(0), 100
	var err error
	if v := q.Get("before"); v != "" {
		if before, err = strconv.ParseInt(v, 10, 64); err != nil || before < 1 {
			httpapi.Fail(w, http.StatusBadRequest, "bad_request", "before="+httpapi.Describe(v)+": want a record id")
			return
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			httpapi.Fail(w, http.StatusBadRequest, "bad_request", "limit="+httpapi.Describe(v)+": want 1 to 1000")
			return
		}
	}
	records, err := read(before, limit)
	if err != nil {
		h.Internal(w, "reading the audit log", err)
		return
	}
	out := api.AuditLog{Records: make([]api.AuditRecord, len(records))}
	for i, rec := range records {
		out.Records[i] = api.AuditRecord(rec)
		if !withTenant {
			out.Records[i].Tenant = ""
		}
	}
	if len(records) == limit {
		out.Next = records[len(records)-1].ID
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// failed answers a request about key id whose work failed with err: 404
// when the tenant has no such key, 500 otherwise. It reports whether err
// was a failure.
func (h *Handler) failed(w http.ResponseWriter, r *http.Request, id, doing string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, store.ErrNotFound):
		httpapi.Fail(w, http.StatusNotFound, "not_found", "no key "+id)
	case r.Context().Err() == nil:
		h.Internal(w, doing, err)
	}
	return true
}

// Wire is a key as the API shows it, active or not at now.
func Wire(k store.APIKey, now time.Time) api.Key {
	return api.Key{
		ID: k.ID, Name: k.Name, Prefix: k.Prefix, Scopes: k.Scopes, CreatedAt: k.CreatedAt.UTC(),
		ExpiresAt: utc(k.ExpiresAt), LastUsedAt: utc(k.LastUsedAt), RevokedAt: utc(k.RevokedAt), Active: k.Active(now),
	}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
