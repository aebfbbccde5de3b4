package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/mnemos-ai/mnemos/pkg/store/internal/dbsqlc"
)

// The scopes an API key can hold: what its requests may do.
const (
	ScopeIngest      = "ingest"       // send turns over HTTP
	ScopeProxy       = "proxy"        // the model API doors
	ScopeRead        = "read"         // read sessions, context, memories; MCP
	ScopeMemoryWrite = "memory:write" // write, delete and restore memories; dreams
	ScopeAdmin       = "admin"        // manage the tenant's own keys and data
)

// Scopes are every scope, in the order they are shown.
var Scopes = []string{ScopeIngest, ScopeProxy, ScopeRead, ScopeMemoryWrite, ScopeAdmin}

// KeyPrefix opens every secret Mnemos makes, so that secret scanners find a
// leaked one.
const KeyPrefix = "mnm_"

// APIKey is a key as it is listed: everything but its secret.
type APIKey struct {
	ID         string
	Tenant     string
	Name       string
	Prefix     string
	Scopes     []string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// Active reports whether the key is neither revoked nor expired at now.
func (k APIKey) Active(now time.Time) bool {
	return k.RevokedAt == nil && (k.ExpiresAt == nil || now.Before(*k.ExpiresAt))
}

// NewAPIKey is what a new key is made of. Secret is empty unless a caller
// registers a known key (a development setup's); Mnemos makes one then.
type NewAPIKey struct {
	Name      string
	Scopes    []string
	ExpiresAt *time.Time
	Secret    string
}

// KeyGrant is what an active key grants: its tenant, its id, its scopes,
// until when. A key of a suspended tenant grants nothing while Suspended.
type KeyGrant struct {
	Tenant    string
	KeyID     string
	Scopes    []string
	ExpiresAt *time.Time
	Suspended bool
}

// Has reports whether the grant holds scope.
func (g KeyGrant) Has(scope string) bool { return slices.Contains(g.Scopes, scope) }

// ErrBadScope is CheckScopes' error.
var ErrBadScope = errors.New("unknown scope")

// CheckScopes checks a key's scopes: at least one, each known, none twice.
func CheckScopes(scopes []string) error {
	if len(scopes) == 0 {
		return fmt.Errorf("%w: a key needs at least one of %s", ErrBadScope, strings.Join(Scopes, ", "))
	}
	for i, s := range scopes {
		if !slices.Contains(Scopes, s) {
			return fmt.Errorf("%w %q: want %s", ErrBadScope, s, strings.Join(Scopes, ", "))
		}
		if slices.Contains(scopes[:i], s) {
			return fmt.Errorf("%w %q: named twice", ErrBadScope, s)
		}
	}
	return nil
}

// NewSecret makes a key's secret: KeyPrefix and 32 random bytes.
func NewSecret() string { return newSecret(KeyPrefix) }

// newSecret makes a secret: prefix and 32 random bytes.
func newSecret(prefix string) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}

// KeyIDOf is the id of the key with that secret: "key_" and the first 16
// hex digits of its hash, so a known key registered again is the same key.
func KeyIDOf(secret string) string { return idOf("key_", secret) }

// idOf is the id of the secret: kind and the first 16 hex digits of its hash.
func idOf(kind, secret string) string {
	return kind + hex.EncodeToString(HashAPIKey(secret)[:8])
}

// visiblePrefix is what of a secret is kept in the clear: its prefix and
// eight characters more.
func visiblePrefix(prefix, secret string) string {
	return secret[:min(len(prefix)+8, len(secret))]
}

// CreateAPIKey stores a new key of tenant and returns it with its secret,
// the one time the secret is known; actor is written to the audit log. A
// known secret registered again is left as it is and returned.
func (s *Store) CreateAPIKey(ctx context.Context, tenant string, k NewAPIKey, actor string) (APIKey, string, error) {
	if err := CheckScopes(k.Scopes); err != nil {
		return APIKey{}, "", err
	}
	secret := k.Secret
	if secret == "" {
		secret = NewSecret()
	}
	var out APIKey
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		var err error
		out, err = tx.createAPIKey(ctx, k, secret, actor)
		return err
	})
	return out, secret, err
}

func (tx *Tx) createAPIKey(ctx context.Context, k NewAPIKey, secret, actor string) (APIKey, error) {
	id := KeyIDOf(secret)
	row, err := tx.q.APIKeyInsert(ctx, dbsqlc.APIKeyInsertParams{
		KeyHash: HashAPIKey(secret), TenantID: tx.tenant, Name: k.Name, KeyID: id,
		Prefix: visiblePrefix(KeyPrefix, secret), Scopes: k.Scopes, ExpiresAt: optTimestamptz(k.ExpiresAt),
	})
	if errors.Is(err, pgx.ErrNoRows) { // registered before
		if row, err = tx.q.APIKeyGet(ctx, dbsqlc.APIKeyGetParams{TenantID: tx.tenant, KeyID: id}); err != nil {
			return APIKey{}, fmt.Errorf("store.CreateAPIKey: the key is another tenant's: %w", notFound(err))
		}
		return apiKeyOf(row), nil
	}
	if err != nil {
		return APIKey{}, fmt.Errorf("store.CreateAPIKey: %w", err)
	}
	return apiKeyOf(row), tx.Audit(ctx, actor, "key.create", id, map[string]any{"name": k.Name, "scopes": k.Scopes})
}

