// Package sessionstate holds a session's domain state: what the accountant
// keeps of one agent session (its counts, thresholds and compaction state)
// and what a turn is checked against before it is accepted. It knows
// nothing of how either is stored; pkg/store reads and writes them.
package sessionstate

import "time"

// Session is the accountant's running state of one agent session.
type Session struct {
	TenantID        string
	SessionID       string
	AgentID         string
	Model           string
	ContextWindow   int64
	MaxOutputTokens int64
	MemoryScope     map[string]string

	// AppliedSeq is the highest seq applied (or skipped); MessageCount the
	// number of messages stored, which is also the next message's position;
	// MessageBytes the total of their sizes (store.MessageSize), which is also
	// the last one's store.Message.BytesThrough.
	AppliedSeq   int64
	MessageCount int64
	MessageBytes int64
	// ProxySeq is the seq of the last round the Messages API proxy
	// published, ProxyMessages how many of the conversation's messages it
	// has published (store.Tx.RecordProxyRound).
	ProxySeq      int64
	ProxyMessages int64
	// WaitingTurns counts events kept until a missing predecessor arrives.
	WaitingTurns int64

	// The count rule's inputs: the last response's usage total, whether there
	// was one, and the estimate of everything added since.
	BaselineTokens int64
	HasUsage       bool
	PendingTokens  int64
	TokenCount     int64
	State          string
	// EstimateFactor and DenseFactor calibrate the estimate of prose and
	// of dense content, PendingDense is the dense part of PendingTokens
	// (tokens.Tally); PrefixTokens and PrefixHash the estimate and hash of
	// the request's system prompt and tools as last named (tokens.Tally.Prefix).
	EstimateFactor float64
	DenseFactor    float64
	PendingDense   int64
	PrefixTokens   int64
	PrefixHash     string

	CompactionInFlight bool
	CompactRequests    int64
	// AutoCompactSeqs are the seqs of the turns that asked for the latest
	// automatic compactions, oldest first; ThrashHeld counts the turns the
	// thrash guard held a due compaction back.
	AutoCompactSeqs []int64
	ThrashHeld      int64
	// Pins are the texts pinned to the session, carried verbatim after
	// every compaction.
	Pins               []string
	AutoCompactEnabled bool
	ToolCallsTotal     int64
	RejectedTurns      int64
	LastResponseAt     time.Time

	// SkippedSeqs counts the seqs given up after the gap timeout;
	// LastSkippedFrom and LastSkippedTo are the last range given up (0, 0
	// before the first).
	SkippedSeqs     int64
	LastSkippedFrom int64
	LastSkippedTo   int64

	// CompactionID names the latest completed compaction ("" before the
	// first); the context starts with its head, then the messages from KeepFrom on.
	CompactionID string
	KeepFrom     int64
	// CompactFailures counts consecutive failed LLM compactions;
	// CompactCircuitOpen is set when they reach the breaker's limit.
	CompactFailures    int
	CompactCircuitOpen bool
	// CompactCircuitUntil is when an open circuit may be tried again (zero
	// when closed, or for a circuit opened before it was recorded).
	CompactCircuitUntil time.Time
	// StaleUsageAbove: after a compaction, usage at or above this comes from
	// a request built before it and is not taken as the baseline (0: none).
	StaleUsageAbove int64
	// ContextEpoch counts recorded cache breaks.
	ContextEpoch int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Progress is what a turn is checked against before it is accepted: the
// highest seq a session applied and the messages it stores.
type Progress struct {
	AppliedSeq   int64
	MessageCount int64
}
