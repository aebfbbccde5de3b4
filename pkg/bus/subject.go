package bus

import (
	"errors"
	"fmt"
	"strings"
)

// Event kinds: the leading tokens of a subject. A subject is
// "<kind>.<tenant>.<session>".
const (
	KindTurnCompleted        = "turn.completed"
	KindTurnAccounted        = "turn.accounted"
	KindContextThreshold     = "context.threshold"
	KindCompactRequested     = "compact.requested"
	KindCompactCompleted     = "compact.completed"
	KindCompactFailed        = "compact.failed"
	KindCircuitOpened        = "compact.circuit_opened"
	KindSessionMemoryUpdated = "session_memory.updated"
	KindMemorySaved          = "memory.saved"

	// A consolidation's progress: "dream.<state>.<tenant>.<dream id>".
	KindDreamRequested = "dream.requested"
	KindDreamStarting  = "dream.starting"
	KindDreamUpdating  = "dream.updating"
	KindDreamCompleted = "dream.completed"
	KindDreamFailed    = "dream.failed"
	KindDreamKilled    = "dream.killed"
	KindDreamProposed  = "dream.proposed"
)

// deadLetterPrefix leads the subject of every dead letter:
// "deadletter.<original subject>".
const deadLetterPrefix = "deadletter."

// Subject returns "<kind>.<tenant>.<session>", without any namespace; use
// Bus.Subject for the subject to publish on. Tenant and session must be
// valid tokens (see ValidToken), or the subject will not parse back.
func Subject(kind, tenant, session string) string {
	return kind + "." + tenant + "." + session
}

// MsgID scopes a message id to its tenant: "<tenant>:<id>". JetStream
// deduplicates Nats-Msg-Id across every subject of a stream, so an id chosen
// by a tenant (an event_id) would otherwise make another tenant's message
// with the same id a duplicate, and drop it. Tenants are tokens without ':',
// so the scoped id is unambiguous.
func MsgID(tenant, id string) string {
	return tenant + ":" + id
}

// ParseSubject splits "<kind>.<tenant>.<session>" into its parts: the last
// two tokens are the tenant and the session, everything before them the kind.
// The subject must not carry a namespace; use Bus.ParseSubject for subjects
// received from the bus.
func ParseSubject(subject string) (kind, tenant, session string, err error) {
	last := strings.LastIndexByte(subject, '.')
	if last < 0 {
		return "", "", "", fmt.Errorf("bus.ParseSubject: %q: want <kind>.<tenant>.<session>", subject)
	}
	mid := strings.LastIndexByte(subject[:last], '.')
	if mid < 0 {
		return "", "", "", fmt.Errorf("bus.ParseSubject: %q: want <kind>.<tenant>.<session>", subject)
	}
	kind, tenant, session = subject[:mid], subject[mid+1:last], subject[last+1:]
	for _, tok := range strings.Split(kind, ".") {
		if !ValidToken(tok) {
			return "", "", "", fmt.Errorf("bus.ParseSubject: %q: invalid kind", subject)
		}
	}
	if !ValidToken(tenant) || !ValidToken(session) {
		return "", "", "", fmt.Errorf("bus.ParseSubject: %q: invalid tenant or session", subject)
	}
	return kind, tenant, session, nil
}

// ValidToken reports whether s can be one token of a subject: not empty, no
// dot, no wildcard, no whitespace or control character.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r == '.' || r == '*' || r == '>':
			return false
		case r <= ' ' || r == 0x7f:
			return false
		}
	}
	return true
}

// validNamespace reports whether ns can prefix both subjects and stream names.
func validNamespace(ns string) error {
	for _, r := range ns {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (r < '0' || r > '9') && r != '_' && r != '-' {
			return errors.New("namespace may only hold letters, digits, '_' and '-'")
		}
	}
	return nil
}

// Subject returns the subject to publish an event of the given kind on,
// namespace included.
func (b *Bus) Subject(kind, tenant, session string) string {
	return b.prefix(Subject(kind, tenant, session))
}

// ParseSubject is ParseSubject for a subject received from this bus: it
// strips the namespace first.
func (b *Bus) ParseSubject(subject string) (kind, tenant, session string, err error) {
	s, ok := b.strip(subject)
	if !ok {
		return "", "", "", fmt.Errorf("bus.ParseSubject: %q: not in namespace %q", subject, b.ns)
	}
	return ParseSubject(s)
}

// StreamName returns the name of a stream declared by EnsureStreams
// (StreamTurns, ...) as it exists on the server, namespace included.
func (b *Bus) StreamName(name string) string {
	if b.ns == "" {
		return name
	}
	return strings.ToUpper(b.ns) + "_" + name
}

// prefix puts the namespace in front of an unprefixed subject or filter.
func (b *Bus) prefix(subject string) string {
	if b.ns == "" {
		return subject
	}
	return b.ns + "." + subject
}

// strip removes the namespace from a full subject. It reports false when the
// subject is outside the namespace.
func (b *Bus) strip(subject string) (string, bool) {
	if b.ns == "" {
		return subject, true
	}
	return strings.CutPrefix(subject, b.ns+".")
}

// kindOf returns the kind of a full subject, for span names and logs. A
// subject that does not parse is returned without its namespace.
func (b *Bus) kindOf(subject string) string {
	s, _ := b.strip(subject)
	if kind, _, _, err := ParseSubject(s); err == nil {
		return kind
	}
	return s
}
