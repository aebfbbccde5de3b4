// Package extraction holds what long-term memory extraction (see docs/memory.md)
// asks of a model after a user turn — the rules of what to save and what
// not, the conversation since the last extraction with its tool results
// trimmed, the manifest of the scope's memories — and the builtin
// extractor that answers the same request without a model: it saves the
// user's explicit requests ("remember that …", "from now on …") and
// corrections ("don't …", "stop …") as feedback memories, and nothing
// else. The model acts through the memory tools of one scope
// (pkg/memory/memtools); the extractor service runs the loop.
package extraction

import (
	_ "embed" // the prompts
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// The texts of an extraction request live in prompts/ (embedded).
var (
	//go:embed prompts/system.md
	systemPromptText string
	//go:embed prompts/instructions.md
	instructionsText string
)

// systemPrompt frames every extraction. It is the same for every run, so
// providers cache it; what varies (the scope, the date, the turns) is in
// the last message.
var systemPrompt = strings.TrimSpace(systemPromptText)

// instructionsTemplate is the last block of every request: its "lead"
// template opens it; .Scope, .Today and .MaxTurns are the run's.
var instructionsTemplate = template.Must(template.New("instructions.md").Parse(strings.TrimSpace(instructionsText)))

// instructionsLead starts the last block of every request; the builtin
// extractor recognizes the first turn of a run by it.
var instructionsLead = execute(instructionsTemplate.Lookup("lead"), nil)

// Markers of the manifest block.
const (
	manifestOpen  = "<memory-manifest scope=%q>\n"
	manifestClose = "\n</memory-manifest>"
)

// DefaultMaxOutputTokens bounds each answer of a run.
const DefaultMaxOutputTokens = 8_000

// Trimming of what a run reads: tool results and tool inputs are cut to
// these many bytes (the user's and the agent's words are what matters).
const (
	DefaultToolResultBytes = 2_000
	DefaultToolInputBytes  = 1_000
)

// Input is what one extraction request is made of.
type Input struct {
	// Tenant attributes the call's usage; Model overrides the provider's
	// extraction model when set.
	Tenant, Model string
	// SessionID, when set, lets the calls fork the agent's last request
	// (llm.Request.Session): the messages are then the conversation as the
	// agent sent it.
	SessionID string
	// Scope is the one scope the run writes to.
	Scope memory.Scope
	// Messages are the session's messages since the last extraction,
	// already bounded (see sessionnotes.Recent); their tool results and
	// tool inputs are trimmed here.
	Messages []view.Message
	// Manifest is the scope's memories, most recently updated first.
	Manifest []memory.Header
	// Now dates the request: relative dates are made absolute against it,
	// and memories' ages are counted from it.
	Now time.Time
	// MaxTurns is the run's budget of model turns.
	MaxTurns int
	// ToolResultBytes and ToolInputBytes bound each tool result and tool
	// input (defaults when 0).
	ToolResultBytes, ToolInputBytes int
}

// Request builds the first call of a run: the fixed system prompt, the
// messages as a conversation (compaction.Conversation) with tool results
// and inputs trimmed, and a last user message holding the manifest of the
// scope's memories and the instructions. The tools are left to the loop.
func Request(in Input) llm.Request {
	if in.ToolResultBytes <= 0 {
		in.ToolResultBytes = DefaultToolResultBytes
	}
	if in.ToolInputBytes <= 0 {
		in.ToolInputBytes = DefaultToolInputBytes
	}
	msgs := make([]view.Message, len(in.Messages))
	for i, m := range in.Messages {
		m.Content = trim(m.Content, in.ToolResultBytes, in.ToolInputBytes)
		msgs[i] = m
	}
	ask := turn.Content{
		{Type: turn.BlockText, Text: Manifest(in.Scope, in.Manifest, in.Now)},
		{Type: turn.BlockText, Text: instructions(in.Scope, in.Now, in.MaxTurns)},
	}
	return llm.Request{
		Tenant:    in.Tenant,
		Task:      llm.TaskExtraction,
		Model:     in.Model,
		System:    systemPrompt,
		Messages:  compaction.Conversation(msgs, ask...),
		MaxTokens: DefaultMaxOutputTokens,
		Session:   in.SessionID,
		Ask:       ask,
	}
}

// Manifest renders the scope's memories for a request: one line each,
// "- name.md [type] updated 2026-11-20 (2 days ago): description", inside
// <memory-manifest> markers.
func Manifest(scope memory.Scope, heads []memory.Header, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, manifestOpen, scope.String())
	if len(heads) == 0 {
		b.WriteString("The scope holds no memories yet.")
	} else {
		fmt.Fprintf(&b, "The %d memories of %s, most recently updated first:", len(heads), scope)
	}
	for _, h := range heads {
		fmt.Fprintf(&b, "\n- %s [%s] updated %s (%s): %s", h.Name.File(), h.Type, h.UpdatedAt.UTC().Format(time.DateOnly), age(now, h.UpdatedAt), oneLine(h.Description))
	}
	b.WriteString(manifestClose)
	return b.String()
}

// age says how long ago t was, in whole days.
func age(now, t time.Time) string {
	days := int(now.Sub(t).Hours() / 24)
	switch {
	case days <= 0:
		return "today"
	case days == 1:
		return "1 day ago"
	}
	return fmt.Sprintf("%d days ago", days)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// instructions is the request's last block.
func instructions(scope memory.Scope, now time.Time, maxTurns int) string {
	if maxTurns <= 0 {
		maxTurns = 5
	}
	return execute(instructionsTemplate, struct {
		Scope, Today string
		MaxTurns     int
	}{scope.String(), now.UTC().Format(time.DateOnly), maxTurns})
}

// execute renders one of the package's prompt templates. They only print
// strings and numbers, so they cannot fail on any data: a failure is a
// broken template file, found by the first test that builds a request.
func execute(t *template.Template, data any) string {
	var b strings.Builder
	if err := t.Execute(&b, data); err != nil {
		panic(fmt.Sprintf("extraction: the prompt template %s: %v", t.Name(), err))
	}
	return b.String()
}

// trim cuts tool results and tool inputs of c to their bounds; what the
// user and the agent wrote stays whole.
func trim(c turn.Content, resultBytes, inputBytes int) turn.Content {
	out := make(turn.Content, len(c))
	for i, b := range c {
		switch b.Type {
		case turn.BlockToolResult:
			if b.Content != nil {
				inner := make(turn.Content, len(*b.Content))
				for j, ib := range *b.Content {
					if ib.Type == turn.BlockText {
						ib.Text = compaction.Clip(ib.Text, resultBytes)
					}
					inner[j] = ib
				}
				b.Content = &inner
			}
		case turn.BlockToolUse:
			if len(b.Input) > inputBytes {
				cut, _ := json.Marshal(map[string]string{"truncated_input": compaction.Clip(string(b.Input), inputBytes)})
				b.Input = cut
			}
		}
		out[i] = b
	}
	return out
}
