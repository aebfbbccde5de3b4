package tenantcfg

import (
	"errors"
	"fmt"
	"time"
)

// Dreaming holds a tenant's settings of the dreamer: the scheduled
// consolidation of each scope's memories (see docs/dreaming.md).
type Dreaming struct {
	// Enabled lets the dreamer consolidate the tenant's scopes on its own.
	Enabled bool `json:"enabled"`
	// MinHours is how long after a scope's last consolidation the next may run.
	MinHours float64 `json:"min_hours"`
	// MinSessions is how many sessions naming the scope must have been
	// active since its last consolidation.
	MinSessions int `json:"min_sessions"`
	// ScanIntervalSeconds is how often, at most, a scope's sessions are
	// counted.
	ScanIntervalSeconds float64 `json:"scan_interval_seconds"`
	// LeaseStaleSeconds is how long a consolidation's lease lasts without
	// being renewed: after that another dreamer may take the scope over.
	LeaseStaleSeconds float64 `json:"lease_stale_seconds"`
	// MaxChangePercent is the share of a scope's live memories one run may
	// delete or rewrite (at least one, see AllowedChanges); a run that would
	// change more records a proposal for approval and applies nothing.
	MaxChangePercent float64 `json:"max_change_percent"`
	// MaxTurns bounds the model calls of one consolidation.
	MaxTurns int `json:"max_turns"`
	// SearchMaxHits and SnippetWords bound one transcript search's answer.
	SearchMaxHits int `json:"search_max_hits"`
	SnippetWords  int `json:"snippet_words"`
}

// DefaultDreaming holds the design's numbers.
func DefaultDreaming() Dreaming {
	return Dreaming{
		Enabled:             true,
		MinHours:            24,
		MinSessions:         5,
		ScanIntervalSeconds: 600,
		LeaseStaleSeconds:   3600,
		MaxChangePercent:    20,
		MaxTurns:            20,
		SearchMaxHits:       50,
		SnippetWords:        30,
	}
}

// MinInterval is MinHours as a duration.
func (d Dreaming) MinInterval() time.Duration { return seconds(d.MinHours * 3600) }

// ScanInterval is ScanIntervalSeconds as a duration.
func (d Dreaming) ScanInterval() time.Duration { return seconds(d.ScanIntervalSeconds) }

// LeaseStale is LeaseStaleSeconds as a duration.
func (d Dreaming) LeaseStale() time.Duration { return seconds(d.LeaseStaleSeconds) }

// AllowedChanges is how many of live memories one run may delete or
// rewrite: MaxChangePercent of them rounded down, but at least one when
// there are any and MaxChangePercent is above 0 — else a small scope (20%
// of 4 is 0.8) could never lose a memory without approval. 0% keeps every
// change for approval.
func (d Dreaming) AllowedChanges(live int) int {
	if live <= 0 || d.MaxChangePercent <= 0 {
		return 0
	}
	return max(1, int(float64(live)*d.MaxChangePercent/100))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Validate reports settings that cannot work.
func (d Dreaming) Validate() error {
	var errs []error
	if d.MinHours < 0 || d.MinSessions < 0 || d.ScanIntervalSeconds < 0 {
		errs = append(errs, fmt.Errorf("dreaming: min_hours, min_sessions and scan_interval_seconds must not be negative, got %g, %d, %g",
			d.MinHours, d.MinSessions, d.ScanIntervalSeconds))
	}
	if d.LeaseStaleSeconds < 1 {
		errs = append(errs, fmt.Errorf("dreaming: lease_stale_seconds %g: must be at least 1", d.LeaseStaleSeconds))
	}
	if d.MaxChangePercent < 0 || d.MaxChangePercent > 100 {
		errs = append(errs, fmt.Errorf("dreaming: max_change_percent %g: want 0 to 100", d.MaxChangePercent))
	}
	if d.MaxTurns < 1 || d.MaxTurns > 100 {
		errs = append(errs, fmt.Errorf("dreaming: max_turns %d: want 1 to 100", d.MaxTurns))
	}
	if d.SearchMaxHits < 1 || d.SearchMaxHits > 50 {
		errs = append(errs, fmt.Errorf("dreaming: search_max_hits %d: want 1 to 50", d.SearchMaxHits))
	}
	if d.SnippetWords < 5 || d.SnippetWords > 100 {
		errs = append(errs, fmt.Errorf("dreaming: snippet_words %d: want 5 to 100", d.SnippetWords))
	}
	return errors.Join(errs...)
}
