// Package events defines the payloads Mnemos services publish to each other.
// Each is JSON with a "schema" naming its version.
package events

import (
	"time"

	"github.com/mnemos-ai/mnemos/api"
)

// Schema names of the events below.
const (
	SchemaTurnAccounted    = "mnemos.turn_accounted.v1"
	SchemaContextThreshold = "mnemos.context_threshold.v1"
	SchemaCompactRequested = "mnemos.compact_requested.v1"
	SchemaCompactCompleted = "mnemos.compact_completed.v1"
	SchemaCompactFailed    = "mnemos.compact_failed.v1"
	SchemaCircuitOpened    = "mnemos.compact_circuit_opened.v1"

	SchemaSessionMemoryUpdated = "mnemos.session_memory_updated.v1"
	SchemaMemorySaved          = "mnemos.memory_saved.v1"

	SchemaDream = "mnemos.dream.v1"
)

// Tokens is a session's token state as the accountant sees it: the
// events carry it as the API answers it, one type for both.
type Tokens = api.Tokens

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
	Schema    string `json:"schema"`
	TenantID  string `json:"tenant_id"`
	SessionID string `json:"session_id"`
	// EventID is the turn event that changed the state, or CompactionID
	// the compaction that did.
	EventID       string    `json:"event_id,omitempty"`
	CompactionID  string    `json:"compaction_id,omitempty"`
	Seq           int64     `json:"seq"`
	PreviousState string    `json:"previous_state"`
	Tokens        Tokens    `json:"tokens"`
	At            time.Time `json:"at"`
}

// CompactRequested asks the compactor to compact a session.
type CompactRequested struct {
	Schema    string `json:"schema"`
	TenantID  string `json:"tenant_id"`
	SessionID string `json:"session_id"`
	Seq       int64  `json:"seq"`
	Request   int64  `json:"request"`
	// CompactionID names the compaction a manual request created; auto
	// requests leave it empty and the compactor creates one per Request.
	CompactionID string    `json:"compaction_id,omitempty"`
	Trigger      string    `json:"trigger"`
	Tokens       Tokens    `json:"tokens"`
	At           time.Time `json:"at"`
}

// CompactCompleted announces a compaction that changed the session's context.
type CompactCompleted struct {
	Schema       string    `json:"schema"`
	TenantID     string    `json:"tenant_id"`
	SessionID    string    `json:"session_id"`
	CompactionID string    `json:"compaction_id"`
	Trigger      string    `json:"trigger"`
	Method       string    `json:"method"`
	Direction    string    `json:"direction,omitempty"`
	PreTokens    int64     `json:"pre_tokens"`
	PostTokens   int64     `json:"post_tokens"`
	LLMCalls     int       `json:"llm_calls"`
	Tokens       Tokens    `json:"tokens"`
	At           time.Time `json:"at"`
}

// CompactFailed announces a compaction that ended without changing the context.
type CompactFailed struct {
	Schema       string    `json:"schema"`
	TenantID     string    `json:"tenant_id"`
	SessionID    string    `json:"session_id"`
	CompactionID string    `json:"compaction_id"`
	Trigger      string    `json:"trigger"`
	Reason       string    `json:"reason"`
	At           time.Time `json:"at"`
}

// CircuitOpened announces that a session's LLM compactions failed too often
// in a row: its automatic compactions use the extractive summary from now on.
type CircuitOpened struct {
	Schema    string `json:"schema"`
	TenantID  string `json:"tenant_id"`
	SessionID string `json:"session_id"`
	// CompactionID is the compaction whose failure opened the circuit.
	CompactionID string    `json:"compaction_id"`
	Failures     int       `json:"failures"`
	LastError    string    `json:"last_error"`
	At           time.Time `json:"at"`
}

// SessionMemoryUpdated announces a new version of a session's notes.
type SessionMemoryUpdated struct {
	Schema    string `json:"schema"`
	TenantID  string `json:"tenant_id"`
	SessionID string `json:"session_id"`
	Version   int64  `json:"version"`
	// LastSummarizedMessage is the uuid of the last message the notes cover.
	LastSummarizedMessage string `json:"last_summarized_message"`
	// TokensAtUpdate and ToolCallsAtUpdate are the session's count and tool
	// calls the update read.
	TokensAtUpdate    int64 `json:"tokens_at_update"`
	ToolCallsAtUpdate int64 `json:"tool_calls_at_update"`
	// Sections are the headings whose content changed.
	Sections    []string  `json:"sections"`
	LLMProvider string    `json:"llm_provider"`
	LLMModel    string    `json:"llm_model,omitempty"`
	At          time.Time `json:"at"`
}

// MemorySaved announces long-term memories the extractor wrote after a
// user turn. None is published when a run wrote nothing.
type MemorySaved struct {
	Schema    string `json:"schema"`
	TenantID  string `json:"tenant_id"`
	SessionID string `json:"session_id"`
	// Scope is the scope written to ("project:repo-x").
	Scope string `json:"scope"`
	// Created and Updated name the memories the run wrote, each once: those
	// it made, and those that existed and it changed.
	Created []string `json:"created"`
	Updated []string `json:"updated"`
	// IndexChanged is set when the run edited the scope's index itself.
	IndexChanged bool `json:"index_changed,omitempty"`
	// RunID names the extractor run that wrote them.
	RunID string `json:"run_id"`
	// SourceTurn is the event id of the turn the run was for, Seq its seq;
	// the run read the session's messages since the previous run through it.
	SourceTurn  string    `json:"source_turn"`
	Seq         int64     `json:"seq"`
	LLMProvider string    `json:"llm_provider"`
	LLMModel    string    `json:"llm_model,omitempty"`
	At          time.Time `json:"at"`
}

// Dream is the progress of one consolidation of a scope's memories, on
// "dream.<state>.<tenant>.<dream id>": requested (an operator asked for
// it), starting, updating (its first change), then completed, failed,
// killed or proposed (it would delete or rewrite more than its share, so
// it applied nothing and waits for approval); completed again with
// Approved when a proposal is approved.
type Dream struct {
	Schema   string `json:"schema"`
	TenantID string `json:"tenant_id"`
	DreamID  string `json:"dream_id"`
	Scope    string `json:"scope"`
	// Trigger is scheduled or manual.
	Trigger string `json:"trigger"`
	// State is the last token of the kind: requested, starting, …
	State string `json:"state"`
	// Memories are the memories touched so far (written and deleted, or
	// proposed to be); Written and Deleted split them.
	Memories []string `json:"memories,omitempty"`
	Written  []string `json:"written,omitempty"`
	Deleted  []string `json:"deleted,omitempty"`
	// Destructive is how many live memories the run deletes or rewrites;
	// Allowed how many it may without approval.
	Destructive int  `json:"destructive,omitempty"`
	Allowed     int  `json:"allowed,omitempty"`
	Approved    bool `json:"approved,omitempty"`
	// Reason says why a dream failed or was killed.
	Reason      string    `json:"reason,omitempty"`
	LLMProvider string    `json:"llm_provider,omitempty"`
	At          time.Time `json:"at"`
}
