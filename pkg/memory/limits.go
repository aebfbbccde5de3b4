package memory

import (
	"errors"
	"fmt"
)

// Limits are a tenant's memory numbers (tenant settings "memory").
type Limits struct {
	// IndexMaxLines and IndexMaxBytes bound how much of a scope's index a
	// context loads; what is past either is cut, with a warning line.
	IndexMaxLines int `json:"index_max_lines"`
	IndexMaxBytes int `json:"index_max_bytes"`
	// IndexLineMaxChars bounds one index line, in characters.
	IndexLineMaxChars int `json:"index_line_max_chars"`
	// MaxBytes bounds one memory document (frontmatter and body).
	MaxBytes int `json:"max_bytes"`
}

// DefaultLimits holds the design's numbers (and 16 KiB per memory: memories
// are small, recall shows at most 4,096 bytes of one).
func DefaultLimits() Limits {
	return Limits{IndexMaxLines: 200, IndexMaxBytes: 25_000, IndexLineMaxChars: 150, MaxBytes: 16 << 10}
}

// minLineChars is the shortest line limit that still fits the default line
// of the longest name ("- [name](name.md) — …").
const minLineChars = 2*MaxNameLen + len("- [](.md) — ") + 2

// Validate reports limits that cannot work.
func (l Limits) Validate() error {
	var errs []error
	if l.IndexMaxLines < 1 {
		errs = append(errs, fmt.Errorf("memory.index_max_lines %d: must be at least 1", l.IndexMaxLines))
	}
	if l.IndexMaxBytes < 1_000 {
		errs = append(errs, fmt.Errorf("memory.index_max_bytes %d: must be at least 1000", l.IndexMaxBytes))
	}
	if l.IndexLineMaxChars < minLineChars {
		errs = append(errs, fmt.Errorf("memory.index_line_max_chars %d: must be at least %d, so every name fits", l.IndexLineMaxChars, minLineChars))
	}
	if l.MaxBytes < 1_000 {
		errs = append(errs, fmt.Errorf("memory.max_bytes %d: must be at least 1000", l.MaxBytes))
	}
	return errors.Join(errs...)
}