// AddAPIKey registers a known key of tenant with every scope: a
// development setup's and the tests'. Adding the same key twice is a no-op.
func (s *Store) AddAPIKey(ctx context.Context, tenant, name, key string) error {
	_, _, err := s.CreateAPIKey(ctx, tenant, NewAPIKey{Name: name, Scopes: Scopes, Secret: key}, "system")
	return err
}

// APIKeys lists tenant's keys, revoked and expired ones too, oldest first.
func (s *Store) APIKeys(ctx context.Context, tenant string) ([]APIKey, error) {
	var out []APIKey
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		rows, err := tx.q.APIKeyList(ctx, tenant)
		if err != nil {
			return fmt.Errorf("store.APIKeys: %w", err)
		}
		out = make([]APIKey, len(rows))
		for i, r := range rows {
			out[i] = apiKeyOf(r)
		}
		return nil
	})
	return out, err
}

// APIKey is one of tenant's keys, or ErrNotFound.
func (s *Store) APIKey(ctx context.Context, tenant, id string) (APIKey, error) {
	var out APIKey
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		row, err := tx.q.APIKeyGet(ctx, dbsqlc.APIKeyGetParams{TenantID: tenant, KeyID: id})
		if err != nil {
			return notFound(err)
		}
		out = apiKeyOf(row)
		return nil
	})
	return out, err
}

// RevokeAPIKey revokes one of tenant's keys (ErrNotFound when it has no
// such key). Revoking a revoked key changes nothing. Every gateway
// process forgets the key at once (the trigger's notification).
func (s *Store) RevokeAPIKey(ctx context.Context, tenant, id, actor string) (APIKey, error) {
	var out APIKey
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		row, err := tx.q.APIKeyRevoke(ctx, dbsqlc.APIKeyRevokeParams{TenantID: tenant, KeyID: id})
		if err != nil {
			return notFound(err)
		}
		out = apiKeyOf(row)
		return tx.Audit(ctx, actor, "key.revoke", id, nil)
	})
	return out, err
}

// RotateAPIKey makes a new key of tenant in place of key id, with its name
// and scopes and no expiry of its own, and has the old one expire after
// overlap (at once when overlap is 0, or sooner if it was to already). It
// returns the old key as it is now, the new one and the new one's secret.
func (s *Store) RotateAPIKey(ctx context.Context, tenant, id string, overlap time.Duration, actor string) (old, rotated APIKey, secret string, err error) {
	if overlap < 0 {
		return old, rotated, "", fmt.Errorf("store.RotateAPIKey: a negative overlap (%s)", overlap)
	}
	secret = NewSecret()
	err = s.InTx(ctx, tenant, func(tx *Tx) error {
		row, err := tx.q.APIKeyGet(ctx, dbsqlc.APIKeyGetParams{TenantID: tenant, KeyID: id})
		if err != nil {
			return notFound(err)
		}
		if !apiKeyOf(row).Active(time.Now()) {
			return fmt.Errorf("store.RotateAPIKey: key %s is revoked or expired: %w", id, ErrKeyInactive)
		}
		if rotated, err = tx.createAPIKey(ctx, NewAPIKey{Name: row.Name, Scopes: row.Scopes}, secret, actor); err != nil {
			return err
		}
		until := time.Now().Add(overlap)
		if row, err = tx.q.APIKeyExpireBy(ctx, dbsqlc.APIKeyExpireByParams{TenantID: tenant, KeyID: id, ExpiresAt: timestamptz(until)}); err != nil {
			return fmt.Errorf("store.RotateAPIKey: %w", err)
		}
		old = apiKeyOf(row)
		return tx.Audit(ctx, actor, "key.rotate", id, map[string]any{"new_key": rotated.ID, "overlap_seconds": overlap.Seconds()})
	})
	return old, rotated, secret, err
}

// ErrKeyInactive is RotateAPIKey's error for a key revoked or expired.
var ErrKeyInactive = errors.New("the key is not active")

// LookupAPIKey is what an active key grants, or ErrNotFound. No tenant is
// known yet, so it asks the owner's function, which answers for this one
// key only.
func (s *Store) LookupAPIKey(ctx context.Context, key string) (KeyGrant, error) {
	return s.LookupAPIKeyHash(ctx, HashAPIKey(key))
}

// LookupAPIKeyHash is LookupAPIKey by the key's hash (HashAPIKey).
func (s *Store) LookupAPIKeyHash(ctx context.Context, hash []byte) (KeyGrant, error) {
	row, err := dbsqlc.New(s.pool).APIKeyLookup(ctx, hash)
	if err != nil {
		return KeyGrant{}, notFound(err)
	}
	return KeyGrant{Tenant: row.TenantID, KeyID: row.KeyID, Scopes: row.Scopes, ExpiresAt: timeOf(row.ExpiresAt), Suspended: row.Suspended}, nil
}

