package tenantcfg

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// Extraction holds a tenant's long-term memory extraction settings
// (see docs/memory.md).
type Extraction struct {
	// Enabled turns extraction on for the tenant's sessions.
	Enabled bool `json:"enabled"`
	// Subagents extracts from every agent's finished turns too; by default
	// only the main agent's are looked at.
	Subagents bool `json:"subagents"`
	// EveryTurns runs extraction on every N-th eligible turn (a main-agent
	// round that closes a user turn); the turns in between only count.
	EveryTurns int `json:"every_turns"`
	// MaxTurns bounds the model turns of one run (at most 5).
	MaxTurns int `json:"max_turns"`
	// WriteScope lists scope kinds in order of preference: a session's
	// extractions write to the first of them its turn events name.
	WriteScope ScopeKinds `json:"write_scope"`
}

// ScopeKinds is a list of scope kinds. A tenant's list replaces the
// default one whole.
type ScopeKinds []memory.Kind

// UnmarshalJSON reads the list into a slice of its own: decoding into the
// default's would write over the defaults every tenant shares.
func (k *ScopeKinds) UnmarshalJSON(data []byte) error {
	var kinds []memory.Kind
	if err := json.Unmarshal(data, &kinds); err != nil {
		return err
	}
	*k = kinds
	return nil
}

// MaxExtractionTurns is the most model turns a run may take.
const MaxExtractionTurns = 5

// DefaultExtraction holds the design's numbers, and writes to the
// session's project scope, else its user, local or agent scope.
func DefaultExtraction() Extraction {
	return Extraction{
		Enabled:    true,
		EveryTurns: 1,
		MaxTurns:   MaxExtractionTurns,
		WriteScope: ScopeKinds{memory.KindProject, memory.KindUser, memory.KindLocal, memory.KindAgent},
	}
}

// Validate reports settings that cannot work.
func (e Extraction) Validate() error {
	var errs []error
	if e.EveryTurns < 1 {
		errs = append(errs, fmt.Errorf("extraction.every_turns %d: must be at least 1", e.EveryTurns))
	}
	if e.MaxTurns < 1 || e.MaxTurns > MaxExtractionTurns {
		errs = append(errs, fmt.Errorf("extraction.max_turns %d: must be 1 to %d", e.MaxTurns, MaxExtractionTurns))
	}
	if len(e.WriteScope) == 0 {
		errs = append(errs, errors.New("extraction.write_scope: name at least one scope kind (project, user, local, agent)"))
	}
	for i, k := range e.WriteScope {
		if !slices.Contains(memory.Kinds, k) {
			errs = append(errs, fmt.Errorf("extraction.write_scope: %q is not a scope kind (project, user, local, agent)", k))
		} else if slices.Contains(e.WriteScope[:i], k) {
			errs = append(errs, fmt.Errorf("extraction.write_scope: %q is named twice", k))
		}
	}
	return errors.Join(errs...)
}

// Scope is the scope a session's extractions write to: of the scopes its
// turn event names (memory_scope), the first kind of WriteScope; ok is
// false when it names none of them.
func (e Extraction) Scope(memoryScope map[string]string) (scope memory.Scope, ok bool) {
	named := memory.ScopesOf(memoryScope)
	for _, k := range e.WriteScope {
		for _, s := range named {
			if s.Kind == k {
				return s, true
			}
		}
	}
	return memory.Scope{}, false
}
