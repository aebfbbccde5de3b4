package compaction

import (
	"context"
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// builtinAnalysis is the analysis part of the builtin answer.
const builtinAnalysis = "No model was used: the summary below is extracted from the conversation's own messages."

// BuiltinSummarizer answers a summary request built by Summarize without a
// model, for the builtin provider: it recovers the conversation from
// req.Messages (without the instruction message and the stand-ins the
// request builder wrote) and answers
// <analysis>…</analysis><summary>Extractive(…)</summary> with the default
// limits and tool names, so the offline path goes through Summarize too.
func BuiltinSummarizer(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, fmt.Errorf("compaction: builtin summary: %w", err)
	}
	msgs, custom := recoverMessages(req.Messages)
	text := "<analysis>" + builtinAnalysis + "</analysis>\n<summary>\n" +
		Extractive(msgs, ExtractLimits{Focus: custom}) + "\n</summary>"
	return llm.Response{Text: text, StopReason: "end_turn", Model: "builtin"}, nil
}

// recoverMessages undoes what requestMessages added (see
// RecoverConversation), when the last block is the summary instructions,
// and returns the custom instructions they carried.
func recoverMessages(msgs []llm.Message) ([]view.Message, string) {
	tail := 0
	if n := len(msgs); n > 0 {
		if c := msgs[n-1].Content; len(c) > 0 && strings.HasPrefix(c[len(c)-1].Text, instructionsLead) {
			tail = 1
		}
	}
	conv, taken := RecoverConversation(msgs, tail)
	var custom string
	if len(taken) > 0 {
		custom = customInstructions(taken[len(taken)-1].Text)
	}
	return conv, custom
}

// customInstructions takes the custom instructions back out of the text
// instructions(custom) wrote: what follows the marker the template puts
// before them.
func customInstructions(text string) string {
	const probe = "\x00"
	marker := strings.TrimSuffix(strings.TrimPrefix(instructions(probe), instructions("")), probe)
	if marker == "" {
		return ""
	}
	_, custom, ok := strings.Cut(text, marker)
	if !ok {
		return ""
	}
	return strings.TrimSpace(custom)
}

// RecoverConversation undoes what Conversation wrote, for builtin handlers
// that answer without a model: it takes the last tail blocks off the final
// message and returns them, drops the leading stand-in, and turns the text
// that orphaned tool results became back into tool results (so they are not
// taken for user messages). The messages come back numbered from 0, with
// their estimates.
func RecoverConversation(msgs []llm.Message, tail int) ([]view.Message, turn.Content) {
	var taken turn.Content
	if n := len(msgs); n > 0 && tail > 0 {
		last := msgs[n-1]
		k := max(len(last.Content)-tail, 0)
		taken = last.Content[k:]
		msgs = append(msgs[:n-1:n-1], llm.Message{Role: last.Role, Content: last.Content[:k]})
	}
	out := make([]view.Message, 0, len(msgs))
	for i, m := range msgs {
		c := make(turn.Content, 0, len(m.Content))
		for _, b := range m.Content {
			if b.Type != turn.BlockText {
				c = append(c, b)
				continue
			}
			switch {
			case i == 0 && b.Text == leadingPlaceholder:
			case strings.HasPrefix(b.Text, orphanResultLead), strings.HasPrefix(b.Text, orphanErrorLead):
				isErr := strings.HasPrefix(b.Text, orphanErrorLead)
				body := strings.TrimPrefix(strings.TrimPrefix(b.Text, orphanResultLead), orphanErrorLead)
				rc := turn.Content{textBlock(body)}
				c = append(c, turn.Block{Type: turn.BlockToolResult, IsError: isErr, Content: &rc})
			default:
				c = append(c, b)
			}
		}
		if len(c) == 0 {
			continue
		}
		out = append(out, view.Message{
			Position: int64(len(out)),
			Role:     m.Role,
			Content:  c,
			Tokens:   tokens.EstimateContent(c),
		})
	}
	return out, taken
}
