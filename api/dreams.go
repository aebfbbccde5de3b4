package api

import "time"

// Dream is a consolidation of a scope's memories, in the answers of the
// dream routes.
type Dream struct {
	ID    string `json:"id"`
	Scope string `json:"scope"`
	// Trigger is scheduled or manual.
	Trigger string `json:"trigger"`
	// Status is requested, running, completed, failed, killed, proposed,
	// approved or superseded.
	Status        string     `json:"status"`
	Holder        string     `json:"holder,omitempty"`
	KillRequested bool       `json:"kill_requested"`
	LLMProvider   string     `json:"llm_provider,omitempty"`
	LLMModel      string     `json:"llm_model,omitempty"`
	Turns         int        `json:"turns"`
	ToolCalls     int        `json:"tool_calls"`
	ToolErrors    int        `json:"tool_errors"`
	Usage         DreamUsage `json:"usage"`
	Guard         DreamGuard `json:"guard"`
	Written       []string   `json:"written"`
	Deleted       []string   `json:"deleted"`
	// Proposal is a proposed (or approved) dream's changes; left out of lists.
	Proposal   *Proposal  `json:"proposal,omitempty"`
	Summary    string     `json:"summary,omitempty"`
	Error      string     `json:"error,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	UpdatingAt *time.Time `json:"updating_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	ApprovedAt *time.Time `json:"approved_at,omitempty"`
}

// DreamUsage is what a dream's model calls used.
type DreamUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// DreamGuard is the scope's live memories when the run began, how many the
// run may delete or rewrite without approval, and how many it did or
// would.
type DreamGuard struct {
	MemoriesLive       int `json:"memories_live"`
	ChangesAllowed     int `json:"changes_allowed"`
	ChangesDestructive int `json:"changes_destructive"`
}

// Proposal is a proposed (or approved) dream's changes.
type Proposal struct {
	Edits []ProposedEdit `json:"edits"`
	// Index is the index the run wrote, if it wrote one, and IndexRevision
	// the stored index's revision it was made on.
	Index         *string `json:"index,omitempty"`
	IndexRevision int64   `json:"index_revision,omitempty"`
}

// ProposedEdit is one memory a proposal writes or deletes.
type ProposedEdit struct {
	Name   string `json:"name"`
	Delete bool   `json:"delete,omitempty"`
	// The memory's new content, when written.
	Description string `json:"description,omitempty"`
	Type        string `json:"type,omitempty"`
	Body        string `json:"body,omitempty"`
	// ExpectRevision is the revision the change was made on (0: the memory
	// was not live); ExpectAbsent that it must still not be.
	ExpectRevision int64  `json:"expect_revision,omitempty"`
	ExpectAbsent   bool   `json:"expect_absent,omitempty"`
	Reason         string `json:"reason,omitempty"`
}

// DreamList is the answer to GET /v1/scopes/{scope}/dreams: the scope's
// dreams, newest first, without proposals.
type DreamList struct {
	Scope  string  `json:"scope"`
	Dreams []Dream `json:"dreams"`
}
