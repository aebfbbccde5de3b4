// Package extraction holds what long-term memory extraction (see docs/memory.md)
// asks of a model after a user turn — the rules of what to save and what
// not, the conversation since the last extraction with its tool results
// trimmed, the manifest of the scope's memories — and the builtin
// extractor that answers the same request without a model: it saves the
// user's explicit requests ("remember that …", "from now on …") and
// corrections ("don't …", "stop …") as feedback memories, and nothing
// else. The model acts through the memory tools of one scope
// (pkg/memtools); the extractor service runs the loop.
package extraction

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/pkg/view"
)

// systemPrompt frames every extraction. It is the same for every run, so
// providers cache it; what varies (the scope, the date, the turns) is in
// the last message.
const systemPrompt = `You keep the long-term memory of an AI agent that works with a user across many sessions. ` +
	`After each of the user's turns you read what was said since the last time you looked, and decide whether ` +
	`anything in it deserves to be remembered in future sessions. You act only through the memory tools you are given, ` +
	`which reach one memory scope; you never continue the conversation and never answer the user.

# The four kinds of memory

- user: who the user is — their role, what they know well and what is new to them, how they like to work and to be spoken to. It lets the agent fit its help to this person.
- feedback: how the agent should work, as the user told it — a correction ("don't do that") or a confirmation that an unusual approach was right. Record why, so the rule can be applied sensibly in cases it did not name.
- project: facts about the work that the code and its history do not show — goals, decisions and their reasons, constraints, deadlines, who does what, incidents. These go stale: date them.
- reference: where information lives outside the conversation — a dashboard, a tracker, a runbook, a channel — and what it is for.

# How a memory is written

- name: a few lowercase words joined by '-', saying what the memory is about (deploy-freeze, testing-real-database).
- description: one specific line; it is what later decides whether the memory is shown, so name the subject plainly.
- body, for feedback and project memories: first the rule or the fact in one or two sentences, then a line starting "**Why:**" with the reason (often the user's own words or the incident behind it), then a line starting "**How to apply:**" saying when and how it bears on future work. User and reference memories are a few plain sentences.
- Dates are absolute: turn "today", "on Thursday", "next week" into dates, using the date given below. Never write a relative date.

# What is never saved

- anything the code itself shows: code patterns and conventions, architecture, file paths and the layout of the project;
- git history, and who changed what;
- how a bug was found or fixed (the fix is in the code, the story in the commit);
- what the agent's instructions already say;
- the state of the task at hand: what is being done right now, progress, next steps, todo lists;
- secrets, credentials and personal data that the user did not ask to keep.
If nothing in the new messages is worth keeping, change nothing.

# Working with the scope

- Look at the manifest of the scope's memories first. When a memory on the subject exists, update it (read it, then edit or rewrite it) rather than writing a second one; correct a memory that the new messages contradict.
- New memories are listed in the scope's index by themselves; edit the index only to fix a hook or the order.
- You have only a few turns: make the reads you need together in one turn, then the writes together in the next, then stop.`

// instructionsLead starts the last block of every request; the builtin
// extractor recognizes the first turn of a run by it.
const instructionsLead = "Extract long-term memories from the conversation above."

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
	return llm.Request{
		Tenant: in.Tenant,
		Task:   llm.TaskExtraction,
		Model:  in.Model,
		System: systemPrompt,
		Messages: compaction.Conversation(msgs,
			turn.Block{Type: turn.BlockText, Text: Manifest(in.Scope, in.Manifest, in.Now)},
			turn.Block{Type: turn.BlockText, Text: instructions(in.Scope, in.Now, in.MaxTurns)},
		),
		MaxTokens: DefaultMaxOutputTokens,
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
	return fmt.Sprintf(`%s They are the messages of one session since its memories were last extracted; the manifest of the memories %s already holds is just above.

Today is %s (UTC). Save to %s what these messages teach that will still matter in later sessions, following the rules you were given: the right kind, the body's shape, absolute dates, nothing the code or the instructions already say, and an update of an existing memory rather than a near duplicate. You have at most %d turns with the tools; when you are done, or when there is nothing to save, answer without a tool call.`,
		instructionsLead, scope, now.UTC().Format(time.DateOnly), scope, maxTurns)
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
