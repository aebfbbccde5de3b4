package accounting_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// toolResult is a tool_result block whose content is the string s.
func toolResult(toolUseID, s string) turn.Block {
	c := turn.Content{{Type: turn.BlockText, Text: s}}
	return turn.Block{Type: turn.BlockToolResult, ToolUseID: toolUseID, Content: &c}
}

// userMessage carries blocks as one user message.
func userMessage(uuid string, blocks ...turn.Block) turn.Message {
	return turn.Message{UUID: uuid, Role: "user", Content: blocks}
}

// noneFrozen knows no earlier decision.
func noneFrozen(string) (string, bool, error) { return "", false, nil }

// idFor names stored results after their tool_use id.
func idFor(toolUseID string) string { return "tr_" + toolUseID }

// resultOf is the text of the tool result at msgs[mi].Content[bi].
func resultOf(t *testing.T, msgs []turn.Message, mi, bi int) string {
	t.Helper()
	b := msgs[mi].Content[bi]
	require.Equal(t, turn.BlockToolResult, b.Type)
	require.NotNil(t, b.Content)
	require.Len(t, *b.Content, 1)
	return (*b.Content)[0].Text
}

// snapshot encodes messages, to show later that they were not changed.
func snapshot(t *testing.T, msgs []turn.Message) string {
	t.Helper()
	data, err := turn.Marshal(msgs)
	require.NoError(t, err)
	return string(data)
}

func TestDefaultOffload(t *testing.T) {
	t.Parallel()
	// docs/token-accounting.md: over 50,000 characters, 2,000 bytes of preview, 200,000 a turn.
	require.Equal(t, accounting.Offload{ThresholdChars: 50_000, PreviewBytes: 2_000, TurnCapChars: 200_000}, accounting.DefaultOffload())
}

func TestOffloadThreshold(t *testing.T) {
	t.Parallel()

	off := accounting.DefaultOffload()
	tests := []struct {
		name      string
		result    string
		offloaded bool
	}{
		{"one below", strings.Repeat("x", off.ThresholdChars-1), false},
		{"exactly at the threshold", strings.Repeat("x", off.ThresholdChars), false},
		{"one above", strings.Repeat("x", off.ThresholdChars+1), true},
		{"two below", strings.Repeat("x", 49_999), false},
		{"two above", strings.Repeat("x", 50_001), true},
		// Characters, not bytes: 30,000 two-byte characters are 60,000 bytes.
		{"many bytes, few characters", strings.Repeat("é", 30_000), false},
		{"multibyte one above", strings.Repeat("é", off.ThresholdChars+1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			msgs := []turn.Message{userMessage("u1", toolResult("toolu_1", tt.result))}
			before := snapshot(t, msgs)

			out, decisions, err := off.Apply(msgs, noneFrozen, idFor)
			require.NoError(t, err)
			require.Equal(t, before, snapshot(t, msgs), "input messages changed")
			if !tt.offloaded {
				require.Empty(t, decisions)
				require.Equal(t, tt.result, resultOf(t, out, 0, 0))
				return
			}
			require.Len(t, decisions, 1)
			d := decisions[0]
			require.Equal(t, accounting.Decision{
				MessageUUID: "u1", ToolUseID: "toolu_1", ToolResultID: "tr_toolu_1",
				Original: tt.result, SizeChars: utf8.RuneCountInString(tt.result),
				Replacement: d.Replacement,
			}, d)
			require.Equal(t, d.Replacement, resultOf(t, out, 0, 0))
		})
	}
}

func TestOffloadPreview(t *testing.T) {
	t.Parallel()

	off := accounting.DefaultOffload()
	// One ASCII byte, then three-byte runes: PreviewBytes (2,000) falls inside
	// a rune, since 2,000 − 1 is not a multiple of 3.
	const euro = "€"
	original := "a" + strings.Repeat(euro, off.ThresholdChars)
	require.NotZero(t, (off.PreviewBytes-1)%len(euro), "the cut must fall inside a rune")
	wantHead := 1 + len(euro)*((off.PreviewBytes-1)/len(euro)) // whole runes that fit

	msgs := []turn.Message{userMessage("u1", toolResult("toolu_big", original))}
	_, decisions, err := off.Apply(msgs, noneFrozen, idFor)
	require.NoError(t, err)
	require.Len(t, decisions, 1)
	repl := decisions[0].Replacement

	require.True(t, strings.HasPrefix(repl, "<persisted-output>"), repl[:40])
	require.True(t, strings.HasSuffix(repl, "</persisted-output>"))
	require.Contains(t, repl, "tr_toolu_big")
	require.Contains(t, repl, "GET /v1/tool-results/tr_toolu_big")
	require.Contains(t, repl, fmt.Sprint(utf8.RuneCountInString(original)), "names the original size")

	_, rest, ok := strings.Cut(repl, "bytes:\n")
	require.True(t, ok, "preview header missing: %s", repl[:200])
	head, _, ok := strings.Cut(rest, "\n…\n</persisted-output>")
	require.True(t, ok, "a cut preview ends with an ellipsis")
	require.Len(t, head, wantHead)
	require.LessOrEqual(t, len(head), off.PreviewBytes)
	require.True(t, utf8.ValidString(head), "cut on a rune boundary")
	require.True(t, strings.HasPrefix(original, head))
	require.Contains(t, repl, fmt.Sprintf("First %d bytes:", len(head)))

	// The replacement is small enough that it never needs offloading itself.
	require.Less(t, utf8.RuneCountInString(repl), off.ThresholdChars)
}

