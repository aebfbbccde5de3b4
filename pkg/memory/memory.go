// Package memory is Mnemos's long-term memory (see docs/memory.md): small markdown
// documents with frontmatter, kept per scope, each change a revision, and
// per scope an index (MEMORY.md) kept in step with the memories.
//
// The pure parts — names, scopes, documents, index lines, truncation, the
// memory section of a context — need no I/O. Store puts them on Postgres
// (pkg/store): every write, deletion and rollback takes the scope's index
// lock, records a revision and updates the index in one transaction.
package memory

import (
	"errors"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Type is what a memory is about.
type Type string

// The four types of memory.
const (
	// TypeUser: who the user is, their role, expertise and preferences.
	TypeUser Type = "user"
	// TypeFeedback: how to work, as the user corrected or confirmed it.
	TypeFeedback Type = "feedback"
	// TypeProject: facts about ongoing work not derivable from the code.
	TypeProject Type = "project"
	// TypeReference: where information lives outside the conversation.
	TypeReference Type = "reference"
)

// Types lists every type.
var Types = []Type{TypeUser, TypeFeedback, TypeProject, TypeReference}

// ParseType returns the type named s, or a bad_type refusal.
func ParseType(s string) (Type, error) {
	for _, t := range Types {
		if string(t) == s {
			return t, nil
		}
	}
	return "", Refuse(ReasonBadType, "type %q is not one of user, feedback, project, reference", s)
}

// Actor says who made a change.
type Actor string

// The actors of changes.
const (
	// ActorAgent: the session's main agent, through the API, naming its session.
	ActorAgent Actor = "agent"
	// ActorExtractor: the extractor, after a user turn.
	ActorExtractor Actor = "extractor"
	// ActorDreamer: the dreamer, consolidating a scope.
	ActorDreamer Actor = "dreamer"
	// ActorAPI: anyone else through the API (an operator, a platform's UI).
	ActorAPI Actor = "api"
	// ActorImport: an import of a scope's archive (Store.Import).
	ActorImport Actor = "import"
)

// Valid reports whether a is one of the actors.
func (a Actor) Valid() bool {
	switch a {
	case ActorAgent, ActorExtractor, ActorDreamer, ActorAPI, ActorImport:
		return true
	}
	return false
}

// Op is what a revision did to its memory.
type Op string

// The operations a revision records.
const (
	OpCreated  Op = "created"
	OpUpdated  Op = "updated"
	OpDeleted  Op = "deleted"
	OpRestored Op = "restored"
)

// Reason names why a request was refused. Reasons are stable: they are the
// API's error codes and the metric's label.
type Reason string

// Refusal reasons.
const (
	ReasonBadScope         Reason = "bad_scope"
	ReasonBadName          Reason = "bad_name"
	ReasonOutOfScope       Reason = "out_of_scope"
	ReasonBadFrontmatter   Reason = "bad_frontmatter"
	ReasonBadType          Reason = "bad_type"
	ReasonBadDescription   Reason = "bad_description"
	ReasonBadBody          Reason = "bad_body"
	ReasonInvalidUTF8      Reason = "invalid_utf8"
	ReasonTooLarge         Reason = "too_large"
	ReasonNameMismatch     Reason = "name_mismatch"
	ReasonBadIndex         Reason = "bad_index"
	ReasonRevisionMismatch Reason = "revision_mismatch"
	ReasonBadChange        Reason = "bad_change"
	ReasonBadEdit          Reason = "bad_edit"
	ReasonBadRequest       Reason = "bad_request"
)

// Error is a refused request: bad input, or a precondition that does not hold.
type Error struct {
	Reason Reason
	Detail string
}

func (e *Error) Error() string { return string(e.Reason) + ": " + e.Detail }

// AsError returns err's *Error when it is (or wraps) one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Refuse makes an *Error.
func Refuse(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// ErrNotFound is returned for a memory, revision or session that does not
// exist (or belongs to another tenant, which is the same to the caller).
var ErrNotFound = store.ErrNotFound

// ErrDeleted is the ErrNotFound of a memory that exists but is deleted
// (a rollback brings it back).
var ErrDeleted = fmt.Errorf("deleted: %w", ErrNotFound)
