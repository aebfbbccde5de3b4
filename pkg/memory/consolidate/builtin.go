package consolidate

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Builtin answers the dreaming task without a model, the way a model runs
// the consolidation loop: it calls the memory tools and reads their
// answers. First it lists the scope's memories and reads the index, then
// reads every memory listed, then makes the changes Plan computes from what
// it read (memory_write for each rewritten or merged memory, memory_delete
// for each duplicate, memory_index_write with the new index), and then ends
// its turn with a summary. It does not search transcripts: it has no
// judgement to apply to them. The limits it plans for are those the
// request states (FormatLimits), else the defaults.
func Builtin(_ context.Context, req llm.Request) (llm.Response, error) {
	c := readConversation(req.Messages)
	turnNo := c.assistantTurns + 1
	switch {
	case !c.called(memtools.ToolList):
		return toolCalls(turnNo, call(memtools.ToolList, struct{}{}), call(memtools.ToolIndexRead, struct{}{})), nil
	case !c.called(memtools.ToolRead):
		names := memtools.ParseList(c.result(memtools.ToolList))
		if len(names) == 0 {
			return llm.Response{Text: "The scope has no memories: nothing to consolidate."}, nil
		}
		calls := make([]llm.ToolCall, 0, len(names))
		for _, n := range names {
			calls = append(calls, call(memtools.ToolRead, map[string]string{"name": string(n)}))
		}
		return toolCalls(turnNo, calls...), nil
	case !c.called(memtools.ToolWrite) && !c.called(memtools.ToolDelete) && !c.called(memtools.ToolIndexWrite):
		var ms []memory.Memory
		for _, r := range c.results(memtools.ToolRead) {
			if m, err := memtools.ParseRead(r); err == nil {
				ms = append(ms, m)
			}
		}
		limits := limitsIn(req)
		plan := Plan(ms, indexLines(c.result(memtools.ToolIndexRead)), limits)
		var calls []llm.ToolCall
		for _, d := range plan.Writes {
			calls = append(calls, call(memtools.ToolWrite, map[string]string{
				"name": string(d.Name), "description": d.Description, "type": string(d.Type), "body": d.Body,
			}))
		}
		for _, d := range plan.Deletes {
			calls = append(calls, call(memtools.ToolDelete, map[string]string{"name": string(d.Name), "reason": d.Reason}))
		}
		if len(plan.Index) > 0 {
			calls = append(calls, call(memtools.ToolIndexWrite, map[string]string{"content": memory.FormatIndex(plan.Index)}))
		}
		if len(calls) == 0 {
			return llm.Response{Text: "The memories are consolidated already: nothing to change."}, nil
		}
		return llm.Response{Text: plan.Summary(), ToolCalls: ids(turnNo, calls)}, nil
	}
	written, deleted, failed := 0, 0, 0
	for _, x := range c.calls {
		switch {
		case x.isError:
			failed++
		case x.name == memtools.ToolWrite:
			written++
		case x.name == memtools.ToolDelete:
			deleted++
		}
	}
	return llm.Response{Text: fmt.Sprintf("Done: %d memories written, %d deleted, %d changes refused.", written, deleted, failed)}, nil
}

// exchange is one tool call of the conversation and its result.
type exchange struct {
	name    string
	result  string
	isError bool
}

type conversation struct {
	calls          []*exchange
	assistantTurns int
}

func readConversation(msgs []llm.Message) conversation {
	var c conversation
	byID := map[string]*exchange{}
	for _, m := range msgs {
		if m.Role == "assistant" {
			c.assistantTurns++
		}
		for _, b := range m.Content {
			switch b.Type {
			case turn.BlockToolUse:
				x := &exchange{name: b.Name}
				byID[b.ID] = x
				c.calls = append(c.calls, x)
			case turn.BlockToolResult:
				if x, ok := byID[b.ToolUseID]; ok {
					x.isError = b.IsError
					if b.Content != nil {
						x.result = contentText(*b.Content)
					}
				}
			}
		}
	}
	return c
}

func contentText(c turn.Content) string {
	var parts []string
	for _, b := range c {
		if b.Type == turn.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (c conversation) called(tool string) bool {
	for _, x := range c.calls {
		if x.name == tool {
			return true
		}
	}
	return false
}

// result is the latest successful result of tool ("" when none).
func (c conversation) result(tool string) string {
	r := c.results(tool)
	if len(r) == 0 {
		return ""
	}
	return r[len(r)-1]
}

// results are the successful results of tool, in order.
func (c conversation) results(tool string) []string {
	var out []string
	for _, x := range c.calls {
		if x.name == tool && !x.isError {
			out = append(out, x.result)
		}
	}
	return out
}

// indexLines reads the lines of an index that parse.
func indexLines(content string) []memory.Line {
	var out []memory.Line
	for _, raw := range strings.Split(content, "\n") {
		if l, err := memory.ParseLine(strings.TrimSpace(raw)); err == nil {
			out = append(out, l)
		}
	}
	return out
}

func call(name string, input any) llm.ToolCall {
	raw, _ := json.Marshal(input) // maps and structs of strings always encode
	return llm.ToolCall{Name: name, Input: raw}
}

func toolCalls(turnNo int, calls ...llm.ToolCall) llm.Response {
	return llm.Response{ToolCalls: ids(turnNo, calls)}
}

// ids names each call of a turn.
func ids(turnNo int, calls []llm.ToolCall) []llm.ToolCall {
	for i := range calls {
		calls[i].ID = fmt.Sprintf("dream_%d_%d", turnNo, i+1)
	}
	return calls
}

// FormatLimits states the limits a consolidation keeps to, in the words
// Builtin reads back (ParseLimits); the dreamer's prompt carries it.
func FormatLimits(l memory.Limits) string {
	return fmt.Sprintf("Limits: the index holds at most %d lines and %d bytes; an index line is at most %d characters; a memory is at most %d bytes.",
		l.IndexMaxLines, l.IndexMaxBytes, l.IndexLineMaxChars, l.MaxBytes)
}

var limitsRE = regexp.MustCompile(`Limits: the index holds at most (\d+) lines and (\d+) bytes; an index line is at most (\d+) characters; a memory is at most (\d+) bytes\.`)

// ParseLimits finds FormatLimits's sentence in text.
func ParseLimits(text string) (memory.Limits, bool) {
	m := limitsRE.FindStringSubmatch(text)
	if m == nil {
		return memory.Limits{}, false
	}
	var n [4]int
	for i := range n {
		v, err := strconv.Atoi(m[i+1])
		if err != nil {
			return memory.Limits{}, false
		}
		n[i] = v
	}
	l := memory.Limits{IndexMaxLines: n[0], IndexMaxBytes: n[1], IndexLineMaxChars: n[2], MaxBytes: n[3]}
	return l, l.Validate() == nil
}

// limitsIn returns the limits the request states, else the defaults.
func limitsIn(req llm.Request) memory.Limits {
	texts := []string{req.System}
	for _, m := range req.Messages {
		if m.Role == "user" {
			texts = append(texts, contentText(m.Content))
		}
	}
	for _, t := range texts {
		if l, ok := ParseLimits(t); ok {
			return l
		}
	}
	return memory.DefaultLimits()
}
