package compaction

import (
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// KeepLimits bounds what session-memory compaction keeps. A field at 0 or
// below takes its default.
type KeepLimits struct {
	// MinTokens is the least the kept messages should hold. Default 10,000.
	MinTokens int64
	// MinTextMessages is the least number of kept messages with a non-blank
	// text block. Default 5.
	MinTextMessages int
	// MaxTokens is the most that extending backwards may reach. Default 40,000.
	MaxTokens int64
}

// Default keep limits.
const (
	DefaultKeepMinTokens       = 10_000
	DefaultKeepMinTextMessages = 5
	DefaultKeepMaxTokens       = 40_000
)

func (l KeepLimits) withDefaults() KeepLimits {
	if l.MinTokens <= 0 {
		l.MinTokens = DefaultKeepMinTokens
	}
	if l.MinTextMessages <= 0 {
		l.MinTextMessages = DefaultKeepMinTextMessages
	}
	if l.MaxTokens <= 0 {
		l.MaxTokens = DefaultKeepMaxTokens
	}
	return l
}

// KeepFrom returns the index in msgs of the first message that
// session-memory compaction keeps (see docs/compaction.md); len(msgs) keeps none.
//
// msgs are the stored messages of the current context, in order. Keeping
// starts right after the message lastSummarizedUUID and extends backwards,
// one message at a time, while the kept messages hold fewer than
// lim.MinTokens tokens (view.Message.Tokens) or fewer than
// lim.MinTextMessages messages with text, and stops before a message that
// would take them past lim.MaxTokens. The messages after the last
// summarized one are always kept, even when they alone pass lim.MaxTokens.
//
// A tool_use is never split from its tool_result. When a kept message holds
// a result whose call is in an earlier message, the messages back to that
// call are kept too if that stays within lim.MaxTokens; otherwise the start
// moves forward past the last kept message holding such a result, so the
// maximum holds (the results moved past are lost with their calls, which
// the summary covers). Once the start has moved forward it only moves
// forward, so the search ends.
//
// A lastSummarizedUUID that is not in msgs is an error.
func KeepFrom(msgs []view.Message, lastSummarizedUUID string, lim KeepLimits) (int, error) {
	lim = lim.withDefaults()
	last := -1
	if lastSummarizedUUID != "" {
		for i := range msgs {
			if msgs[i].UUID == lastSummarizedUUID {
				last = i
				break
			}
		}
	}
	if last < 0 {
		return 0, fmt.Errorf("compaction: keep: last summarized message %q is not in the context", lastSummarizedUUID)
	}

	start := last + 1
	var kept int64
	texts := 0
	for _, m := range msgs[start:] {
		kept += m.Tokens
		if hasText(m.Content) {
			texts++
		}
	}
	for start > 0 && (kept < lim.MinTokens || texts < lim.MinTextMessages) {
		prev := msgs[start-1]
		if kept+prev.Tokens > lim.MaxTokens {
			break
		}
		start--
		kept += prev.Tokens
		if hasText(prev.Content) {
			texts++
		}
	}

	forward := false
	for {
		call, result := splitPair(msgs, start)
		if call < 0 {
			return start, nil
		}
		if !forward {
			if extra := view.Tokens(msgs[call:start]); kept+extra <= lim.MaxTokens {
				kept += extra
				start = call
				continue
			}
			forward = true
		}
		kept -= view.Tokens(msgs[start : result+1])
		start = result + 1
	}
}

// splitPair finds the tool pairs that start splits: call is the index of the
// earliest message before start holding a tool_use whose tool_result is at
// or after start, and result the index of the last message at or after
// start holding such a result; both are -1 when nothing is split.
func splitPair(msgs []view.Message, start int) (call, result int) {
	calls := map[string]int{}
	for i := range start {
		for _, b := range msgs[i].Content {
			if b.Type == turn.BlockToolUse && b.ID != "" {
				calls[b.ID] = i
			}
		}
	}
	call, result = -1, -1
	for i := start; i < len(msgs); i++ {
		for _, b := range msgs[i].Content {
			if b.Type != turn.BlockToolResult {
				continue
			}
			if at, ok := calls[b.ToolUseID]; ok {
				if call < 0 || at < call {
					call = at
				}
				result = i
			}
		}
	}
	return call, result
}

// hasText reports whether the content holds a non-blank text block.
func hasText(c turn.Content) bool {
	for _, b := range c {
		if b.Type == turn.BlockText && strings.TrimSpace(b.Text) != "" {
			return true
		}
	}
	return false
}
