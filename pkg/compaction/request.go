package compaction

import (
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Message roles of the Messages API.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// requestMessages turns the messages to summarize into a conversation the
// Messages API accepts, ending with the summary instructions (see
// Conversation).
func requestMessages(msgs []view.Message, custom string) []llm.Message {
	return Conversation(msgs, textBlock(instructions(custom)))
}

// Conversation turns stored messages into a conversation the Messages API
// accepts, ending with a user message whose last blocks are tail (the
// caller's instructions): thinking is dropped, media become [image] /
// [document], blank text and empty messages go, consecutive messages of one
// role are merged, the first message is the user's, every tool call is
// answered in the next message and every tool result answers a call of the
// message before it (a result whose call is missing becomes plain text; a
// call whose result is missing gets a stand-in result). RecoverConversation
// undoes it.
func Conversation(msgs []view.Message, tail ...turn.Block) []llm.Message {
	var out []llm.Message
	for _, m := range msgs {
		role := roleUser
		if m.Role == roleAssistant {
			role = roleAssistant
		}
		if c := requestContent(m.Content, role); len(c) > 0 {
			out = appendMerged(out, llm.Message{Role: role, Content: c})
		}
	}
	if len(out) > 0 && out[0].Role == roleAssistant {
		out = append([]llm.Message{{Role: roleUser, Content: turn.Content{textBlock(leadingPlaceholder)}}}, out...)
	}
	out = appendMerged(out, llm.Message{Role: roleUser, Content: append(turn.Content(nil), tail...)})
	pairTools(out)
	return out
}

func textBlock(s string) turn.Block { return turn.Block{Type: turn.BlockText, Text: s} }

// appendMerged appends m, or merges its content into the last message when
// both have the same role.
func appendMerged(out []llm.Message, m llm.Message) []llm.Message {
	if n := len(out); n > 0 && out[n-1].Role == m.Role {
		out[n-1].Content = append(out[n-1].Content, m.Content...)
		return out
	}
	return append(out, m)
}

// requestContent copies the blocks a summary request may carry, without
// cache_control or citations (the blocks they point at may be gone).
func requestContent(c turn.Content, role string) turn.Content {
	out := make(turn.Content, 0, len(c))
	for _, b := range c {
		switch b.Type {
		case turn.BlockText:
			if strings.TrimSpace(b.Text) != "" {
				out = append(out, textBlock(b.Text))
			}
		case turn.BlockThinking, turn.BlockRedactedThinking:
		case turn.BlockImage:
			out = append(out, textBlock(imagePlaceholder))
		case turn.BlockDocument:
			out = append(out, textBlock(documentPlaceholder))
		case turn.BlockToolUse:
			if role != roleAssistant {
				out = append(out, textBlock("[Tool call "+b.Name+": "+string(b.Input)+"]"))
				continue
			}
			out = append(out, turn.Block{Type: turn.BlockToolUse, ID: b.ID, Name: b.Name, Input: b.Input})
		case turn.BlockToolResult:
			r := turn.Block{Type: turn.BlockToolResult, ToolUseID: b.ToolUseID, IsError: b.IsError, Content: resultContent(b.Content)}
			if role != roleUser {
				r = orphanText(r)
			}
			out = append(out, r)
		default:
			out = append(out, textBlock(unknownBlockText(b.Type)))
		}
	}
	return out
}

// resultContent copies a tool result's content as text blocks only.
func resultContent(c *turn.Content) *turn.Content {
	if c == nil {
		return nil
	}
	out := make(turn.Content, 0, len(*c))
	for _, b := range *c {
		switch b.Type {
		case turn.BlockText:
			if strings.TrimSpace(b.Text) != "" {
				out = append(out, textBlock(b.Text))
			}
		case turn.BlockImage:
			out = append(out, textBlock(imagePlaceholder))
		case turn.BlockDocument:
			out = append(out, textBlock(documentPlaceholder))
		default:
			out = append(out, textBlock(unknownBlockText(b.Type)))
		}
	}
	if len(out) == 0 {
		return nil
	}
	return &out
}

// orphanText is the text block a tool result becomes when its call is not
// in the message before it.
func orphanText(r turn.Block) turn.Block {
	lead := orphanResultLead
	if r.IsError {
		lead = orphanErrorLead
	}
	return textBlock(lead + resultText(r.Content))
}

// pairTools makes every user message answer exactly the tool calls of the
// assistant message before it, tool results first.
func pairTools(msgs []llm.Message) {
	for i := range msgs {
		if msgs[i].Role != roleUser {
			continue
		}
		var calls []string
		open := map[string]bool{}
		if i > 0 {
			for _, b := range msgs[i-1].Content {
				if b.Type == turn.BlockToolUse && !open[b.ID] {
					calls = append(calls, b.ID)
					open[b.ID] = true
				}
			}
		}
		var results, rest turn.Content
		for _, b := range msgs[i].Content {
			switch {
			case b.Type != turn.BlockToolResult:
				rest = append(rest, b)
			case open[b.ToolUseID]:
				results = append(results, b)
				delete(open, b.ToolUseID)
			default:
				rest = append(rest, orphanText(b))
			}
		}
		for _, id := range calls {
			if open[id] {
				stub := turn.Content{textBlock(missingResult)}
				results = append(results, turn.Block{Type: turn.BlockToolResult, ToolUseID: id, Content: &stub})
			}
		}
		msgs[i].Content = append(results, rest...)
	}
}
