package api

import (
	"encoding/json"
	"time"
)

// Key is one of a tenant's API keys as it is listed: everything but
// its secret, which is shown once, when the key is made (KeySecret).
type Key struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	Active     bool       `json:"active"`
}

// KeyList is a tenant's keys, oldest first, revoked and expired ones
// too.
type KeyList struct {
	Keys []Key `json:"keys"`
}

// KeyRequest makes a key: its name, its scopes and, optionally, when it
// expires.
type KeyRequest struct {
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// RotateRequest rotates a key: the old one stays good for OverlapSeconds
// (0: it stops at once).
type RotateRequest struct {
	OverlapSeconds int64 `json:"overlap_seconds"`
}

// KeySecret is a key just made, with its secret: the only answer that
// holds it. A rotation's answer also holds the key it replaces (Previous),
// as it is now.
type KeySecret struct {
	Key      Key    `json:"key"`
	Secret   string `json:"secret"`
	Previous *Key   `json:"previous,omitempty"`
}

// AuditRecord is what was done to a tenant's keys or data, by whom and
// when: Actor is "key:<id>" for a request made with that key,
// "operator:<id>" for one made with an operator key, "cli" for the command
// line; Detail names what was done, never content. Tenant is set in the
// operator API's answers, which span tenants.
type AuditRecord struct {
	ID     int64           `json:"id"`
	Tenant string          `json:"tenant,omitempty"`
	At     time.Time       `json:"at"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Detail json.RawMessage `json:"detail"`
}

// AuditLog is a page of the audit log, newest first; Next, when set, is
// the before of the next page.
type AuditLog struct {
	Records []AuditRecord `json:"records"`
	Next    int64         `json:"next,omitempty"`
}