// TouchAPIKey records that a key was used now, at most once a minute.
func (s *Store) TouchAPIKey(ctx context.Context, tenant, id string) error {
	return s.InTx(ctx, tenant, func(tx *Tx) error {
		return tx.q.APIKeyTouch(ctx, dbsqlc.APIKeyTouchParams{TenantID: tenant, KeyID: id})
	})
}

// KeysChannel is the channel on which a change to a key (revoked, expiring
// sooner, rescoped, deleted, its tenant suspended or resumed) is announced,
// as the hex of its hash.
const KeysChannel = "mnemos_api_keys"

// ListenKeys calls changed with the hash (hex) of each key announced on
// KeysChannel, until ctx ends. ready is called each time it starts to
// listen, on a connection of its own: what was announced while it was not
// listening is lost, so a caller forgets every key then. It returns the
// error that ended its connection, or nil when ctx ended.
func (s *Store) ListenKeys(ctx context.Context, ready func(), changed func(hash string)) error {
	// A connection of its own, outside the pool: listening must not take
	// a connection from the requests, which may need every one of them.
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx)) //nolint:errcheck // closing: nothing to do with its error
	if _, err := conn.Exec(ctx, "LISTEN "+KeysChannel); err != nil {
		return err
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		changed(n.Payload)
	}
}

// Audit writes a record of what actor did to target in the transaction's
// tenant. detail names what was done, never the content it touched.
func (tx *Tx) Audit(ctx context.Context, actor, action, target string, detail map[string]any) error {
	doc := []byte("{}")
	if len(detail) > 0 {
		var err error
		if doc, err = json.Marshal(detail); err != nil {
			return fmt.Errorf("store.Audit: %w", err)
		}
	}
	if err := tx.q.AuditInsert(ctx, dbsqlc.AuditInsertParams{TenantID: tx.tenant, Actor: actor, Action: action, Target: target, Detail: doc}); err != nil {
		return fmt.Errorf("store.Audit: %w", err)
	}
	return nil
}

// AuditRecord is a record of the audit log.
type AuditRecord struct {
	ID     int64
	Tenant string
	At     time.Time
	Actor  string
	Action string
	Target string
	Detail json.RawMessage
}

// AuditLog is tenant's audit records before id before (all when 0), newest
// first, at most limit.
func (s *Store) AuditLog(ctx context.Context, tenant string, before int64, limit int) ([]AuditRecord, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	var out []AuditRecord
	err := s.InTx(ctx, tenant, func(tx *Tx) error {
		rows, err := tx.q.AuditList(ctx, dbsqlc.AuditListParams{TenantID: tenant, Before: before, MaxRows: int32(min(max(limit, 1), 1000))}) //nolint:gosec // bounded above
		if err != nil {
			return fmt.Errorf("store.AuditLog: %w", err)
		}
		out = auditRecordsOf(rows)
		return nil
	})
	return out, err
}

// AuditLogAll is AuditLog of every tenant: the operator's read across
// tenants.
func (s *Store) AuditLogAll(ctx context.Context, before int64, limit int) ([]AuditRecord, error) {
	if before <= 0 {
		before = 1<<63 - 1
	}
	rows, err := dbsqlc.New(s.pool).AuditListAll(ctx, dbsqlc.AuditListAllParams{Before: before, MaxRows: int32(min(max(limit, 1), 1000))}) //nolint:gosec // bounded above
	if err != nil {
		return nil, fmt.Errorf("store.AuditLogAll: %w", err)
	}
	return auditRecordsOf(rows), nil
}

func auditRecordsOf(rows []dbsqlc.AuditLog) []AuditRecord {
	out := make([]AuditRecord, len(rows))
	for i, r := range rows {
		out[i] = AuditRecord{ID: r.ID, Tenant: r.TenantID, At: r.At.Time, Actor: r.Actor, Action: r.Action, Target: r.Target, Detail: r.Detail}
	}
	return out
}

func apiKeyOf(r dbsqlc.ApiKey) APIKey {
	return APIKey{
		ID: r.KeyID, Tenant: r.TenantID, Name: r.Name, Prefix: r.Prefix, Scopes: r.Scopes, CreatedAt: r.CreatedAt.Time,
		ExpiresAt: timeOf(r.ExpiresAt), LastUsedAt: timeOf(r.LastUsedAt), RevokedAt: timeOf(r.RevokedAt),
	}
}

func timeOf(t pgtype.Timestamptz) *time.Time {
	if !t.Valid {
		return nil
	}
	v := t.Time
	return &v
}

func optTimestamptz(t *time.Time) pgtype.Timestamptz {
	if t == nil {
		return pgtype.Timestamptz{}
	}
	return timestamptz(*t)
}
