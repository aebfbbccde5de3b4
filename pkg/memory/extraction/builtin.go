package extraction

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// maxBuiltinWrites bounds the memories one builtin answer writes.
const maxBuiltinWrites = 10

// Bounds of what the builtin writes, in bytes.
const (
	builtinDescriptionBytes = 150
	builtinQuoteBytes       = 300
)

var (
	manifestLine = regexp.MustCompile(`^- ([a-z0-9][a-z0-9_-]*)\.md \[(\w+)\] updated \S+ \([^)]*\): (.*)$`)
	todayLine    = regexp.MustCompile(`Today is (\d{4}-\d{2}-\d{2})`)
)

// Builtin answers an extraction run without a model, for the builtin
// provider (llm.TaskExtraction), the way a model would answer the tool
// loop. On the run's first turn it reads the user's messages out of the
// request (FindRules on each text the user wrote, never the agent's or a
// tool's) and answers with a memory_write call for each explicit request
// or correction: a feedback memory named from its words, a one-line
// description, and a body with the rule, **Why:** (the user's words and
// the date) and **How to apply:**. A rule whose name, or whose
// description, is already in the scope's manifest updates that memory
// instead of making another. On any later turn (the tool results are in)
// it ends the run. Nothing found, it ends the run at once. The answer
// depends only on the request.
func Builtin(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, fmt.Errorf("extraction: builtin: %w", err)
	}
	if !firstTurn(req.Messages) {
		return llm.Response{Text: "Done: the memories are saved.", StopReason: "end_turn"}, nil
	}
	conv, tail := compaction.RecoverConversation(req.Messages, 2)
	if len(tail) != 2 {
		return llm.Response{}, &llm.Error{Kind: llm.KindRequest, Err: fmt.Errorf("extraction: builtin: the request does not end with the manifest and the instructions")}
	}
	existing := parseManifest(tail[0].Text)
	var today time.Time
	if m := todayLine.FindStringSubmatch(tail[1].Text); m != nil {
		today, _ = time.Parse(time.DateOnly, m[1])
	}

	var rules []Rule
	for _, m := range conv {
		if m.Role == "assistant" {
			continue
		}
		for _, b := range m.Content {
			if b.Type == turn.BlockText {
				rules = append(rules, FindRules(b.Text, today)...)
			}
		}
	}
	docs := builtinDocuments(rules, existing, today)
	if len(docs) == 0 {
		return llm.Response{Text: "Nothing in these messages asks to be remembered.", StopReason: "end_turn"}, nil
	}
	calls := make([]llm.ToolCall, len(docs))
	for i, d := range docs {
		input, err := json.Marshal(map[string]string{"name": string(d.Name), "description": d.Description, "type": string(d.Type), "body": d.Body})
		if err != nil {
			return llm.Response{}, fmt.Errorf("extraction: builtin: %w", err)
		}
		calls[i] = llm.ToolCall{ID: fmt.Sprintf("builtin_write_%d", i+1), Name: memtools.ToolWrite, Input: input}
	}
	return llm.Response{
		Text:       fmt.Sprintf("Saving %d of the user's explicit requests and corrections.", len(docs)),
		ToolCalls:  calls,
		StopReason: "tool_use",
	}, nil
}

// firstTurn reports whether msgs end with a run's instructions (rather
// than with the results of the tool calls of an earlier turn).
func firstTurn(msgs []llm.Message) bool {
	if len(msgs) == 0 {
		return false
	}
	c := msgs[len(msgs)-1].Content
	return len(c) > 0 && c[len(c)-1].Type == turn.BlockText && strings.HasPrefix(c[len(c)-1].Text, instructionsLead)
}

// parseManifest reads the names and descriptions of a Manifest block.
func parseManifest(block string) map[memory.Name]string {
	out := map[memory.Name]string{}
	for _, line := range strings.Split(block, "\n") {
		if m := manifestLine.FindStringSubmatch(line); m != nil {
			out[memory.Name(m[1])] = m[3]
		}
	}
	return out
}

// builtinDocuments turns rules into feedback memories, one per name (a
// later rule of the same name wins), at most maxBuiltinWrites.
func builtinDocuments(rules []Rule, existing map[memory.Name]string, today time.Time) []memory.Document {
	byDescription := map[string]memory.Name{}
	for n, d := range existing {
		byDescription[normalize(d)] = n
	}
	var (
		out []memory.Document
		at  = map[memory.Name]int{}
	)
	for _, r := range rules {
		d := builtinDocument(r, today)
		if n, ok := byDescription[normalize(d.Description)]; ok {
			d.Name = n // the same rule, saved under another name before
		}
		if i, ok := at[d.Name]; ok {
			out[i] = d
			continue
		}
		if len(out) == maxBuiltinWrites {
			continue
		}
		at[d.Name] = len(out)
		out = append(out, d)
	}
	return out
}

func normalize(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// builtinDocument is the feedback memory of one rule.
func builtinDocument(r Rule, today time.Time) memory.Document {
	statement := strings.TrimSuffix(r.Text, ".")
	on := ""
	if !today.IsZero() {
		on = " on " + today.Format(time.DateOnly)
	}
	quote := compaction.OneLine(strings.TrimRight(r.Quote, ".!;:, "), builtinQuoteBytes)
	var description, why, how string
	switch r.Kind {
	case KindRemember:
		description = statement
		why = fmt.Sprintf("the user asked for this to be remembered%s: \"%s\".", on, quote)
		how = "take it into account whenever the work touches it, and check that it still holds before relying on it."
	case KindStanding:
		description = "Standing instruction: " + statement
		why = fmt.Sprintf("the user set this as a standing instruction%s: \"%s\".", on, quote)
		how = "follow it in every session of this scope until the user says otherwise."
	default:
		description = "Correction: " + statement
		why = fmt.Sprintf("the user corrected the agent%s: \"%s\".", on, quote)
		how = "do not repeat what was corrected; where a case is unclear, ask rather than guess."
	}
	return memory.Document{
		Name:        r.Name(),
		Description: compaction.OneLine(description, builtinDescriptionBytes),
		Type:        memory.TypeFeedback,
		Body:        r.Text + "\n\n**Why:** " + why + "\n**How to apply:** " + how,
	}
}
