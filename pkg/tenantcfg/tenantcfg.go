// Package tenantcfg holds the settings a tenant may change, with the
// process's defaults beneath them: every number of the design is a default
// that a tenant can override.
package tenantcfg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/ttlcache"
)

// Settings are one tenant's effective settings.
type Settings struct {
	Tokens     tokens.Config        `json:"tokens"`
	Offload    accounting.Offload   `json:"offload"`
	Micro      assembly.MicroConfig `json:"micro"`
	Compaction Compaction           `json:"compaction"`
	LLM        LLM                  `json:"llm"`
	// SessionMemory is the rolling notes of sessions.
	SessionMemory SessionMemory `json:"session_memory"`
	// Memory bounds long-term memories and their indexes.
	Memory memory.Limits `json:"memory"`
	// Extraction is long-term memory extraction after user turns.
	Extraction Extraction `json:"extraction"`
	// Recall surfaces memories relevant to the user's latest message.
	Recall recall.Settings `json:"recall"`
	// Dreaming is the scheduled consolidation of memories.
	Dreaming Dreaming `json:"dreaming"`
	// Limits bound the tenant's ingest.
	Limits limits.Config `json:"limits"`
	// Proxy is how the Messages API proxy treats the tenant's requests.
	Proxy Proxy `json:"proxy"`
	// Retention is how long the tenant's sessions, tool results and memory
	// revisions are kept; all off by default.
	Retention Retention `json:"retention"`
}

// Defaults are the design's numbers, which a tenant's settings override.
func Defaults() Settings {
	return Settings{
		Tokens:     tokens.DefaultConfig(),
		Offload:    accounting.DefaultOffload(),
		Micro:      assembly.DefaultMicroConfig(),
		Compaction: DefaultCompaction(),

		SessionMemory: DefaultSessionMemory(),
		Memory:        memory.DefaultLimits(),
		Extraction:    DefaultExtraction(),
		Recall:        recall.DefaultSettings(),
		Dreaming:      DefaultDreaming(),
		Limits:        limits.DefaultConfig(),
		Proxy:         DefaultProxy(),
	}
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	return errors.Join(s.Tokens.Validate(), s.Offload.Validate(), s.Micro.Validate(), s.Compaction.Validate(), s.LLM.Validate(),
		s.SessionMemory.Validate(), s.Memory.Validate(), s.Extraction.Validate(), s.Recall.Validate(), s.Dreaming.Validate(), s.Limits.Validate(), s.Proxy.Validate(),
		s.Retention.Validate())
}

// Overlay applies a tenant's stored settings (JSON naming only what the
// tenant changed) over defaults. Unknown fields are refused, so a typo is
// an error rather than a silently ignored setting.
func Overlay(defaults Settings, stored []byte) (Settings, error) {
	out := defaults
	if len(bytes.TrimSpace(stored)) == 0 {
		return out, nil
	}
	// The decoder adds to a map it finds: give it a copy, so one tenant's
	// models never reach the defaults every tenant starts from.
	out.Tokens.Models = maps.Clone(defaults.Tokens.Models)
	dec := json.NewDecoder(bytes.NewReader(stored))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return Settings{}, fmt.Errorf("tenant settings: %w", err)
	}
	if err := out.Validate(); err != nil {
		return Settings{}, fmt.Errorf("tenant settings: %w", err)
	}
	return out, nil
}

// Loader reads a tenant's stored settings document.
type Loader func(ctx context.Context, tenant string) ([]byte, error)

// Cache serves tenants' effective settings, reading each at most once per
// TTL. While Postgres cannot be read, a tenant's last settings serve for up
// to StaleFor past their TTL: a tenant that turned something off (the
// proxy's fail_open, say) does not get the defaults back in an outage.
type Cache struct {
	defaults Settings
	load     Loader
	cache    *ttlcache.Cache[Settings]
}

// StaleFor is how long past their TTL a tenant's settings serve while they
// cannot be read.
const StaleFor = 10 * time.Minute

// NewCache builds a cache over load with the process's defaults. One cache
// serves every service of a process.
func NewCache(defaults Settings, load Loader, ttl time.Duration) (*Cache, error) {
	if err := defaults.Validate(); err != nil {
		return nil, fmt.Errorf("tenantcfg: defaults: %w", err)
	}
	return &Cache{defaults: defaults, load: load, cache: ttlcache.New[Settings](ttl, 100_000).StaleOnError(StaleFor)}, nil
}

// For returns tenant's effective settings. Stored settings that no longer
// validate are an error, so the caller retries rather than using numbers the
// tenant did not choose.
func (c *Cache) For(ctx context.Context, tenant string) (Settings, error) {
	return c.cache.Get(ctx, tenant, func(ctx context.Context, tenant string) (Settings, error) {
		raw, err := c.load(ctx, tenant)
		if err != nil {
			return Settings{}, err
		}
		s, err := Overlay(c.defaults, raw)
		if err != nil {
			return Settings{}, fmt.Errorf("tenant %s: %w", tenant, err)
		}
		return s, nil
	})
}

// MemoryLimits returns tenant's bounds on long-term memories: the Limits of
// memory.Options for every service's memory store.
func (c *Cache) MemoryLimits(ctx context.Context, tenant string) (memory.Limits, error) {
	s, err := c.For(ctx, tenant)
	return s.Memory, err
}
