package api

import "time"

// Erasure is what an erasure removed, the answer of DELETE
// /v1/sessions/{id} and DELETE /v1/scopes/{scope}.
type Erasure struct {
	// ID is the erasure's record; the audit log names it.
	ID int64 `json:"id"`
	// Kind is session or scope; Target the session id or the scope.
	Kind   string `json:"kind"`
	Target string `json:"target"`
	// Rows is how many rows the erasure removed or cleared in all, by
	// every request that worked on it; Tables says from which tables.
	Rows        int64         `json:"rows"`
	Tables      []ErasedTable `json:"tables"`
	RequestedAt time.Time     `json:"requested_at"`
	FinishedAt  time.Time     `json:"finished_at"`
}

// ErasedTable is how many rows an erasure removed from one table. A name
// with a suffix (memory_revisions:detached, recall_prefetches:cleared)
// counts rows that belong to something else and had the erased data
// cleared from them.
type ErasedTable struct {
	Table string `json:"table"`
	Rows  int64  `json:"rows"`
}
