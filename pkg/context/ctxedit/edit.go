package ctxedit

import (
	"slices"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Context is what the edits decide on.
type Context struct {
	// Messages are the stored messages the context shows after its latest
	// compaction's head, in order; the head is never edited.
	Messages []view.Message
	// Cleared holds the tool_use ids whose results micro-compaction cleared.
	Cleared map[string]bool
	// Cuts are the edits' decisions recorded so far.
	Cuts assembly.Cuts
	// InputTokens is the context's count, with the recorded cuts taken out.
	InputTokens int64
}

// Cut is what edits newly decide: the tool_use ids whose results and whose
// inputs to clear, and the uuids of the assistant messages whose thinking
// to drop, each in conversation order, and the input tokens that saves.
// The caller records it (and renders with it from then on).
type Cut struct {
	ToolUses []string
	Inputs   []string
	Thinking []string
	Saved    int64
}

// Empty reports whether the cut clears nothing.
func (c Cut) Empty() bool { return len(c.ToolUses) == 0 && len(c.Inputs) == 0 && len(c.Thinking) == 0 }

// With returns cuts with c added; cuts is not changed.
func With(cuts assembly.Cuts, c Cut) assembly.Cuts {
	add := func(m map[string]bool, ids []string) map[string]bool {
		out := make(map[string]bool, len(m)+len(ids))
		for k, v := range m {
			out[k] = v
		}
		for _, id := range ids {
			out[id] = true
		}
		return out
	}
	return assembly.Cuts{ToolUses: add(cuts.ToolUses, c.ToolUses), Inputs: add(cuts.Inputs, c.Inputs), Thinking: add(cuts.Thinking, c.Thinking)}
}

// Apply returns msgs as a context with cuts shows them (see assembly.Shown);
// msgs is not changed. A proxy that holds a request's messages renders
// them with it.
func Apply(msgs []view.Message, cleared map[string]bool, cuts assembly.Cuts) []view.Message {
	return assembly.Shown(msgs, cleared, cuts)
}

// Decide returns the new cut cfg's clearing edits make on c, in the order
// the edits are given, each seeing the context as the ones before it left
// it (their cut applied, their saving out of the count). An edit whose
// trigger is not passed, or whose cut would save less than its
// clear_at_least, cuts nothing. The compaction edit is not decided here.
func (cfg Config) Decide(c Context) Cut {
	var out Cut
	for _, e := range cfg.Edits {
		var next Cut
		switch {
		case e.ToolUses != nil:
			next = e.ToolUses.decide(c)
		case e.Thinking != nil:
			next = e.Thinking.decide(c)
		}
		if next.Empty() {
			continue
		}
		out.ToolUses = append(out.ToolUses, next.ToolUses...)
		out.Inputs = append(out.Inputs, next.Inputs...)
		out.Thinking = append(out.Thinking, next.Thinking...)
		out.Saved += next.Saved
		c.Cuts = With(c.Cuts, next)
		c.InputTokens = max(c.InputTokens-next.Saved, 0)
	}
	return out
}

// pair is a tool use of an assistant message answered by a tool_result
// of a later user message: what clearing either side saves.
type pair struct {
	id, name    string
	result      turn.Block // the first result
	use         turn.Block
	resultSaves int64
	inputSaves  int64
}

// pairs lists the tool uses of msgs answered in msgs, in the order of the
// uses. A tool_use id used twice counts at its first use; a use no result
// answers (yet) is never listed, so never cleared.
func pairs(msgs []view.Message) []pair {
	var uses []turn.Block
	seen := map[string]bool{}
	results := map[string]turn.Block{}
	for _, m := range msgs {
		for _, b := range m.Content {
			switch {
			case m.Role == "assistant" && b.Type == turn.BlockToolUse && !seen[b.ID]:
				seen[b.ID] = true
				uses = append(uses, b)
			case m.Role == "user" && b.Type == turn.BlockToolResult && seen[b.ToolUseID]:
				if _, ok := results[b.ToolUseID]; !ok {
					results[b.ToolUseID] = b
				}
			}
		}
	}
	out := make([]pair, 0, len(results))
	for _, u := range uses {
		r, ok := results[u.ID]
		if !ok {
			continue
		}
		out = append(out, pair{
			id: u.ID, name: u.Name, result: r, use: u,
			resultSaves: tokens.EstimateBlock(r) - tokens.EstimateBlock(assembly.ClearedBlock(r)),
			inputSaves:  tokens.EstimateBlock(u) - tokens.EstimateBlock(assembly.ClearedInputBlock(u)),
		})
	}
	return out
}

func (e ToolUses) decide(c Context) Cut {
	if e.Trigger.Unit == UnitInputTokens && c.InputTokens <= e.Trigger.Value {
		return Cut{} // before reading the messages: most requests end here
	}
	ps := pairs(c.Messages)
	resultCleared := func(id string) bool { return c.Cleared[id] || c.Cuts.ToolUses[id] }
	if e.Trigger.Unit == UnitToolUses {
		live := 0
		for _, p := range ps {
			if !resultCleared(p.id) {
				live++
			}
		}
		if int64(live) <= e.Trigger.Value {
			return Cut{}
		}
	}
	ps = slices.DeleteFunc(ps, func(p pair) bool { return e.Excludes(p.name) })
	if len(ps) <= e.Keep {
		return Cut{}
	}
	var cut Cut
	for _, p := range ps[:len(ps)-e.Keep] {
		if !resultCleared(p.id) && p.resultSaves > 0 {
			cut.ToolUses = append(cut.ToolUses, p.id)
			cut.Saved += p.resultSaves
		}
		if e.ClearsInput(p.name) && !c.Cuts.Inputs[p.id] && p.inputSaves > 0 {
			cut.Inputs = append(cut.Inputs, p.id)
			cut.Saved += p.inputSaves
		}
	}
	if cut.Empty() || cut.Saved < e.ClearAtLeast {
		return Cut{}
	}
	return cut
}

// thinkingTurns groups the assistant messages of msgs that hold thinking
// by turn, in order: a turn starts at each user message that is more than
// tool results (a prompt), so the responses of one tool loop are one turn.
// Turns without thinking are left out.
func thinkingTurns(msgs []view.Message) [][]view.Message {
	var out [][]view.Message
	var cur []view.Message
	flush := func() {
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur = nil
	}
	for _, m := range msgs {
		switch m.Role {
		case "user":
			if prompt(m) {
				flush()
			}
		case "assistant":
			if holdsThinking(m) {
				cur = append(cur, m)
			}
		}
	}
	flush()
	return out
}

// prompt reports whether user message m holds more than tool results.
func prompt(m view.Message) bool {
	for _, b := range m.Content {
		if b.Type != turn.BlockToolResult {
			return true
		}
	}
	return len(m.Content) == 0
}

func holdsThinking(m view.Message) bool {
	for _, b := range m.Content {
		if b.Type == turn.BlockThinking || b.Type == turn.BlockRedactedThinking {
			return true
		}
	}
	return false
}

// thinkingSaves is what dropping m's thinking saves: 0 when m holds
// nothing else (assembly keeps it then).
func thinkingSaves(m view.Message) int64 {
	rest := slices.DeleteFunc(slices.Clone(m.Content), func(b turn.Block) bool {
		return b.Type == turn.BlockThinking || b.Type == turn.BlockRedactedThinking
	})
	if len(rest) == 0 || m.UUID == "" {
		return 0
	}
	return tokens.EstimateContent(m.Content) - tokens.EstimateContent(rest)
}

func (e Thinking) decide(c Context) Cut {
	if e.KeepAll {
		return Cut{}
	}
	turns := thinkingTurns(c.Messages)
	if len(turns) <= e.Keep {
		return Cut{}
	}
	var cut Cut
	for _, t := range turns[:len(turns)-e.Keep] {
		for _, m := range t {
			if n := thinkingSaves(m); n > 0 && !c.Cuts.Thinking[m.UUID] {
				cut.Thinking = append(cut.Thinking, m.UUID)
				cut.Saved += n
			}
		}
	}
	return cut
}

// Applied is one entry of a context_management answer's applied_edits,
// shaped like the provider's: the edit's type and what it clears in the
// context answered; for the compaction edit, the compaction it made. It
// is the API's type: what a report says is what the answer carries.
type Applied = api.AppliedEdit

// Report lists what cfg's clearing edits clear in context c, every cut
// recorded so far counted (not only the latest: the context answered
// shows them all), one entry per edit that clears anything, in the
// order of cfg. The same context reports the same.
func (cfg Config) Report(c Context) []Applied {
	out := []Applied{}
	for _, e := range cfg.Edits {
		var a Applied
		switch {
		case e.ToolUses != nil:
			for _, p := range pairs(c.Messages) {
				var saved int64
				if c.Cuts.ToolUses[p.id] && !c.Cleared[p.id] && p.resultSaves > 0 {
					saved += p.resultSaves
				}
				if c.Cuts.Inputs[p.id] && p.inputSaves > 0 {
					saved += p.inputSaves
				}
				if c.Cuts.ToolUses[p.id] || c.Cuts.Inputs[p.id] {
					a.ClearedToolUses++
					a.ClearedInputTokens += saved
				}
			}
		case e.Thinking != nil:
			for _, t := range thinkingTurns(c.Messages) {
				var saved int64
				for _, m := range t {
					if c.Cuts.Thinking[m.UUID] {
						saved += thinkingSaves(m)
					}
				}
				if saved > 0 {
					a.ClearedThinkingTurns++
					a.ClearedInputTokens += saved
				}
			}
		default:
			continue
		}
		if a.ClearedToolUses > 0 || a.ClearedThinkingTurns > 0 {
			a.Type = e.Type
			out = append(out, a)
		}
	}
	return out
}