func TestOffloadPreviewOfShortResult(t *testing.T) {
	t.Parallel()

	// A result under PreviewBytes, offloaded because of a lower threshold,
	// is shown whole and without an ellipsis.
	off := accounting.Offload{ThresholdChars: 10, PreviewBytes: 2_000, TurnCapChars: 200_000}
	original := "0123456789ABCDEF"
	_, decisions, err := off.Apply([]turn.Message{userMessage("u1", toolResult("t", original))}, noneFrozen, idFor)
	require.NoError(t, err)
	require.Len(t, decisions, 1)
	require.Contains(t, decisions[0].Replacement, "bytes:\n"+original+"\n</persisted-output>")
	require.NotContains(t, decisions[0].Replacement, "…")
}

func TestOffloadTurnCap(t *testing.T) {
	t.Parallel()

	off := accounting.DefaultOffload()
	// Two results over the threshold go whatever the cap says. The rest are
	// under it; together they exceed the cap, so the largest go first.
	sizes := map[string]int{
		"big_1": 60_000, "big_2": 60_000, // over the threshold
		"r_40a": 40_000, "r_40b": 40_000, "r_40c": 40_000, "r_40d": 40_000,
		"r_45": 45_000, "r_48": 48_000, "r_10": 10_000, "r_41": 41_000,
	}
	order := []string{"r_40a", "big_1", "r_10", "r_45", "r_40b", "r_48", "big_2", "r_40c", "r_41", "r_40d"}
	var msgs []turn.Message
	for i := 0; i < len(order); i += 2 {
		msgs = append(msgs, userMessage(fmt.Sprintf("u%d", i/2),
			toolResult(order[i], strings.Repeat("x", sizes[order[i]])),
			toolResult(order[i+1], strings.Repeat("y", sizes[order[i+1]]))))
	}
	before := snapshot(t, msgs)

	out, decisions, err := off.Apply(msgs, noneFrozen, idFor)
	require.NoError(t, err)
	require.Equal(t, before, snapshot(t, msgs), "input messages changed")
	require.Len(t, out, len(msgs))

	offloaded := map[string]bool{}
	for _, d := range decisions {
		offloaded[d.ToolUseID] = true
		require.Equal(t, sizes[d.ToolUseID], d.SizeChars)
	}
	// Under the threshold: 40·4 + 45 + 48 + 10 + 41 = 304K, 104K over the
	// cap. Taking the largest first, 48K + 45K = 93K is not enough; the 41K
	// makes 134K, leaving 170K ≤ 200K.
	want := map[string]bool{"big_1": true, "big_2": true, "r_48": true, "r_45": true, "r_41": true}
	require.Equal(t, want, offloaded)

	kept := 0
	var keptSizes, droppedSizes []int
	for id, size := range sizes {
		if offloaded[id] {
			if size <= off.ThresholdChars {
				droppedSizes = append(droppedSizes, size)
			}
			continue
		}
		kept += size
		keptSizes = append(keptSizes, size)
	}
	require.LessOrEqual(t, kept, off.TurnCapChars)
	require.Greater(t, kept+slices.Min(droppedSizes), off.TurnCapChars, "no more offloaded than needed")
	require.GreaterOrEqual(t, slices.Min(droppedSizes), slices.Max(keptSizes), "largest first")

	// Every result is either untouched or its decision's replacement.
	for mi, m := range out {
		for bi, b := range m.Content {
			text := resultOf(t, out, mi, bi)
			if offloaded[b.ToolUseID] {
				require.True(t, strings.HasPrefix(text, "<persisted-output>"))
				require.Contains(t, text, "tr_"+b.ToolUseID)
			} else {
				require.Len(t, text, sizes[b.ToolUseID])
			}
		}
	}
}

func TestOffloadFrozenDecisionWins(t *testing.T) {
	t.Parallel()

	off := accounting.DefaultOffload()
	const recorded = "<persisted-output>\nrecorded earlier, kept byte for byte\n</persisted-output>"
	frozen := func(toolUseID string) (string, bool, error) {
		if toolUseID == "toolu_old" {
			return recorded, true, nil
		}
		return "", false, nil
	}
	var named []string
	ids := func(toolUseID string) string {
		named = append(named, toolUseID)
		return idFor(toolUseID)
	}
	small := "now only a few characters"
	msgs := []turn.Message{userMessage("u1",
		toolResult("toolu_old", small),
		toolResult("toolu_new", "also small"),
	)}

	out, decisions, err := off.Apply(msgs, frozen, ids)
	require.NoError(t, err)
	require.Equal(t, recorded, resultOf(t, out, 0, 0), "the recorded replacement, byte for byte")
	require.Equal(t, "also small", resultOf(t, out, 0, 1))
	require.Equal(t, small, resultOf(t, msgs, 0, 0), "input unchanged")
	require.Empty(t, named, "no new stored copy for a recorded decision")
	require.Equal(t, []accounting.Decision{{
		MessageUUID: "u1", ToolUseID: "toolu_old", Original: small,
		SizeChars: utf8.RuneCountInString(small), Replacement: recorded, Recorded: true,
	}}, decisions)

	// Applying again gives the same bytes.
	again, _, err := off.Apply(msgs, frozen, ids)
	require.NoError(t, err)
	require.Equal(t, snapshot(t, out), snapshot(t, again))
}

