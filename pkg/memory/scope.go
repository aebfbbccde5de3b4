package memory

import (
	"strings"
)

// Kind is the kind of a scope.
type Kind string

// The kinds of scope, in the order a session's context shows them.
const (
	// KindUser: one end user, across their projects.
	KindUser Kind = "user"
	// KindProject: one project, shared by everyone working on it.
	KindProject Kind = "project"
	// KindLocal: one user's private notes about one project (one checkout).
	KindLocal Kind = "local"
	// KindAgent: one agent type (a sub-agent's role), across sessions.
	KindAgent Kind = "agent"
)

// Kinds lists every kind, in the order a session's context shows them.
var Kinds = []Kind{KindUser, KindProject, KindLocal, KindAgent}

// MaxScopeIDLen is the longest scope id, as the turn event's schema allows.
const MaxScopeIDLen = 128

// Scope is where memories live: one user, project, local checkout or agent
// type of a tenant. It is written "<kind>:<id>", e.g. "user:u-42", and ids
// follow the turn event's memory_scope rule: letters, digits, '_' and '-',
// starting with a letter or a digit, at most 128 bytes.
type Scope struct {
	Kind Kind
	ID   string
}

// NewScope validates a kind and an id.
func NewScope(kind Kind, id string) (Scope, error) {
	known := false
	for _, k := range Kinds {
		known = known || k == kind
	}
	if !known {
		return Scope{}, Refuse(ReasonBadScope, "scope kind %q is not one of user, project, local, agent", clip(string(kind)))
	}
	if !validID(id) {
		return Scope{}, Refuse(ReasonBadScope, "scope id %q: ids are 1 to %d letters, digits, '_' and '-', starting with a letter or a digit", clip(id), MaxScopeIDLen)
	}
	return Scope{Kind: kind, ID: id}, nil
}

// ParseScope reads "<kind>:<id>".
func ParseScope(s string) (Scope, error) {
	kind, id, ok := strings.Cut(s, ":")
	if !ok {
		return Scope{}, Refuse(ReasonBadScope, "scope %q: write it as user:<id>, project:<id>, local:<id> or agent:<type>", clip(s))
	}
	return NewScope(Kind(kind), id)
}

func (s Scope) String() string { return string(s.Kind) + ":" + s.ID }

// IsZero reports whether s is the zero Scope.
func (s Scope) IsZero() bool { return s == Scope{} }

// Dir is the scope's directory when its memories are laid out as files
// ("memory/user/u-42"); every scope has its own.
func (s Scope) Dir() string { return "memory/" + string(s.Kind) + "/" + s.ID }

// Path is where a memory's file lies in that layout: Dir, then the file.
func (s Scope) Path(n Name) string { return s.Dir() + "/" + n.File() }

// IndexPath is where the scope's index lies in that layout.
func (s Scope) IndexPath() string { return s.Dir() + "/MEMORY.md" }

// ScopesOf returns the scopes a turn event's memory_scope names, in the
// order of Kinds: its keys "user", "project", "local" and "agent" (the agent
// type). Keys it does not know and ids that are not valid are left out.
func ScopesOf(memoryScope map[string]string) []Scope {
	var out []Scope
	for _, k := range Kinds {
		id, ok := memoryScope[string(k)]
		if !ok {
			continue
		}
		if s, err := NewScope(k, id); err == nil {
			out = append(out, s)
		}
	}
	return out
}

func validID(id string) bool {
	if id == "" || len(id) > MaxScopeIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '-') {
			return false
		}
	}
	return true
}
