package api

import "time"

// CompactRequest is the body of POST /v1/sessions/{id}/compact; every
// field is optional.
type CompactRequest struct {
	// Instructions replace the tenant's custom summary instructions.
	Instructions string `json:"instructions,omitempty"`
	// PivotUUID and Direction ask for a partial compaction: "up_to"
	// summarizes up to the pivot message and keeps what follows; "from"
	// keeps everything up to it and summarizes what follows.
	PivotUUID string `json:"pivot_uuid,omitempty"`
	Direction string `json:"direction,omitempty"`
	// Wait for the result (default true), at most TimeoutSeconds (default
	// 60, at most 300). A compaction not done by then answers 202 with its id.
	Wait           *bool `json:"wait,omitempty"`
	TimeoutSeconds int   `json:"timeout_seconds,omitempty"`
}

// Usage is what a model's calls used.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

// Compaction is one compaction: the answer to POST …/compact and GET
// /v1/compactions/{id}, and an item of CompactionList.
type Compaction struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	// Status is requested, running, completed, failed or skipped.
	Status    string `json:"status"`
	Trigger   string `json:"trigger"`
	Method    string `json:"method,omitempty"`
	Direction string `json:"direction,omitempty"`
	PivotUUID string `json:"pivot_uuid,omitempty"`
	PreTokens int64  `json:"pre_tokens"`
	// PostTokens is the count after; Summary is left out of lists.
	PostTokens  int64  `json:"post_tokens"`
	Summary     string `json:"summary,omitempty"`
	LLMProvider string `json:"llm_provider"`
	LLMModel    string `json:"llm_model,omitempty"`
	LLMCalls    int    `json:"llm_calls"`
	LLMRetries  int    `json:"llm_retries"`
	Usage       Usage  `json:"usage"`
	// Retention is the share of what must survive the replaced messages
	// that a completed compaction kept (0 to 1), RetentionDetail each
	// category's found and total (docs/compaction.md#retention).
	Retention       *float64                  `json:"retention,omitempty"`
	RetentionDetail map[string]RetentionTally `json:"retention_detail,omitempty"`
	Error           string                    `json:"error,omitempty"`
	CreatedAt       time.Time                 `json:"created_at"`
	FinishedAt      *time.Time                `json:"finished_at,omitempty"`
	StatusURL       string                    `json:"status_url"`
	ContextURL      string                    `json:"context_url"`
	Instructions    string                    `json:"instructions,omitempty"`
}

// Ended reports whether the compaction is over (completed, failed or skipped).
func (c Compaction) Ended() bool {
	return c.Status == "completed" || c.Status == "failed" || c.Status == "skipped"
}

// RetentionTally is one category of a retention score: how many of its
// items the summary kept, of how many.
type RetentionTally struct {
	Found int `json:"found"`
	Total int `json:"total"`
}

// CompactionList is the answer to GET /v1/sessions/{id}/compactions: the
// session's compactions, oldest first, without summaries.
type CompactionList struct {
	SessionID   string       `json:"session_id"`
	Compactions []Compaction `json:"compactions"`
}

// Notes is the answer to GET /v1/sessions/{id}/notes.
type Notes struct {
	SessionID string `json:"session_id"`
	// Content is the notes document (markdown).
	Content string `json:"content"`
	Version int64  `json:"version"`
	// LastSummarizedMessage is the uuid of the last message the notes cover.
	LastSummarizedMessage string `json:"last_summarized_message"`
	// TokensAtUpdate and ToolCallsAtUpdate are the session's count and tool
	// calls when the notes were written.
	TokensAtUpdate    int64 `json:"tokens_at_update"`
	ToolCallsAtUpdate int64 `json:"tool_calls_at_update"`
	// UpdateRunning reports an update under way.
	UpdateRunning   bool      `json:"update_running"`
	RejectedUpdates int64     `json:"rejected_updates"`
	FailedUpdates   int64     `json:"failed_updates"`
	LastError       string    `json:"last_error,omitempty"`
	LLMModel        string    `json:"llm_model,omitempty"`
	UpdatedAt       time.Time `json:"updated_at"`
}
