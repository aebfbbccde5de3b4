package events

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/mnemos-ai/mnemos/pkg/bus"
)

// Event is what every event Mnemos publishes declares about itself: its
// kind (the subject's leading tokens), the tenant and session (or dream) its
// subject ends with, and the message id it is published with. The id is
// derived from what caused the event, so publishing the same event again
// (a retried transaction, a redelivered cause) is dropped by JetStream.
type Event interface {
	Kind() string
	Address() (tenant, session string)
	MsgID() string
}

// checker is an event that can tell a payload no producer would write.
type checker interface {
	Check() error
}

// Handler adapts handle to a bus.Handler for events of type T: it parses
// the subject, decodes the payload, checks that the payload names the
// subject's tenant and session and that it passes its own Check, and marks
// a failure of any of these permanent (the message can never succeed).
// handle gets the subject's tenant and session through ev.Address.
func Handler[T Event](b *bus.Bus, handle func(ctx context.Context, m bus.Message, ev T) error) bus.Handler {
	return func(ctx context.Context, m bus.Message) error {
		ev, err := Read[T](b, m)
		if err != nil {
			return bus.Permanent(err)
		}
		return handle(ctx, m, ev)
	}
}

// Read decodes and checks one message the way Handler does.
func Read[T Event](b *bus.Bus, m bus.Message) (T, error) {
	var ev T
	kind, tenant, session, err := b.ParseSubject(m.Subject)
	if err != nil {
		return ev, fmt.Errorf("subject %q: %w", m.Subject, err)
	}
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		return ev, fmt.Errorf("%s: %w", kind, err)
	}
	if c, ok := any(ev).(checker); ok {
		if err := c.Check(); err != nil {
			return ev, fmt.Errorf("%s: %w", kind, err)
		}
	}
	if ev.Kind() != kind {
		return ev, fmt.Errorf("%s arrived on a %s subject", ev.Kind(), kind)
	}
	if t, s := ev.Address(); t != tenant || s != session {
		return ev, fmt.Errorf("%s for %s/%s arrived on the subject of %s/%s", kind, t, s, tenant, session)
	}
	return ev, nil
}

// Trigger is what started a compaction.
type Trigger = string

// The triggers.
const (
	TriggerAuto   Trigger = "auto"
	TriggerManual Trigger = "manual"
	// TriggerPreflight: a caller asked, before its next model call, for the
	// compaction the input it is about to send makes due.
	TriggerPreflight Trigger = "preflight"
)

// AutoCompactionID names the compaction of a session's automatic request
// number request, so a redelivered request, or a caller joining it, finds
// the compaction it made.
func AutoCompactionID(tenant, session string, request int64) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, fmt.Appendf(nil, "mnemos:compaction:%s/%s/%d", tenant, session, request)).String()
}

// Direction of a partial compaction around a pivot message.
type Direction = string

// The directions: "from" summarizes what follows the pivot and keeps the
// cached prefix before it; "up_to" summarizes up to the pivot and keeps
// what follows.
const (
	DirectionFrom Direction = "from"
	DirectionUpTo Direction = "up_to"
)

// Method is how a compaction made its summary.
type Method = string

// The methods, cheapest first.
const (
	MethodSessionMemory Method = "session_memory"
	MethodFull          Method = "full"
	MethodExtractive    Method = "extractive"
)

// Kind, Address and MsgID of each event.

// Kind of TurnAccounted is the leading tokens of its subject.
func (e TurnAccounted) Kind() string { return bus.KindTurnAccounted }

// Address of TurnAccounted is the tenant and session its subject ends with.
func (e TurnAccounted) Address() (tenant, session string) { return e.TenantID, e.SessionID }

// MsgID of TurnAccounted is derived from what caused it.
func (e TurnAccounted) MsgID() string { return "accounted:" + e.EventID }

// Check refuses what the accountant never writes: another schema, a seq
// below 1 or a negative number.
func (e TurnAccounted) Check() error {
	switch {
	case e.Schema != SchemaTurnAccounted:
		return fmt.Errorf("unknown schema %q", e.Schema)
	case e.Seq <= 0 || e.Tokens.Count < 0 || e.ToolCalls < 0 || e.ToolCallsTotal < 0:
		return fmt.Errorf("seq %d, count %d, tool calls %d of %d: want a positive seq and no negative number",
			e.Seq, e.Tokens.Count, e.ToolCalls, e.ToolCallsTotal)
	}
	return nil
}

