package client

import (
	"net/url"
	"strconv"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// The types below are the schemas of api/openapi.yaml (components/schemas),
// by the same names.

// TurnAccepted answers PostTurn.
type TurnAccepted struct {
	EventID string `json:"event_id"`
	// Subject is the bus subject the event was published on.
	Subject string `json:"subject"`
	// Duplicate: the event id was seen before; nothing new was published.
	Duplicate bool `json:"duplicate"`
}

// Tokens is a session's token count and thresholds.
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

// SeqRange is a range of seqs, both ends included.
type SeqRange struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Session is a session's token state.
type Session struct {
	SessionID          string            `json:"session_id"`
	AgentID            string            `json:"agent_id"`
	Model              string            `json:"model"`
	MemoryScope        map[string]string `json:"memory_scope,omitempty"`
	AppliedSeq         int64             `json:"applied_seq"`
	Messages           int64             `json:"messages"`
	Tokens             Tokens            `json:"tokens"`
	CompactionInFlight bool              `json:"compaction_in_flight"`
	AutoCompactEnabled bool              `json:"auto_compact_enabled"`
	// AutoCompact: the session compacts by itself (its switch and its
	// tenant's both on).
	AutoCompact     bool  `json:"auto_compact"`
	CompactRequests int64 `json:"compact_requests"`
	// ThrashHeld counts the turns whose automatic compaction the thrash
	// guard held back.
	ThrashHeld     int64      `json:"thrash_held"`
	ToolCallsTotal int64      `json:"tool_calls_total"`
	RejectedTurns  int64      `json:"rejected_turns"`
	SkippedSeqs    int64      `json:"skipped_seqs"`
	LastSkipped    *SeqRange  `json:"last_skipped,omitempty"`
	LastResponseAt *time.Time `json:"last_response_at,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

// SessionList is a page of sessions; NextCursor is "" on the last page.
type SessionList struct {
	Items      []Session `json:"items"`
	NextCursor string    `json:"next_cursor"`
}

// ScopeSummary is a scope that holds memories.
type ScopeSummary struct {
	Scope              string     `json:"scope"`
	Kind               string     `json:"kind"`
	ID                 string     `json:"id"`
	Memories           int64      `json:"memories"`
	DeletedMemories    int64      `json:"deleted_memories"`
	UpdatedAt          time.Time  `json:"updated_at"`
	LastConsolidatedAt *time.Time `json:"last_consolidated_at,omitempty"`
}

// UsageRow is the model calls of one UTC day, task (the service that made
// them), provider and model (Usage.Rows); of one day (Usage.Days); or of one
// task (Usage.Tasks). CostUSD is exact dollars as a decimal string,
// CostNanoUSD the same in 10⁻⁹ dollars.
type UsageRow struct {
	Day              string `json:"day,omitempty"`
	Task             string `json:"task,omitempty"`
	Provider         string `json:"provider,omitempty"`
	Model            string `json:"model,omitempty"`
	Calls            int64  `json:"calls"`
	FailedCalls      int64  `json:"failed_calls"`
	InputTokens      int64  `json:"input_tokens"`
	OutputTokens     int64  `json:"output_tokens"`
	CacheReadTokens  int64  `json:"cache_read_tokens"`
	CacheWriteTokens int64  `json:"cache_write_tokens"`
	Tokens           int64  `json:"tokens"`
	CostUSD          string `json:"cost_usd"`
	CostNanoUSD      int64  `json:"cost_nanousd"`
}

// UsageBudget is today's spending against the tenant's daily budgets;
// Reason says which is spent when Exhausted.
type UsageBudget struct {
	Day              string `json:"day"`
	Tokens           int64  `json:"tokens"`
	CostUSD          string `json:"cost_usd"`
	DailyTokenBudget int64  `json:"daily_token_budget"`
	DailyBudgetUSD   string `json:"daily_budget_usd"`
	Exhausted        bool   `json:"exhausted"`
	Reason           string `json:"reason,omitempty"`
}

// TenantUsage is the tenant's model usage from From to To (UTC days).
type TenantUsage struct {
	From   string      `json:"from"`
	To     string      `json:"to"`
	Rows   []UsageRow  `json:"rows"`
	Days   []UsageRow  `json:"days"`
	Tasks  []UsageRow  `json:"tasks"`
	Total  UsageRow    `json:"total"`
	Budget UsageBudget `json:"budget"`
}

// ScopeList is a page of scopes; NextCursor is "" on the last page.
type ScopeList struct {
	Items      []ScopeSummary `json:"items"`
	NextCursor string         `json:"next_cursor"`
}

// ListOptions pages a listing: Limit (0: the server's default) items from
// Cursor ("" for the first page), with the listing's filters (sessions:
// state, updated_after, agent, scope; scopes: kind, prefix).
type ListOptions struct {
	Limit   int
	Cursor  string
	Filters map[string]string
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	for k, v := range o.Filters {
		q.Set(k, v)
	}
	return q
}

// PreflightRequest asks how a session would stand with messages not yet sent.
type PreflightRequest struct {
	InputMessages   []turn.Message `json:"input_messages"`
	Model           string         `json:"model,omitempty"`
	ContextWindow   int64          `json:"context_window,omitempty"`
	MaxOutputTokens int64          `json:"max_output_tokens,omitempty"`
	// Compact asks for the compaction the messages make due first, waiting
	// at most CompactionWaitMs.
	Compact          bool   `json:"compact,omitempty"`
	CompactionWaitMs *int64 `json:"compaction_wait_ms,omitempty"`
	// RequestPrefix is the request's system prompt and tools (or their size
	// and hash); ClientCompaction says the client compacted before it.
	RequestPrefix    *turn.RequestPrefix    `json:"request_prefix,omitempty"`
	ClientCompaction *turn.ClientCompaction `json:"client_compaction,omitempty"`
}

// SessionPatch sets a session's switches; a field left nil stays.
type SessionPatch struct {
	AutoCompactEnabled *bool `json:"auto_compact_enabled,omitempty"`
}

// Pins are the texts pinned to a session, and the tenant's.
type Pins struct {
	Pins         []string `json:"pins"`
	TenantPinned []string `json:"tenant_pinned,omitempty"`
}

// Preflight is the count, state and thresholds with the messages added.
type Preflight struct {
	Tokens
	// CompactFirst: auto-compaction must run before this call.
	CompactFirst bool `json:"compact_first"`
	// Blocked: the call would reach the blocking limit.
	Blocked            bool `json:"blocked"`
	CompactionInFlight bool `json:"compaction_in_flight"`
	// Compaction is the compaction a preflight with Compact made first.
	Compaction *Compaction `json:"compaction,omitempty"`
}

// ToolResult is an offloaded tool result, whole.
type ToolResult struct {
	ID        string    `json:"id"`
	SessionID string    `json:"session_id"`
	ToolUseID string    `json:"tool_use_id"`
	SizeChars int64     `json:"size_chars"`
	Content   string    `json:"content"`
	CreatedAt time.Time `json:"created_at"`
}

// Message is a message of a context, as the model API takes it.
type Message struct {
	Role    string       `json:"role"`
	Content turn.Content `json:"content"`
}

// Breakpoint suggests a cache_control position: block Block of message
// Message, or of the system blocks when Message is -1.
type Breakpoint struct {
	Message int `json:"message"`
	Block   int `json:"block"`
}

// CompactionRef names the compaction a context starts with.
type CompactionRef struct {
	ID         string    `json:"id"`
	Trigger    string    `json:"trigger"`
	Method     string    `json:"method"`
	Direction  string    `json:"direction,omitempty"`
	PreTokens  int64     `json:"pre_tokens"`
	PostTokens int64     `json:"post_tokens"`
	FinishedAt time.Time `json:"finished_at"`
}

// Context is what to send the model next.
type Context struct {
	System   []turn.Block `json:"system"`
	Messages []Message    `json:"messages"`
	// SessionID and MessageUUIDs, parallel to Messages ("" for a message a
	// compaction made).
	SessionID          string         `json:"session_id"`
	MessageUUIDs       []string       `json:"message_uuids"`
	CacheBreakpoints   []Breakpoint   `json:"cache_breakpoints"`
	Tokens             Tokens         `json:"tokens"`
	ContextTokens      int64          `json:"context_tokens"`
	Compaction         *CompactionRef `json:"compaction"`
	ClearedToolResults int            `json:"cleared_tool_results"`
	CompactionInFlight bool           `json:"compaction_in_flight"`
	Epoch              int64          `json:"epoch"`
	LLMProvider        string         `json:"llm_provider"`
	// ContextManagement is what a PostContext's edits applied.
	ContextManagement *ContextManagement `json:"context_management,omitempty"`
}

// ContextManagement is what context-management edits applied to a context.
type ContextManagement struct {
	AppliedEdits []AppliedEdit `json:"applied_edits"`
}

// AppliedEdit is one edit's effect on the context answered.
type AppliedEdit struct {
	Type                 string `json:"type"`
	ClearedToolUses      int    `json:"cleared_tool_uses,omitempty"`
	ClearedThinkingTurns int    `json:"cleared_thinking_turns,omitempty"`
	ClearedInputTokens   int64  `json:"cleared_input_tokens"`
	CompactionID         string `json:"compaction_id,omitempty"`
	Status               string `json:"status,omitempty"`
	Paused               bool   `json:"paused,omitempty"`
}

// CompactRequest is the body of Compact; every field is optional.
type CompactRequest struct {
	Instructions string `json:"instructions,omitempty"`
	// PivotUUID and Direction ("from" or "up_to") ask for a partial compaction.
	PivotUUID string `json:"pivot_uuid,omitempty"`
	Direction string `json:"direction,omitempty"`
	// Wait for the result (default true), at most TimeoutSeconds (default 60).
	Wait           *bool `json:"wait,omitempty"`
	TimeoutSeconds int   `json:"timeout_seconds,omitempty"`
}

// Usage is an LLM usage.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

// Compaction is one compaction.
type Compaction struct {
	ID           string     `json:"id"`
	SessionID    string     `json:"session_id"`
	Status       string     `json:"status"`
	Trigger      string     `json:"trigger"`
	Method       string     `json:"method,omitempty"`
	Direction    string     `json:"direction,omitempty"`
	PivotUUID    string     `json:"pivot_uuid,omitempty"`
	PreTokens    int64      `json:"pre_tokens"`
	PostTokens   int64      `json:"post_tokens"`
	Summary      string     `json:"summary,omitempty"`
	LLMProvider  string     `json:"llm_provider"`
	LLMModel     string     `json:"llm_model,omitempty"`
	LLMCalls     int        `json:"llm_calls"`
	LLMRetries   int        `json:"llm_retries"`
	Usage        Usage      `json:"usage"`
	Error        string     `json:"error,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
	StatusURL    string     `json:"status_url"`
	ContextURL   string     `json:"context_url"`
	Instructions string     `json:"instructions,omitempty"`
	// Retention is the share of what must survive the replaced messages
	// that a completed compaction kept; RetentionDetail each category's
	// found and total.
	Retention       *float64                  `json:"retention,omitempty"`
	RetentionDetail map[string]RetentionTally `json:"retention_detail,omitempty"`
}

// RetentionTally is one category of a retention score.
type RetentionTally struct {
	Found int `json:"found"`
	Total int `json:"total"`
}

// Ended reports whether the compaction is over (completed, failed or skipped).
func (c Compaction) Ended() bool {
	return c.Status == "completed" || c.Status == "failed" || c.Status == "skipped"
}

// CompactionList is a session's compactions, oldest first, without summaries.
type CompactionList struct {
	SessionID   string       `json:"session_id"`
	Compactions []Compaction `json:"compactions"`
}

// Notes are a session's notes.
type Notes struct {
	SessionID             string    `json:"session_id"`
	Content               string    `json:"content"`
	Version               int64     `json:"version"`
	LastSummarizedMessage string    `json:"last_summarized_message"`
	TokensAtUpdate        int64     `json:"tokens_at_update"`
	ToolCallsAtUpdate     int64     `json:"tool_calls_at_update"`
	UpdateRunning         bool      `json:"update_running"`
	RejectedUpdates       int64     `json:"rejected_updates"`
	FailedUpdates         int64     `json:"failed_updates"`
	LastError             string    `json:"last_error,omitempty"`
	LLMModel              string    `json:"llm_model,omitempty"`
	UpdatedAt             time.Time `json:"updated_at"`
}

// RecallRequest asks which memories bear on what a session's user asked.
type RecallRequest struct {
	Query       string            `json:"query"`
	RecentTools []string          `json:"recent_tools,omitempty"`
	MemoryScope map[string]string `json:"memory_scope,omitempty"`
}

// RecalledMemory is a memory recall surfaced.
type RecalledMemory struct {
	Scope       string    `json:"scope"`
	Name        string    `json:"name"`
	Type        string    `json:"type"`
	Description string    `json:"description"`
	Revision    int64     `json:"revision"`
	UpdatedAt   time.Time `json:"updated_at"`
	Age         string    `json:"age"`
	AgeDays     int       `json:"age_days"`
	Stale       bool      `json:"stale"`
	Truncated   bool      `json:"truncated"`
	// Text is the <system-reminder> block to show the agent.
	Text string `json:"text"`
}

// Recall is what recall surfaced.
type Recall struct {
	SessionID    string           `json:"session_id"`
	Outcome      string           `json:"outcome"`
	Memories     []RecalledMemory `json:"memories"`
	Candidates   int              `json:"candidates"`
	Dropped      map[string]int   `json:"dropped"`
	Invented     []string         `json:"invented"`
	SessionBytes int64            `json:"session_bytes"`
	SessionLimit int64            `json:"session_limit"`
	LLMProvider  string           `json:"llm_provider"`
}

// Memory is a long-term memory.
type Memory struct {
	Scope       string `json:"scope"`
	Name        string `json:"name"`
	File        string `json:"file"`
	Description string `json:"description"`
	Type        string `json:"type"`
	// Body and Markdown (the whole document) are left out of lists.
	Body      string     `json:"body,omitempty"`
	Markdown  string     `json:"markdown,omitempty"`
	Revision  int64      `json:"revision"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	// Op is what a change did: created, updated, deleted, restored or
	// unchanged; only in answers to changes.
	Op           string `json:"op,omitempty"`
	RestoredFrom int64  `json:"restored_from,omitempty"`
}

// MemoryList is a scope's memories, most recently updated first.
type MemoryList struct {
	Scope    string   `json:"scope"`
	Memories []Memory `json:"memories"`
}

// Revision is one revision of a memory.
type Revision struct {
	Revision     int64     `json:"revision"`
	Op           string    `json:"op"`
	Actor        string    `json:"actor"`
	Reason       string    `json:"reason,omitempty"`
	SourceTurns  []string  `json:"source_turns,omitempty"`
	SessionID    string    `json:"session_id,omitempty"`
	RestoredFrom int64     `json:"restored_from,omitempty"`
	Deleted      bool      `json:"deleted"`
	Description  string    `json:"description"`
	Type         string    `json:"type"`
	Markdown     string    `json:"markdown,omitempty"`
	At           time.Time `json:"at"`
}

// RevisionList is every revision of a memory.
type RevisionList struct {
	Scope     string     `json:"scope"`
	Name      string     `json:"name"`
	Revisions []Revision `json:"revisions"`
}

// Diff is a unified diff of two revisions ("" when equal).
type Diff struct {
	Scope string `json:"scope"`
	Name  string `json:"name"`
	From  int64  `json:"from"`
	To    int64  `json:"to"`
	Diff  string `json:"diff"`
}

// LoadedIndex says how much of an index a context loads.
type LoadedIndex struct {
	Lines   int    `json:"lines"`
	Bytes   int    `json:"bytes"`
	Cut     bool   `json:"cut"`
	Warning string `json:"warning,omitempty"`
}

// Index is a scope's MEMORY.md.
type Index struct {
	Scope     string      `json:"scope"`
	Content   string      `json:"content"`
	Revision  int64       `json:"revision"`
	Lines     int         `json:"lines"`
	Bytes     int         `json:"bytes"`
	Actor     string      `json:"actor,omitempty"`
	Reason    string      `json:"reason,omitempty"`
	UpdatedAt time.Time   `json:"updated_at"`
	Loaded    LoadedIndex `json:"loaded"`
	// Appended and Changed answer an edit.
	Appended []string `json:"appended,omitempty"`
	Changed  *bool    `json:"changed,omitempty"`
}

// ProposedEdit is one memory a proposal writes or deletes.
type ProposedEdit struct {
	Name           string `json:"name"`
	Delete         bool   `json:"delete,omitempty"`
	Description    string `json:"description,omitempty"`
	Type           string `json:"type,omitempty"`
	Body           string `json:"body,omitempty"`
	ExpectRevision int64  `json:"expect_revision,omitempty"`
	ExpectAbsent   bool   `json:"expect_absent,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// Proposal is a proposed (or approved) dream's changes.
type Proposal struct {
	Edits         []ProposedEdit `json:"edits"`
	Index         *string        `json:"index,omitempty"`
	IndexRevision int64          `json:"index_revision,omitempty"`
}

// Dream is a consolidation of a scope's memories.
type Dream struct {
	ID            string `json:"id"`
	Scope         string `json:"scope"`
	Trigger       string `json:"trigger"`
	Status        string `json:"status"`
	Holder        string `json:"holder,omitempty"`
	KillRequested bool   `json:"kill_requested"`
	LLMProvider   string `json:"llm_provider,omitempty"`
	LLMModel      string `json:"llm_model,omitempty"`
	Turns         int    `json:"turns"`
	ToolCalls     int    `json:"tool_calls"`
	ToolErrors    int    `json:"tool_errors"`
	Usage         struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
	} `json:"usage"`
	Guard struct {
		MemoriesLive       int `json:"memories_live"`
		ChangesAllowed     int `json:"changes_allowed"`
		ChangesDestructive int `json:"changes_destructive"`
	} `json:"guard"`
	Written    []string   `json:"written"`
	Deleted    []string   `json:"deleted"`
	Proposal   *Proposal  `json:"proposal,omitempty"`
	Summary    string     `json:"summary,omitempty"`
	Error      string     `json:"error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	UpdatingAt *time.Time `json:"updating_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	ApprovedAt *time.Time `json:"approved_at,omitempty"`
}

// DreamList is a scope's dreams, newest first, without proposals.
type DreamList struct {
	Scope  string  `json:"scope"`
	Dreams []Dream `json:"dreams"`
}

// Health answers Healthz and Readyz.
type Health struct {
	// Status is ok (alive), ready, or unavailable.
	Status string `json:"status"`
	// Targets say what each of the process's targets is doing.
	Targets map[string]string `json:"targets,omitempty"`
	// Failed are the failed checks of an unavailable process, with their errors.
	Failed map[string]string `json:"failed,omitempty"`
}
