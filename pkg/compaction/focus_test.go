package compaction

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func TestFocusTermsAreWhatTheInstructionsName(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"gamma", "toolchain", "migration", "src/build.go"},
		focusTerms("Please keep every detail about the gamma toolchain migration, and src/build.go."))
	require.Empty(t, focusTerms("Keep it short, please."), "nothing named")
}

func TestFocusLinesNameTheTermsMostRecentFirst(t *testing.T) {
	t.Parallel()
	result := turn.Content{{Type: turn.BlockText, Text: "ok\nthe GAMMA build passed\nunrelated"}}
	msgs := []view.Message{
		{Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "Set up gamma."}}},
		{Role: "user", Content: turn.Content{{Type: turn.BlockToolResult, ToolUseID: "t1", Content: &result}}},
		{Role: "assistant", Content: turn.Content{{Type: turn.BlockText, Text: "Set up gamma."}}},
	}
	require.Equal(t, []string{"Set up gamma.", "the GAMMA build passed"}, focusLines(msgs, "the gamma setup", 500, 4_000),
		"case-insensitive, each line once, tool results included")
	require.Equal(t, []string{"Set up gamma."}, focusLines(msgs, "gamma", 500, 20), "bounded")
	require.Nil(t, focusLines(msgs, "keep it short", 500, 4_000))
}

func TestCustomInstructionsComeBackOutOfTheRequest(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Keep the gamma details.", customInstructions(instructions("Keep the gamma details.")))
	require.Empty(t, customInstructions(instructions("")))
}

func TestExtractiveKeepsWhatItsFocusNames(t *testing.T) {
	t.Parallel()
	msgs := []view.Message{
		{Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "Build it."}}},
		{Role: "assistant", Content: turn.Content{{Type: turn.BlockText, Text: "The gamma step needs --no-cache."}}},
	}
	require.NotContains(t, Extractive(msgs, ExtractLimits{}), "instructions")
	got := Extractive(msgs, ExtractLimits{Focus: "Keep the gamma steps."})
	require.Contains(t, got, "The compaction's instructions: > Keep the gamma steps.")
	require.Contains(t, got, "- The gamma step needs --no-cache.")
}
