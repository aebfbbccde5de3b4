package tenantcfg

import (
	"errors"
	"fmt"
)

// MaxRetentionDays bounds every retention period: a longer one is a typo
// (days written as hours, say), not a policy.
const MaxRetentionDays = 36_500

// MaxRevisionsKeep bounds memory_revisions_keep.
const MaxRevisionsKeep = 10_000

// Retention is how long the tenant's data is kept (see docs/tenants.md,
// Retention). Every period is off (0) by default: nothing is removed for
// its age unless the tenant asks.
type Retention struct {
	// SessionsIdleDays erases a session whole once it has had no activity
	// for this many days (0: never).
	SessionsIdleDays int `json:"sessions_idle_days"`
	// ToolResultsDays deletes the full text of offloaded tool results this
	// many days after they were stored (0: never); the preview in context
	// stays.
	ToolResultsDays int `json:"tool_results_days"`
	// MemoryRevisionsDays deletes a memory's revisions older than this many
	// days (0: never), except its last MemoryRevisionsKeep and the live one.
	MemoryRevisionsDays int `json:"memory_revisions_days"`
	MemoryRevisionsKeep int `json:"memory_revisions_keep"`
}

// On reports whether any rule of the tenant's retention is on.
func (r Retention) On() bool {
	return r.SessionsIdleDays > 0 || r.ToolResultsDays > 0 || r.MemoryRevisionsDays > 0
}

// Validate reports settings that cannot work.
func (r Retention) Validate() error {
	var errs []error
	for _, d := range []struct {
		name string
		days int
	}{{"sessions_idle_days", r.SessionsIdleDays}, {"tool_results_days", r.ToolResultsDays}, {"memory_revisions_days", r.MemoryRevisionsDays}} {
		if d.days < 0 || d.days > MaxRetentionDays {
			errs = append(errs, fmt.Errorf("retention: %s must be 0 (off) to %d days, got %d", d.name, MaxRetentionDays, d.days))
		}
	}
	if r.MemoryRevisionsKeep < 0 || r.MemoryRevisionsKeep > MaxRevisionsKeep {
		errs = append(errs, fmt.Errorf("retention: memory_revisions_keep must be 0 to %d, got %d", MaxRevisionsKeep, r.MemoryRevisionsKeep))
	}
	if r.MemoryRevisionsKeep > 0 && r.MemoryRevisionsDays == 0 {
		errs = append(errs, fmt.Errorf("retention: memory_revisions_keep (%d) needs memory_revisions_days: with it 0 no revision is deleted", r.MemoryRevisionsKeep))
	}
	return errors.Join(errs...)
}
