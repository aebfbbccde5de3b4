package recall

import (
	"errors"
	"fmt"
	"time"
)

// Settings are a tenant's recall numbers (tenant settings "recall").
type Settings struct {
	// Enabled turns recall on: the API and the prefetch.
	Enabled bool `json:"enabled"`
	// Prefetch runs recall on ingest for each new user message of more than
	// one word, and shows what it surfaced beside that message in the context.
	Prefetch bool `json:"prefetch"`
	// PrefetchWaitMS bounds how long a context request waits, after the
	// latest user message was stored, for its prefetch to be recorded before
	// it renders the message without (0: never waits).
	PrefetchWaitMS int64 `json:"prefetch_wait_ms"`
	// Candidates is how many memory headers the selector sees: the most
	// recently updated of the session's scopes.
	Candidates int `json:"candidates"`
	// MaxMemories bounds the memories one recall surfaces.
	MaxMemories int `json:"max_memories"`
	// MaxLines and MaxBytes bound what is shown of one memory; the rest is
	// cut, with a note.
	MaxLines int `json:"max_lines"`
	MaxBytes int `json:"max_bytes"`
	// SessionBytes is what recall surfaces in a session between two
	// compactions (the reminders' bytes) before it stops: the memory that
	// crosses it is still shown, none after it.
	SessionBytes int64 `json:"session_bytes"`
	// StaleDays is the age, in days, from which a surfaced memory carries
	// the note that it is a point-in-time observation to verify.
	StaleDays int `json:"stale_days"`
	// RecentRounds is how many of the latest rounds a prefetch looks at for
	// the tools just used.
	RecentRounds int `json:"recent_rounds"`
}

// DefaultSettings holds the design's numbers.
func DefaultSettings() Settings {
	return Settings{
		Enabled:        true,
		Prefetch:       true,
		PrefetchWaitMS: 3_000,
		Candidates:     200,
		MaxMemories:    5,
		MaxLines:       200,
		MaxBytes:       4_096,
		SessionBytes:   60 << 10,
		StaleDays:      2,
		RecentRounds:   3,
	}
}

// PrefetchWait is PrefetchWaitMS as a duration.
func (s Settings) PrefetchWait() time.Duration {
	return time.Duration(s.PrefetchWaitMS) * time.Millisecond
}

// Validate reports settings that cannot work.
func (s Settings) Validate() error {
	var errs []error
	if s.PrefetchWaitMS < 0 || s.PrefetchWaitMS > 60_000 {
		errs = append(errs, fmt.Errorf("recall.prefetch_wait_ms %d: must be between 0 and 60000", s.PrefetchWaitMS))
	}
	if s.Candidates < 1 || s.Candidates > 1_000 {
		errs = append(errs, fmt.Errorf("recall.candidates %d: must be between 1 and 1000", s.Candidates))
	}
	if s.MaxMemories < 1 || s.MaxMemories > 20 {
		errs = append(errs, fmt.Errorf("recall.max_memories %d: must be between 1 and 20", s.MaxMemories))
	}
	if s.MaxLines < 1 {
		errs = append(errs, fmt.Errorf("recall.max_lines %d: must be at least 1", s.MaxLines))
	}
	if s.MaxBytes < 256 {
		errs = append(errs, fmt.Errorf("recall.max_bytes %d: must be at least 256", s.MaxBytes))
	}
	if s.SessionBytes < 0 {
		errs = append(errs, fmt.Errorf("recall.session_bytes %d: must not be negative", s.SessionBytes))
	}
	if s.StaleDays < 1 {
		errs = append(errs, fmt.Errorf("recall.stale_days %d: must be at least 1", s.StaleDays))
	}
	if s.RecentRounds < 1 || s.RecentRounds > 100 {
		errs = append(errs, fmt.Errorf("recall.recent_rounds %d: must be between 1 and 100", s.RecentRounds))
	}
	return errors.Join(errs...)
}
