package console

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/erasure"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// A tenant administrator's pages: the tenant's API keys (made, rotated,
// revoked here as over /v1/keys) and the erasure of a session or a scope,
// each for a session signed in with a key that holds the admin scope.

// keysData is the keys page's: the keys, and the secret of a key just
// made, shown this once.
type keysData struct {
	Keys    []keyRow
	Scopes  []string
	Made    *store.APIKey
	Secret  string
	Replace string // the key a new one was made in place of
}

// keyRow is one key as the page lists it.
type keyRow struct {
	store.APIKey
	State    string
	Own      bool      // the key this session signed in with
	LastUsed time.Time // zero: never
	Until    time.Time // zero: no expiry
}

// admin reports whether the session's key may administer the tenant, else
// answers 403.
func (c *Console) admin(w http.ResponseWriter, r *http.Request, s signedIn) bool {
	if s.grant.Has(store.ScopeAdmin) {
		return true
	}
	c.fail(w, r, s, http.StatusForbidden, "This needs a key with the admin scope: sign in with the tenant administrator's key.")
	return false
}

func (c *Console) keys(w http.ResponseWriter, r *http.Request, s signedIn) {
	if c.admin(w, r, s) {
		c.renderKeys(w, r, s, keysData{})
	}
}

// renderKeys renders the keys page with d's secret, if any.
func (c *Console) renderKeys(w http.ResponseWriter, r *http.Request, s signedIn, d keysData) {
	keys, err := c.cfg.Store.APIKeys(r.Context(), s.tenant)
	if err != nil {
		c.internal(w, r, s, "listing keys", err)
		return
	}
	now := c.now()
	for _, k := range slices.Backward(keys) { // newest first
		row := keyRow{APIKey: k, State: "active", Own: k.ID == s.grant.KeyID}
		if k.LastUsedAt != nil {
			row.LastUsed = *k.LastUsedAt
		}
		if k.ExpiresAt != nil {
			row.Until = *k.ExpiresAt
		}
		switch {
		case k.RevokedAt != nil:
			row.State = "revoked"
		case !k.Active(now):
			row.State = "expired"
		}
		d.Keys = append(d.Keys, row)
	}
	d.Scopes = store.Scopes
	status := http.StatusOK
	if d.Made != nil {
		status = http.StatusCreated
	}
	c.render(w, status, "keys", c.signedView(s, "keys", "API keys", d))
}

// makeKey makes a key from the form: name, scopes, days (0: no expiry).
func (c *Console) makeKey(w http.ResponseWriter, r *http.Request, s signedIn) {
	if !c.admin(w, r, s) {
		return
	}
	if err := r.ParseForm(); err != nil {
		c.fail(w, r, s, http.StatusBadRequest, "The form could not be read.")
		return
	}
	k := store.NewAPIKey{Name: strings.TrimSpace(r.PostFormValue("name")), Scopes: r.PostForm["scope"]}
	if len(k.Name) > 200 {
		c.fail(w, r, s, http.StatusBadRequest, "Name the key in 200 characters or fewer.")
		return
	}
	if err := store.CheckScopes(k.Scopes); err != nil {
		c.fail(w, r, s, http.StatusBadRequest, "Not made: "+err.Error()+".")
		return
	}
	if v := r.PostFormValue("days"); v != "" && v != "0" {
		days, err := strconv.Atoi(v)
		if err != nil || days < 0 || days > 3650 {
			c.fail(w, r, s, http.StatusBadRequest, "Expiry: give a number of days from 0 (never) to 3650.")
			return
		}
		at := c.now().Add(time.Duration(days) * 24 * time.Hour)
		k.ExpiresAt = &at
	}
	made, secret, err := c.cfg.Store.CreateAPIKey(r.Context(), s.tenant, k, s.actor())
	if err != nil {
		c.internal(w, r, s, "making a key", err)
		return
	}
	c.renderKeys(w, r, s, keysData{Made: &made, Secret: secret})
}

// keyOf reads the {id} key of the tenant for an administrator, or answers
// 403 or 404.
func (c *Console) keyOf(w http.ResponseWriter, r *http.Request, s signedIn) (store.APIKey, bool) {
	if !c.admin(w, r, s) {
		return store.APIKey{}, false
	}
	id := r.PathValue("id")
	if !turn.ValidToken(id) {
		c.fail(w, r, s, http.StatusNotFound, "No such key.")
		return store.APIKey{}, false
	}
	k, err := c.cfg.Store.APIKey(r.Context(), s.tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		c.fail(w, r, s, http.StatusNotFound, "No such key.")
		return k, false
	}
	if err != nil {
		c.internal(w, r, s, "reading a key", err)
		return k, false
	}
	return k, true
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, s signedIn) {
	k, ok := c.keyOf(w, r, s)
	if !ok {
		return
	}
	if _, err := c.cfg.Store.RevokeAPIKey(r.Context(), s.tenant, k.ID, s.actor()); err != nil {
		c.internal(w, r, s, "revoking a key", err)
		return
	}
	http.Redirect(w, r, Prefix+"keys", http.StatusSeeOther)
}

