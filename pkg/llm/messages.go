package llm

import (
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Normalize makes a conversation one that model APIs accept, whatever
// slice of a transcript it is: consecutive messages of the same role are
// merged (see MergeConsecutive), and tool calls and results that do not
// pair up become text (see PairTools). The providers apply it to every
// request; the input is not modified.
func Normalize(msgs []Message) []Message {
	return PairTools(MergeConsecutive(msgs))
}

// MergeConsecutive joins consecutive messages of the same role into one,
// the way the Anthropic API reads them, so that a turn whose tool results
// were recorded one message each (as agents write transcripts) pairs up
// with the tool calls before it. In a merged message the tool_result blocks
// come first, in order, as the APIs require, then the other blocks, in
// order. The input is not modified.
func MergeConsecutive(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	for i := 0; i < len(msgs); {
		j := i + 1
		for j < len(msgs) && msgs[j].Role == msgs[i].Role {
			j++
		}
		if j == i+1 {
			out = append(out, msgs[i])
			i = j
			continue
		}
		var results, rest turn.Content
		for _, m := range msgs[i:j] {
			for _, b := range m.Content {
				if b.Type == turn.BlockToolResult {
					results = append(results, b)
				} else {
					rest = append(rest, b)
				}
			}
		}
		out = append(out, Message{Role: msgs[i].Role, Content: append(results, rest...)})
		i = j
	}
	return out
}

// PairTools turns into text the tool_use blocks that the next message does
// not answer (a transcript cut after a call, say) and the tool_result
// blocks that answer no tool_use of the message before (the call was cut
// off, by compaction say). APIs refuse both; as text, what they said
// stays in the conversation. Messages should be merged first. The input is
// not modified.
func PairTools(msgs []Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		var prev, next turn.Content
		if i > 0 {
			prev = msgs[i-1].Content
		}
		if i+1 < len(msgs) {
			next = msgs[i+1].Content
		}
		out[i] = m
		changed := false
		content := make(turn.Content, len(m.Content))
		for j, b := range m.Content {
			switch {
			case b.Type == turn.BlockToolUse && !has(next, turn.BlockToolResult, b.ID):
				b = turn.Block{Type: turn.BlockText, Text: "[tool call " + b.Name + " " + inputText(b.Input) + ", without a result]"}
				changed = true
			case b.Type == turn.BlockToolResult && !has(prev, turn.BlockToolUse, b.ToolUseID):
				b = turn.Block{Type: turn.BlockText, Text: "[result of an earlier tool call]\n" + resultText(b)}
				changed = true
			}
			content[j] = b
		}
		if changed {
			out[i].Content = content
		}
	}
	return out
}

// has reports whether c holds a block of type typ for the tool call id.
func has(c turn.Content, typ, id string) bool {
	for _, b := range c {
		if b.Type == typ && (b.ID == id && typ == turn.BlockToolUse || b.ToolUseID == id && typ == turn.BlockToolResult) {
			return true
		}
	}
	return false
}

func inputText(in []byte) string {
	if len(in) == 0 {
		return "{}"
	}
	return string(in)
}

// resultText is a tool result's content as text; media become placeholders.
func resultText(b turn.Block) string {
	var parts []string
	if b.IsError {
		parts = append(parts, "Error:")
	}
	if b.Content != nil {
		for _, c := range *b.Content {
			switch c.Type {
			case turn.BlockText:
				parts = append(parts, c.Text)
			case turn.BlockImage:
				parts = append(parts, "[image]")
			case turn.BlockDocument:
				parts = append(parts, "[document]")
			}
		}
	}
	return strings.Join(parts, "\n")
}
