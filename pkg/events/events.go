// Package events defines the payloads Mnemos services publish to each other.
// Each is JSON with a "schema" naming its version.
package events

import "time"

// Schema names of the events below.
const (
	SchemaTurnAccounted    = "mnemos.turn_accounted.v1"
	SchemaContextThreshold = "mnemos.context_threshold.v1"
	SchemaCompactRequested = "mnemos.compact_requested.v1"
)

// Tokens is a session's token state as the accountant sees it.
type Tokens struct {
	Count       int64   `json:"count"`
	State       string  `json:"state"`
	PercentLeft float64 `json:"percent_left"`
	Window      int64   `json:"window"`
	Effective   int64   `json:"effective_window"`
	Warning     int64   `json:"warning_threshold"`
	Error       int64   `json:"error_threshold"`
	AutoCompact int64   `json:"autocompact_threshold"`
	Blocking    int64   `json:"blocking_threshold"`
}

// TurnAccounted follows every applied turn event, for the services downstream.
type TurnAccounted struct {
	Schema         string            `json:"schema"`
	EventID        string            `json:"event_id"`
	TenantID       string            `json:"tenant_id"`
	SessionID      string            `json:"session_id"`
	Seq            int64             `json:"seq"`
	AgentID        string            `json:"agent_id"`
	MemoryScope    map[string]string `json:"memory_scope,omitempty"`
	Model          string            `json:"model,omitempty"`
	Tokens         Tokens            `json:"tokens"`
	MessageUUIDs   []string          `json:"message_uuids"`
	ResponseUUID   string            `json:"response_uuid,omitempty"`
	ToolCalls      int               `json:"tool_calls"`
	ToolCallsTotal int64             `json:"tool_calls_total"`
	ClosesUserTurn bool              `json:"closes_user_turn"`
	OffloadedTools []string          `json:"offloaded_tool_results,omitempty"`
	OccurredAt     time.Time         `json:"occurred_at"`
	AccountedAt    time.Time         `json:"accounted_at"`
}

// ContextThreshold is published when a session's threshold state changes.
type ContextThreshold struct {
	Schema        string    `json:"schema"`
	TenantID      string    `json:"tenant_id"`
	SessionID     string    `json:"session_id"`
	Seq           int64     `json:"seq"`
	PreviousState string    `json:"previous_state"`
	Tokens        Tokens    `json:"tokens"`
	At            time.Time `json:"at"`
}

// CompactRequested asks the compactor to compact a session.
type CompactRequested struct {
	Schema    string    `json:"schema"`
	TenantID  string    `json:"tenant_id"`
	SessionID string    `json:"session_id"`
	Seq       int64     `json:"seq"`
	Request   int64     `json:"request"`
	Trigger   string    `json:"trigger"`
	Tokens    Tokens    `json:"tokens"`
	At        time.Time `json:"at"`
}
