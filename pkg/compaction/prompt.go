package compaction

import (
	_ "embed" // the prompts
	"fmt"
	"strings"
	"text/template"
)

// The texts of a summary request live in prompts/ (embedded).
var (
	//go:embed prompts/system.md
	systemPromptText string
	//go:embed prompts/instructions.md
	instructionsText string
)

// systemPrompt frames the summary call.
var systemPrompt = strings.TrimSpace(systemPromptText)

// instructionsTemplate is the final user message of a summary request: its
// "lead" template opens it, its sections are Headings() in order, and
// .Custom is the request's custom instructions, if any.
var instructionsTemplate = template.Must(template.New("instructions.md").Parse(strings.TrimSpace(instructionsText)))

// instructionsLead opens the final instruction message of a summary request.
// BuiltinSummarizer recognises that message by it.
var instructionsLead = execute(instructionsTemplate.Lookup("lead"), nil)

// instructions is the text of the final user message of a summary request.
func instructions(custom string) string {
	return execute(instructionsTemplate, struct{ Custom string }{strings.TrimSpace(custom)})
}

// execute renders one of the package's prompt templates. They only print
// strings, so they cannot fail on any data: a failure is a broken template
// file, found by the first test that builds a request.
func execute(t *template.Template, data any) string {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		panic(fmt.Sprintf("compaction: the prompt template %s: %v", t.Name(), err))
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