func TestOffloadFrozenLookupFails(t *testing.T) {
	t.Parallel()

	boom := errors.New("store unavailable")
	failing := func(string) (string, bool, error) { return "", false, boom }
	msgs := []turn.Message{userMessage("u1", toolResult("t", "x"))}
	_, _, err := accounting.DefaultOffload().Apply(msgs, failing, idFor)
	require.ErrorIs(t, err, boom)
}

func TestOffloadNilFrozen(t *testing.T) {
	t.Parallel()

	off := accounting.DefaultOffload()
	big := strings.Repeat("x", off.ThresholdChars+1)
	_, decisions, err := off.Apply([]turn.Message{userMessage("u1", toolResult("t", big))}, nil, idFor)
	require.NoError(t, err)
	require.Len(t, decisions, 1)
}

func TestOffloadBlockArrayResults(t *testing.T) {
	t.Parallel()

	off := accounting.DefaultOffload()
	image := func(data string) turn.Block {
		src, err := json.Marshal(map[string]string{"type": "base64", "media_type": "image/png", "data": data})
		require.NoError(t, err)
		return turn.Block{Type: turn.BlockImage, Source: src}
	}
	// A screenshot result: text with characters json.Marshal would escape,
	// and an image whose base64 data alone is over the threshold.
	content := turn.Content{
		{Type: turn.BlockText, Text: "page <title> & body"},
		image(strings.Repeat("A", off.ThresholdChars)),
	}
	msgs := []turn.Message{userMessage("u1", turn.Block{Type: turn.BlockToolResult, ToolUseID: "toolu_shot", Content: &content})}

	_, decisions, err := off.Apply(msgs, noneFrozen, idFor)
	require.NoError(t, err)
	require.Len(t, decisions, 1)
	d := decisions[0]
	// Stored as the JSON of the block array, as sent: nothing HTML-escaped.
	want, err := turn.Marshal(content)
	require.NoError(t, err)
	require.Equal(t, string(want), d.Original)
	require.Contains(t, d.Original, "page <title> & body")
	require.Equal(t, utf8.RuneCountInString(d.Original), d.SizeChars)
	var back turn.Content
	require.NoError(t, json.Unmarshal([]byte(d.Original), &back))
	require.Equal(t, content, back)
	require.True(t, strings.HasPrefix(d.Replacement, "<persisted-output>"))

	t.Run("small block array stays", func(t *testing.T) {
		t.Parallel()
		small := turn.Content{{Type: turn.BlockText, Text: "ok"}, image("iVBORw0KGgo=")}
		msgs := []turn.Message{userMessage("u1", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t", Content: &small})}
		out, decisions, err := off.Apply(msgs, noneFrozen, idFor)
		require.NoError(t, err)
		require.Empty(t, decisions)
		require.Equal(t, small, *out[0].Content[0].Content)
	})

	t.Run("text blocks are joined", func(t *testing.T) {
		t.Parallel()
		// Neither half is over the threshold; joined with a newline they are.
		half := strings.Repeat("z", off.ThresholdChars/2)
		texts := turn.Content{{Type: turn.BlockText, Text: half}, {Type: turn.BlockText, Text: half}}
		msgs := []turn.Message{userMessage("u1", turn.Block{Type: turn.BlockToolResult, ToolUseID: "t", Content: &texts})}
		_, decisions, err := off.Apply(msgs, noneFrozen, idFor)
		require.NoError(t, err)
		require.Len(t, decisions, 1)
		require.Equal(t, half+"\n"+half, decisions[0].Original)
		require.Equal(t, 2*len(half)+1, decisions[0].SizeChars)
	})
}

func TestOffloadIgnoresOtherBlocks(t *testing.T) {
	t.Parallel()

	off := accounting.DefaultOffload()
	big := strings.Repeat("x", off.ThresholdChars+1)
	msgs := []turn.Message{
		{UUID: "a1", Role: "assistant", Content: turn.Content{{Type: turn.BlockText, Text: big}}},
		userMessage("u1", turn.Block{Type: turn.BlockToolResult, ToolUseID: "no_content"}),
	}
	out, decisions, err := off.Apply(msgs, noneFrozen, idFor)
	require.NoError(t, err)
	require.Empty(t, decisions)
	require.Equal(t, msgs, out)
}
