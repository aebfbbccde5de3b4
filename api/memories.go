package api

import "time"

// ScopeSummary is one scope of a tenant that holds memories.
type ScopeSummary struct {
	// Scope is the scope's name ("project:repo-x"), Kind and ID its parts.
	Scope string `json:"scope"`
	Kind  string `json:"kind"`
	ID    string `json:"id"`
	// Memories and DeletedMemories count its live and deleted memories.
	Memories        int64 `json:"memories"`
	DeletedMemories int64 `json:"deleted_memories"`
	// UpdatedAt is when one of its memories last changed.
	UpdatedAt time.Time `json:"updated_at"`
	// LastConsolidatedAt is when a dream last consolidated it.
	LastConsolidatedAt *time.Time `json:"last_consolidated_at,omitempty"`
}

// ScopeList is the answer to GET /v1/scopes: a page of the tenant's scopes
// that hold memories, in name order. NextCursor, "" on the last page, asks
// for the next one.
type ScopeList struct {
	Items      []ScopeSummary `json:"items"`
	NextCursor string         `json:"next_cursor"`
}

// Memory is a long-term memory, in the answers of the memory routes.
type Memory struct {
	Scope       string `json:"scope"`
	Name        string `json:"name"`
	File        string `json:"file"`
	Description string `json:"description"`
	// Type is user, feedback, project or reference.
	Type string `json:"type"`
	// Body and Markdown (the whole document) are left out of lists.
	Body      string     `json:"body,omitempty"`
	Markdown  string     `json:"markdown,omitempty"`
	Revision  int64      `json:"revision"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	// Op is what a change did: created, updated, deleted, restored, or
	// unchanged (no revision made). Only in answers to changes.
	Op string `json:"op,omitempty"`
	// RestoredFrom is the revision a rollback went back to.
	RestoredFrom int64 `json:"restored_from,omitempty"`
}

// MemoryList is the answer to GET /v1/scopes/{scope}/memories: the scope's
// memories, most recently updated first.
type MemoryList struct {
	Scope    string   `json:"scope"`
	Memories []Memory `json:"memories"`
}

// Revision is one revision of a memory.
type Revision struct {
	Revision int64  `json:"revision"`
	Op       string `json:"op"`
	// Actor is who made it: agent, extractor, dreamer or api.
	Actor        string   `json:"actor"`
	Reason       string   `json:"reason,omitempty"`
	SourceTurns  []string `json:"source_turns,omitempty"`
	SessionID    string   `json:"session_id,omitempty"`
	RestoredFrom int64    `json:"restored_from,omitempty"`
	Deleted      bool     `json:"deleted"`
	Description  string   `json:"description"`
	Type         string   `json:"type"`
	// Markdown is only in the answer for one revision.
	Markdown string    `json:"markdown,omitempty"`
	At       time.Time `json:"at"`
}

// RevisionList is the answer to GET …/memories/{name}/revisions: every
// revision of a memory.
type RevisionList struct {
	Scope     string     `json:"scope"`
	Name      string     `json:"name"`
	Revisions []Revision `json:"revisions"`
}

// Diff is the answer to GET …/memories/{name}/diff.
type Diff struct {
	Scope string `json:"scope"`
	Name  string `json:"name"`
	From  int64  `json:"from"`
	To    int64  `json:"to"`
	// Diff is a unified diff of the two revisions' markdown ("" when equal).
	Diff string `json:"diff"`
}

// Index is a scope's index (MEMORY.md) in the API's answers.
type Index struct {
	Scope     string    `json:"scope"`
	Content   string    `json:"content"`
	Revision  int64     `json:"revision"`
	Lines     int       `json:"lines"`
	Bytes     int       `json:"bytes"`
	Actor     string    `json:"actor,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Loaded is what a context loads of it.
	Loaded LoadedIndex `json:"loaded"`
	// Appended and Changed answer an edit: the memories it left out, which
	// were appended, and whether it changed the index.
	Appended []string `json:"appended,omitempty"`
	Changed  *bool    `json:"changed,omitempty"`
}

// LoadedIndex says how much of an index a context loads.
type LoadedIndex struct {
	Lines   int    `json:"lines"`
	Bytes   int    `json:"bytes"`
	Cut     bool   `json:"cut"`
	Warning string `json:"warning,omitempty"`
}

// RecallRequest is the body of POST /v1/sessions/{id}/recall: which
// memories bear on what the session's user asked.
type RecallRequest struct {
	// Query is what the user asked.
	Query string `json:"query"`
	// RecentTools are the tools the agent has just used: reference memories
	// for them are not picked, their pitfalls are.
	RecentTools []string `json:"recent_tools,omitempty"`
	// MemoryScope names the scopes to recall from (the turn event's
	// memory_scope); by default the session's.
	MemoryScope map[string]string `json:"memory_scope,omitempty"`
}

// Recall is the answer to POST /v1/sessions/{id}/recall: what recall
// surfaced.
type Recall struct {
	SessionID string `json:"session_id"`
	// Outcome is surfaced, none, capped or disabled.
	Outcome  string           `json:"outcome"`
	Memories []RecalledMemory `json:"memories"`
	// Candidates is how many memories the selector chose from.
	Candidates int `json:"candidates"`
	// Dropped counts the picks not surfaced by reason; Invented lists the
	// names the selector made up.
	Dropped  map[string]int `json:"dropped"`
	Invented []string       `json:"invented"`
	// SessionBytes is what recall surfaced in the session since its latest
	// compaction; SessionLimit is where it stops.
	SessionBytes int64  `json:"session_bytes"`
	SessionLimit int64  `json:"session_limit"`
	LLMProvider  string `json:"llm_provider"`
}

// RecalledMemory is a memory recall surfaced.
type RecalledMemory struct {
	Scope       string    `json:"scope"`
	Name        string    `json:"name"`
	Type        string    `json:"type"`
	Description string    `json:"description"`
	Revision    int64     `json:"revision"`
	UpdatedAt   time.Time `json:"updated_at"`
	// Age is "today", "yesterday" or "N days ago"; Stale says that it is
	// old enough to carry the note to verify it.
	Age       string `json:"age"`
	AgeDays   int    `json:"age_days"`
	Stale     bool   `json:"stale"`
	Truncated bool   `json:"truncated"`
	// Text is the reminder to show the agent (a <system-reminder> block).
	Text string `json:"text"`
}

// ScopeImport answers an import of a scope's archive: the memories it
// created, updated and left unchanged (by name), and the index after it.
type ScopeImport struct {
	Scope     string   `json:"scope"`
	Created   []string `json:"created"`
	Updated   []string `json:"updated"`
	Unchanged []string `json:"unchanged"`
	// IndexFrom is "archive" when the archive's MEMORY.md became the index,
	// "memories" when the index was kept in step with the writes instead;
	// IndexProblem then says what was wrong with the archive's.
	IndexFrom    string `json:"index_from"`
	IndexProblem string `json:"index_problem,omitempty"`
	Index        Index  `json:"index"`
}
