package compaction

// Internals the external tests check directly.
var (
	ParseSummary    = parseSummary
	RequestMessages = requestMessages
	RecoverMessages = recoverMessages
)

// Texts the request builder writes, for tests that look for them.
const (
	LeadingPlaceholder = leadingPlaceholder
	MissingResult      = missingResult
	OrphanResultLead   = orphanResultLead
	OrphanErrorLead    = orphanErrorLead
	ExtractiveNote     = extractiveNote
)

// InstructionsLead opens the summary instructions (prompts/instructions.md).
var InstructionsLead = instructionsLead