// Kind of ContextThreshold is the leading tokens of its subject.
func (e ContextThreshold) Kind() string { return bus.KindContextThreshold }

// Address of ContextThreshold is the tenant and session its subject ends with.
func (e ContextThreshold) Address() (tenant, session string) { return e.TenantID, e.SessionID }

// MsgID names the change of state by its cause: the turn or the compaction.
func (e ContextThreshold) MsgID() string {
	if e.CompactionID != "" {
		return "threshold:compaction:" + e.CompactionID
	}
	return "threshold:" + e.EventID
}

// Kind of CompactRequested is the leading tokens of its subject.
func (e CompactRequested) Kind() string { return bus.KindCompactRequested }

// Address of CompactRequested is the tenant and session its subject ends with.
func (e CompactRequested) Address() (tenant, session string) { return e.TenantID, e.SessionID }

// MsgID names a manual request by its compaction, an automatic one by the
// session's request number.
func (e CompactRequested) MsgID() string {
	if e.CompactionID != "" {
		return "compact:manual:" + e.CompactionID
	}
	return fmt.Sprintf("compact:%s:%s:%d", e.TenantID, e.SessionID, e.Request)
}

// Check refuses a request that names neither a compaction nor a request number.
func (e CompactRequested) Check() error {
	if e.CompactionID == "" && e.Request <= 0 {
		return fmt.Errorf("names neither a compaction nor a request number")
	}
	return nil
}

// Kind of CompactCompleted is the leading tokens of its subject.
func (e CompactCompleted) Kind() string { return bus.KindCompactCompleted }

// Address of CompactCompleted is the tenant and session its subject ends with.
func (e CompactCompleted) Address() (tenant, session string) { return e.TenantID, e.SessionID }

// MsgID of CompactCompleted is derived from what caused it.
func (e CompactCompleted) MsgID() string { return "compacted:" + e.CompactionID }

// Kind of CompactFailed is the leading tokens of its subject.
func (e CompactFailed) Kind() string { return bus.KindCompactFailed }

// Address of CompactFailed is the tenant and session its subject ends with.
func (e CompactFailed) Address() (tenant, session string) { return e.TenantID, e.SessionID }

// MsgID of CompactFailed is derived from what caused it.
func (e CompactFailed) MsgID() string { return "compact-failed:" + e.CompactionID }

// Kind of CircuitOpened is the leading tokens of its subject.
func (e CircuitOpened) Kind() string { return bus.KindCircuitOpened }

// Address of CircuitOpened is the tenant and session its subject ends with.
func (e CircuitOpened) Address() (tenant, session string) { return e.TenantID, e.SessionID }

// MsgID of CircuitOpened is derived from what caused it.
func (e CircuitOpened) MsgID() string { return "circuit:" + e.CompactionID }

// Kind of SessionMemoryUpdated is the leading tokens of its subject.
func (e SessionMemoryUpdated) Kind() string { return bus.KindSessionMemoryUpdated }

// Address of SessionMemoryUpdated is the tenant and session its subject ends with.
func (e SessionMemoryUpdated) Address() (tenant, session string) { return e.TenantID, e.SessionID }

// MsgID of SessionMemoryUpdated is derived from what caused it.
func (e SessionMemoryUpdated) MsgID() string {
	return fmt.Sprintf("notes:%s:%s:%d", e.TenantID, e.SessionID, e.Version)
}

// Kind of MemorySaved is the leading tokens of its subject.
func (e MemorySaved) Kind() string { return bus.KindMemorySaved }

// Address of MemorySaved is the tenant and session its subject ends with.
func (e MemorySaved) Address() (tenant, session string) { return e.TenantID, e.SessionID }

// MsgID of MemorySaved is derived from what caused it.
func (e MemorySaved) MsgID() string { return "memory-saved:" + e.RunID }

// Kind of a dream event is its state's: "dream.<state>".
func (e Dream) Kind() string { return "dream." + e.State }

// Address of Dream is the tenant and session its subject ends with.
func (e Dream) Address() (tenant, session string) { return e.TenantID, e.DreamID }

// MsgID names a dream's state; a proposal approved completes it a second time.
func (e Dream) MsgID() string {
	id := fmt.Sprintf("dream:%s:%s:%s", e.TenantID, e.DreamID, e.State)
	if e.Approved {
		id += ":approved"
	}
	return id
}
