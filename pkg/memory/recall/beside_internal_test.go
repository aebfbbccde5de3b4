package recall

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// TestPrefetchedCountsWordsAsFieldsSplitsThem: Prefetched says of every
// message what splitting its user text into words says — reminders taken
// out (even from inside a word), Unicode spaces, invalid UTF-8, several
// blocks, tool results and assistant messages, messages a compaction made.
func TestPrefetchedCountsWordsAsFieldsSplitsThem(t *testing.T) {
	texts := []string{
		"", " ", "one", " one ", "two words", "one\u00a0two", "one\u3000two", "one\u200btwo",
		"\xffbad \xfe", "\xff", "tab\tsep", "new\nline", "<system-reminder>a b c</system-reminder>",
		"<system-reminder>a b</system-reminder>word", "wo<system-reminder>x y</system-reminder>rd",
		"left <system-reminder>x</system-reminder> right", "<system-reminder>never closed",
		"word <system-reminder>never closed",
	}
	var messages []view.Message
	for _, a := range texts {
		messages = append(messages, view.Message{Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: a}}})
		for _, b := range texts {
			messages = append(messages, view.Message{Role: "user", Content: turn.Content{
				{Type: turn.BlockText, Text: a}, {Type: turn.BlockToolResult, ToolUseID: "t"}, {Type: turn.BlockText, Text: b},
			}})
		}
	}
	messages = append(messages,
		view.Message{Role: "assistant", Content: turn.Content{{Type: turn.BlockText, Text: "two words"}}},
		view.Message{Role: "user", Position: -1, Content: turn.Content{{Type: turn.BlockText, Text: "made by a compaction"}}},
	)
	prefetched := 0
	for _, m := range messages {
		want := len(strings.Fields(UserText(m))) > 1
		require.Equal(t, want, Prefetched(m), "%q", m.Content)
		if want {
			prefetched++
		}
	}
	require.Positive(t, prefetched)
	require.Less(t, prefetched, len(messages))
}
