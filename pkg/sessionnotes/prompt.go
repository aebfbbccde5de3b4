package sessionnotes

import (
	_ "embed" // the prompts
	"fmt"
	"strconv"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// The texts of an update request live in prompts/ (embedded).
var (
	//go:embed prompts/system.md
	systemPromptText string
	//go:embed prompts/update.md
	defaultPromptText string
)

// systemPrompt frames every update call. It is the same for every tenant
// (the answer's format is what ParseEdits checks), so providers cache it.
var systemPrompt = strings.TrimSpace(systemPromptText)

// DefaultPrompt is the update instructions when the tenant has none of its
// own (prompts/update.md). Its variables are PromptVariables.
var DefaultPrompt = strings.TrimSpace(defaultPromptText)

// Markers around the current notes in an update request.
const (
	notesOpen  = "<current-notes>\n"
	notesClose = "\n</current-notes>"
)

// DefaultMaxOutputTokens bounds an update's answer.
const DefaultMaxOutputTokens = 16_000

// DefaultMaxInputTokens bounds the messages one update reads; older ones
// beyond it are left out (see Recent).
const DefaultMaxInputTokens = 100_000

// UpdateInput is what one update call is made of.
type UpdateInput struct {
	// Tenant attributes the call's usage; SessionID is the session's id.
	Tenant, SessionID string
	// Notes is the current notes document (the template before the first update).
	Notes Document
	// Messages are the messages since the notes were last updated.
	Messages []view.Message
	// Prompt is the tenant's update prompt; "" means DefaultPrompt.
	Prompt string
	// SectionTokens and TotalTokens are the limits the prompt asks for.
	SectionTokens, TotalTokens int64
	// Model overrides the provider's notes model when set.
	Model string
}

// Request builds the update call: the fixed system prompt; the messages
// as a conversation (see compaction.Conversation); and a final user message
// with the current notes inside <current-notes> markers, then the prompt
// with its variables substituted.
func Request(in UpdateInput) llm.Request {
	prompt := in.Prompt
	if prompt == "" {
		prompt = DefaultPrompt
	}
	vars := map[string]string{
		VarMaxSectionTokens: strconv.FormatInt(in.SectionTokens, 10),
		VarMaxTotalTokens:   strconv.FormatInt(in.TotalTokens, 10),
		VarOversized:        oversized(in.Notes, in.SectionTokens, in.TotalTokens),
		VarHeadings:         strings.Join(Headings(), "\n"),
		VarSessionID:        in.SessionID,
	}
	ask := turn.Content{
		{Type: turn.BlockText, Text: notesOpen + in.Notes.Render() + notesClose},
		{Type: turn.BlockText, Text: Substitute(prompt, vars)},
	}
	return llm.Request{
		Tenant:    in.Tenant,
		Task:      llm.TaskNotes,
		Model:     in.Model,
		System:    systemPrompt,
		Messages:  compaction.Conversation(in.Messages, ask...),
		MaxTokens: DefaultMaxOutputTokens,
		// Forked, the update reads the agent's whole conversation, the
		// messages since the last update among them.
		Session: in.SessionID,
		Ask:     ask,
	}
}

// oversized is a sentence naming the sections over their limit, or "" when
// every section and the whole fit.
func oversized(d Document, sectionTokens, totalTokens int64) string {
	var over []string
	for _, s := range d.Sections {
		if sectionTokens > 0 && tokensOf(s.Body) > sectionTokens {
			over = append(over, fmt.Sprintf("%q (about %d tokens)", s.Heading, tokensOf(s.Body)))
		}
	}
	var parts []string
	if len(over) > 0 {
		parts = append(parts, "These sections are over their limit and must be shortened now: "+strings.Join(over, ", ")+".")
	}
	if total := d.Tokens(); totalTokens > 0 && total > totalTokens {
		parts = append(parts, fmt.Sprintf("The whole notes are about %d tokens, over the limit: shorten them now.", total))
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}

// Recent returns the most recent messages of msgs whose estimates fit in
// maxTokens, whole API rounds at a time (the latest round always stays).
func Recent(msgs []view.Message, maxTokens int64) []view.Message {
	if view.Tokens(msgs) <= maxTokens {
		return msgs
	}
	groups := compaction.GroupRounds(msgs)
	start, total := len(groups), int64(0)
	for start > 0 && (start == len(groups) || total+groups[start-1].Tokens <= maxTokens) {
		start--
		total += groups[start].Tokens
	}
	var out []view.Message
	for _, g := range groups[start:] {
		out = append(out, g.Messages...)
	}
	return out
}

// splitRequest takes an update request apart again (for the builtin
// writer): the conversation, the current notes and the prompt.
func splitRequest(msgs []llm.Message) ([]view.Message, string, error) {
	conv, tail := compaction.RecoverConversation(msgs, 2)
	if len(tail) != 2 || tail[0].Type != turn.BlockText {
		return nil, "", fmt.Errorf("sessionnotes: the request does not end with the current notes and the prompt")
	}
	notes, ok := strings.CutPrefix(tail[0].Text, notesOpen)
	if !ok {
		return nil, "", fmt.Errorf("sessionnotes: the request's current notes are not inside %q", strings.TrimSpace(notesOpen))
	}
	notes, ok = strings.CutSuffix(notes, notesClose)
	if !ok {
		return nil, "", fmt.Errorf("sessionnotes: the request's current notes are not closed")
	}
	return conv, notes, nil
}