func (c *Console) rotateKey(w http.ResponseWriter, r *http.Request, s signedIn) {
	k, ok := c.keyOf(w, r, s)
	if !ok {
		return
	}
	hours, err := strconv.Atoi(cmp.Or(r.PostFormValue("overlap_hours"), "24"))
	if err != nil || hours < 0 || hours > 720 {
		c.fail(w, r, s, http.StatusBadRequest, "Overlap: give a number of hours from 0 (the old key stops at once) to 720.")
		return
	}
	_, made, secret, err := c.cfg.Store.RotateAPIKey(r.Context(), s.tenant, k.ID, time.Duration(hours)*time.Hour, s.actor())
	if errors.Is(err, store.ErrKeyInactive) {
		c.fail(w, r, s, http.StatusConflict, "That key is revoked or expired: make a new key instead.")
		return
	}
	if err != nil {
		c.internal(w, r, s, "rotating a key", err)
		return
	}
	c.renderKeys(w, r, s, keysData{Made: &made, Secret: secret, Replace: k.ID})
}

// confirmed reports whether the form's confirm field repeats what is to
// be erased, else answers 400.
func (c *Console) confirmed(w http.ResponseWriter, r *http.Request, s signedIn, target string) bool {
	if strings.TrimSpace(r.PostFormValue("confirm")) == target {
		return true
	}
	c.fail(w, r, s, http.StatusBadRequest, "Not erased: type "+target+" in the box to confirm.")
	return false
}

// eraseSession erases the {id} session for good, once confirmed.
func (c *Console) eraseSession(w http.ResponseWriter, r *http.Request, s signedIn) {
	if !c.admin(w, r, s) {
		return
	}
	ctx := r.Context()
	id := r.PathValue("id")
	if !turn.ValidToken(id) {
		c.fail(w, r, s, http.StatusNotFound, "No such session.")
		return
	}
	if _, err := c.cfg.Store.GetSession(ctx, s.tenant, id); errors.Is(err, store.ErrNotFound) {
		c.fail(w, r, s, http.StatusNotFound, "No such session.")
		return
	} else if err != nil {
		c.internal(w, r, s, "reading the session", err)
		return
	}
	if !c.confirmed(w, r, s, id) {
		return
	}
	er, err := c.cfg.Eraser.EraseSession(ctx, s.tenant, id, s.actor())
	c.erased(w, r, s, er, err, Prefix+"sessions")
}

// scopeHolds reports whether the tenant's scope has an index or a memory,
// deleted ones too, else answers 404: the console knows no scope of
// another tenant, nor one never written.
func (c *Console) scopeHolds(w http.ResponseWriter, r *http.Request, s signedIn, sc memory.Scope) bool {
	ctx := r.Context()
	idx, err := c.cfg.Memories.Index(ctx, s.tenant, sc)
	if err != nil {
		c.internal(w, r, s, "reading the index", err)
		return false
	}
	mems, err := c.cfg.Memories.List(ctx, s.tenant, sc, memory.ListOptions{IncludeDeleted: true})
	if err != nil {
		c.internal(w, r, s, "listing memories", err)
		return false
	}
	if idx.Revision == 0 && len(mems) == 0 {
		c.fail(w, r, s, http.StatusNotFound, "No such scope, or it holds no memories.")
		return false
	}
	return true
}

// eraseScope erases the {scope} memory scope for good, once confirmed.
func (c *Console) eraseScope(w http.ResponseWriter, r *http.Request, s signedIn) {
	if !c.admin(w, r, s) {
		return
	}
	ctx := r.Context()
	sc, ok := c.scopeOf(w, r, s)
	if !ok {
		return
	}
	if !c.scopeHolds(w, r, s, sc) {
		return
	}
	if !c.confirmed(w, r, s, sc.String()) {
		return
	}
	er, err := c.cfg.Eraser.EraseScope(ctx, s.tenant, sc, s.actor())
	c.erased(w, r, s, er, err, Prefix+"memories")
}

// erased answers a finished erasure: back to the list it was on.
func (c *Console) erased(w http.ResponseWriter, r *http.Request, s signedIn, er store.Erasure, err error, back string) {
	switch {
	case errors.Is(err, erasure.ErrBusy):
		c.fail(w, r, s, http.StatusServiceUnavailable, "Rows kept arriving while it was erased: the erasure is recorded and finishes by itself. Stop what writes to it, then try again.")
	case err != nil:
		c.internal(w, r, s, "erasing", err)
	default:
		http.Redirect(w, r, back+"?erased="+url.QueryEscape(er.Target)+"&rows="+strconv.FormatInt(er.Rows(), 10), http.StatusSeeOther)
	}
}

// actor names the session's key in the audit log, as the API does.
func (s signedIn) actor() string { return "key:" + s.grant.KeyID }
