package api

import (
	"time"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// SessionImport answers POST /v1/sessions/{id}/import: the events
// published for the accountant, which applies them in seq order as it
// applies any turn event.
type SessionImport struct {
	SessionID string `json:"session_id"`
	// Events is how many events were published, Duplicates how many of
	// them JetStream held already (an import sent again).
	Events     int `json:"events"`
	Duplicates int `json:"duplicates"`
	// Messages is how many messages the events carry.
	Messages int `json:"messages"`
	// FirstSeq and LastSeq are the seqs of the first and last event: the
	// import is applied when the session's applied_seq reaches LastSeq.
	FirstSeq int64 `json:"first_seq"`
	LastSeq  int64 `json:"last_seq"`
}

// TurnAccepted is the answer to POST /v1/turns.
type TurnAccepted struct {
	EventID string `json:"event_id"`
	// Subject is the bus subject the event was published on.
	Subject string `json:"subject"`
	// Duplicate: the event id was seen before; nothing new was published.
	Duplicate bool `json:"duplicate"`
}

// Tokens is a session's token count, its state (ok, warning, error,
// autocompact, blocking) and the thresholds that decide it.
type Tokens struct {
	Count int64  `json:"count"`
	State string `json:"state"`
	// PercentLeft is the percentage (0 to 100) of the auto-compact
	// threshold still free.
	PercentLeft float64 `json:"percent_left"`
	Window      int64   `json:"window"`
	Effective   int64   `json:"effective_window"`
	Warning     int64   `json:"warning_threshold"`
	Error       int64   `json:"error_threshold"`
	AutoCompact int64   `json:"autocompact_threshold"`
	Blocking    int64   `json:"blocking_threshold"`
}

// SeqRange is a range of seqs, both ends included.
type SeqRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Session is a session's token state: the answer to GET
// /v1/sessions/{id}, and an item of SessionList.
type Session struct {
	SessionID          string            `json:"session_id"`
	AgentID            string            `json:"agent_id"`
	Model              string            `json:"model"`
	MemoryScope        map[string]string `json:"memory_scope,omitempty"`
	AppliedSeq         int64             `json:"applied_seq"`
	Messages           int64             `json:"messages"`
	Tokens             Tokens            `json:"tokens"`
	CompactionInFlight bool              `json:"compaction_in_flight"`
	// AutoCompactEnabled is the session's switch (PATCH); AutoCompact
	// whether it compacts by itself: its switch and its tenant's
	// compaction.auto both on.
	AutoCompactEnabled bool  `json:"auto_compact_enabled"`
	AutoCompact        bool  `json:"auto_compact"`
	CompactRequests    int64 `json:"compact_requests"`
	// ThrashHeld counts the turns whose automatic compaction the thrash
	// guard held back.
	ThrashHeld     int64 `json:"thrash_held"`
	ToolCallsTotal int64 `json:"tool_calls_total"`
	// RejectedTurns counts the turns refused, late ones included.
	RejectedTurns int64 `json:"rejected_turns"`
	// SkippedSeqs counts the seqs the session gave up waiting for (the gap
	// timeout); LastSkipped is the last range given up.
	SkippedSeqs    int64      `json:"skipped_seqs"`
	LastSkipped    *SeqRange  `json:"last_skipped,omitempty"`
	LastResponseAt *time.Time `json:"last_response_at,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	// Agents are the conversations the model proxy follows under this
	// session id, oldest first; none for a session no proxy request named.
	Agents []AgentThread `json:"agents,omitempty"`
}

// AgentThread is one conversation the model proxy follows under a session
// id: an agent's thread, stored as the Mnemos session Thread.
type AgentThread struct {
	// AgentID is "main", or derived from the thread's first message
	// ("agent-…", "side-…").
	AgentID string `json:"agent_id"`
	// Kind is main, agent, side, branch or client_compacted.
	Kind   string `json:"kind"`
	Thread string `json:"thread"`
	// Parent and ForkPosition are a branch's: the thread it continues from
	// and the last message it shares with it.
	Parent       string `json:"parent,omitempty"`
	ForkPosition *int64 `json:"fork_position,omitempty"`
	Messages     int64  `json:"messages"`
	Tokens       int64  `json:"tokens"`
	State        string `json:"state"`
	// Live: the agent's thread written to last, the one its next request
	// most likely continues.
	Live      bool      `json:"live"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SessionList is the answer to GET /v1/sessions: a page of the tenant's
// sessions, newest first. NextCursor, "" on the last page, asks for the
// next one.
type SessionList struct {
	Items      []Session `json:"items"`
	NextCursor string    `json:"next_cursor"`
}

// SessionPatch is the body of PATCH /v1/sessions/{id}: the switches to
// set; a field left nil stays.
type SessionPatch struct {
	AutoCompactEnabled *bool `json:"auto_compact_enabled,omitempty"`
}

// PinsRequest is the body of PUT /v1/sessions/{id}/pins: the texts that
// replace the session's pins.
type PinsRequest struct {
	Pins []string `json:"pins"`
}

// Pins are a session's pinned texts, carried word for word after every
// compaction outside the summary, after the tenant's own (TenantPinned,
// read-only through the API).
type Pins struct {
	Pins         []string `json:"pins"`
	TenantPinned []string `json:"tenant_pinned,omitempty"`
}

// PreflightRequest is the body of POST /v1/sessions/{id}/preflight: how
// would the session stand with messages not yet sent.
type PreflightRequest struct {
	InputMessages []turn.Message `json:"input_messages,omitempty"`
	// Model, ContextWindow and MaxOutputTokens stand in for the session's
	// own; a model other than the session's counts the context by its
	// estimate, as the accountant will.
	Model           string `json:"model,omitempty"`
	ContextWindow   int64  `json:"context_window,omitempty"`
	MaxOutputTokens int64  `json:"max_output_tokens,omitempty"`
	// Compact asks for the compaction the messages make due, before the
	// answer: when compact_first, the session is compacted (a compaction in
	// flight is joined) within CompactionWaitMs (default the server's
	// context wait), and the answer counts the messages on the compacted
	// session.
	Compact          bool   `json:"compact,omitempty"`
	CompactionWaitMs *int64 `json:"compaction_wait_ms,omitempty"`
	// RequestPrefix and ClientCompaction are the turn event's (v1.1): the
	// request's system prompt and tools, and the client's own compaction
	// before it.
	RequestPrefix    *turn.RequestPrefix    `json:"request_prefix,omitempty"`
	ClientCompaction *turn.ClientCompaction `json:"client_compaction,omitempty"`
}

// Preflight is the answer to a preflight: the count, state and thresholds
// as they would be with the messages added, and the compaction it made
// first when asked to.
type Preflight struct {
	Tokens
	// CompactFirst: auto-compaction must run before this call.
	CompactFirst bool `json:"compact_first"`
	// Blocked: the call would reach the blocking limit.
	Blocked bool `json:"blocked"`
	// CompactionInFlight: a compaction was requested and has not finished.
	CompactionInFlight bool `json:"compaction_in_flight"`
	// Compaction is the compaction a preflight with Compact made first.
	Compaction *Compaction `json:"compaction,omitempty"`
}

// ToolResult is an offloaded tool result, whole: the answer to GET
// /v1/tool-results/{id}.
type ToolResult struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id"`
	ToolUseID string    `json:"tool_use_id"`
	SizeChars int64     `json:"size_chars"`
	Content   string    `json:"content"`
	CreatedAt time.Time `json:"created_at"`
}
