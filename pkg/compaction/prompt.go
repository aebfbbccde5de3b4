package compaction

import "strings"

// systemPrompt frames the summary call.
const systemPrompt = `You write hand-over summaries of long working sessions between a user and an AI agent. ` +
	`The session you are given has outgrown the agent's context window, and your summary will take its place: ` +
	`the agent must be able to carry on from the summary alone, without asking the user again for anything ` +
	`already said and without losing a decision, a file or an error that mattered. ` +
	`Reply with plain text only; never call a tool.`

// instructionsLead opens the final instruction message of a summary request.
// BuiltinSummarizer recognises that message by it.
const instructionsLead = "Stop here: your task now is to summarize the conversation above."

// sectionGuidance says what each heading of Headings() should hold.
var sectionGuidance = map[string]string{
	HeadingIntent:         "Everything the user explicitly asked for, and the intent behind it, in enough detail to act on.",
	HeadingConcepts:       "The technologies, frameworks, libraries, protocols and ideas the work relies on.",
	HeadingFiles:          "Each file that was read, changed or created: why it matters and what changed. Include the code snippets that matter, in full.",
	HeadingErrors:         "Each error or failure met, how it was fixed, and what the user said about it, especially any correction.",
	HeadingProblemSolving: "The problems solved so far and the investigations still open.",
	HeadingUserMessages:   "Every message the user wrote (not tool results), word for word and in order. They show how the user's wishes changed, so leave none out.",
	HeadingPending:        "Work the user asked for that is not done yet.",
	HeadingCurrentWork:    "Precisely what was being worked on right before this summary, with file names and code where they apply.",
	HeadingNextStep: "The next step, only if it follows directly from the user's latest request and the work in progress. " +
		"Quote the latest request word for word so it is clear where the work stopped. Write \"None.\" if the last task was finished or the next step is unclear.",
}

// instructions is the text of the final user message of a summary request.
func instructions(custom string) string {
	var b strings.Builder
	b.WriteString(instructionsLead)
	b.WriteString(` Do not answer or continue it, and do not call any tools: reply with text only.

First think it through inside <analysis> and </analysis> tags. This part is your scratch space and will be thrown away. ` +
		`Walk through the conversation from start to end and note, for each part: what the user asked for and how they wanted it done; ` +
		`what the agent did and decided; file names, code, function signatures and edits; errors and how they were resolved; ` +
		`any feedback or correction from the user. Then check that nothing technical is missing.

Then write the summary inside <summary> and </summary> tags, with these sections in this order, each under its markdown heading:
`)
	for i, h := range Headings() {
		b.WriteString("\n")
		b.WriteString(sectionTitle(i+1, h))
		b.WriteString("\n")
		b.WriteString(sectionGuidance[h])
		b.WriteString("\n")
	}
	b.WriteString("\nWrite \"None.\" under a section that has nothing to report.")
	if custom = strings.TrimSpace(custom); custom != "" {
		b.WriteString("\n\nFurther instructions for this summary:\n")
		b.WriteString(custom)
	}
	return b.String()
}

// The texts the request builder writes in place of what the API would reject.
const (
	// leadingPlaceholder opens a request whose first message would be the assistant's.
	leadingPlaceholder = "[The conversation before this point is not shown.]"
	// missingResult answers a tool call whose result is not among the messages.
	missingResult = "[No result of this tool call is recorded.]"
	// orphanResultLead and orphanErrorLead open the text that a tool result
	// becomes when its tool call is not among the messages.
	orphanResultLead = "[Result of an earlier tool call]\n"
	orphanErrorLead  = "[Error from an earlier tool call]\n"
)

// unknownBlockText is the text an unknown block type becomes.
func unknownBlockText(typ string) string {
	return "[" + typ + " block]"
}
