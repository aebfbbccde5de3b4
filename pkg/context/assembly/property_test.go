package assembly_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// gen makes random stored conversations: assistant rounds with text,
// thinking and tool_use blocks, user messages answering them with
// tool_result blocks (text or blocks, sometimes errors) and text.
type gen struct {
	r       *rand.Rand
	nextID  int
	pending []turn.Block // tool_use blocks not answered yet
	pos     int64
}

var (
	toolNames = []string{"Read", "Bash", "Grep", "Edit", "WebFetch", "Task", "TodoWrite", "custom_tool"}
	alphabet  = []rune("abc xyz <>&\"\\\n{}[]:,é漢🙂")
)

func (g *gen) text(maxLen int) string {
	n := g.r.IntN(maxLen + 1)
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[g.r.IntN(len(alphabet))])
	}
	return b.String()
}

func (g *gen) message(role string, blocks turn.Content) view.Message {
	m := view.Message{UUID: fmt.Sprintf("m%d", g.pos), Position: g.pos, Round: g.pos/2 + 1, Role: role, Content: blocks}
	m.Tokens = tokens.EstimateContent(blocks)
	g.pos++
	return m
}

func (g *gen) assistant() view.Message {
	var c turn.Content
	if g.r.IntN(3) == 0 {
		c = append(c, turn.Block{Type: turn.BlockThinking, Thinking: g.text(40), Signature: "sig"})
	}
	n := g.r.IntN(4)
	if n == 0 || g.r.IntN(2) == 0 {
		c = append(c, turn.Block{Type: turn.BlockText, Text: "ok " + g.text(60)})
	}
	for range n {
		g.nextID++
		input, _ := json.Marshal(map[string]string{"arg": g.text(20)})
		b := turn.Block{Type: turn.BlockToolUse, ID: fmt.Sprintf("toolu_%d", g.nextID),
			Name: toolNames[g.r.IntN(len(toolNames))], Input: input}
		c = append(c, b)
		g.pending = append(g.pending, b)
	}
	return g.message("assistant", c)
}

func (g *gen) user() view.Message {
	var c turn.Content
	for _, u := range g.pending {
		var content turn.Content
		if g.r.IntN(4) == 0 {
			content = turn.Content{{Type: turn.BlockText, Text: g.text(30)}, {Type: turn.BlockImage, Source: json.RawMessage(`{"type":"base64","data":"AA"}`)}}
		} else {
			content = turn.Content{{Type: turn.BlockText, Text: "out:" + g.text(300)}}
		}
		c = append(c, turn.Block{Type: turn.BlockToolResult, ToolUseID: u.ID, Content: &content, IsError: g.r.IntN(5) == 0})
	}
	g.pending = nil
	if len(c) == 0 || g.r.IntN(3) == 0 {
		c = append(c, turn.Block{Type: turn.BlockText, Text: "go " + g.text(50)})
	}
	if g.r.IntN(3) == 0 {
		// Backends send their own cache markers; they must not reach the rendering.
		c[len(c)-1].CacheControl = json.RawMessage(`{"type":"ephemeral"}`)
	}
	return g.message("user", c)
}

func encode(t *testing.T, c assembly.Context) []byte {
	t.Helper()
	data, err := c.Encode()
	require.NoError(t, err)
	return data
}

// checkShape checks what every rendering must hold.
func checkShape(t *testing.T, in assembly.Input, c assembly.Context) {
	t.Helper()
	require.Len(t, c.Messages, len(in.Head)+len(in.Messages))
	require.Len(t, c.UUIDs, len(c.Messages))
	for i, m := range in.Messages {
		require.Equal(t, m.UUID, c.UUIDs[len(in.Head)+i])
	}
	var want int64
	for _, b := range c.System {
		want += tokens.EstimateBlock(b)
	}
	for _, m := range c.Messages {
		want += tokens.EstimateContent(m.Content)
	}
	require.Equal(t, want, c.Tokens)
	require.LessOrEqual(t, len(c.Breakpoints), 3)
	for _, bp := range c.Breakpoints {
		var b turn.Block
		if bp.InSystem() {
			b = c.System[bp.Block]
		} else {
			b = c.Messages[bp.Message].Content[bp.Block]
		}
		require.NotEqual(t, turn.BlockThinking, b.Type)
	}
	if n := len(c.Messages); n > 0 && len(c.Breakpoints) > 0 {
		require.Equal(t, n-1, c.Breakpoints[len(c.Breakpoints)-1].Message, "the last breakpoint is on the last message")
	}
	require.NotContains(t, string(c.Prefix()), "cache_control")
}

// TestRenderProperties replays random sessions: appends of stored messages
// and, at random points, new micro-compaction decisions.
//   - rendering the same state twice gives the same bytes;
//   - after appends alone the previous Prefix is a prefix of the new one;
//   - after a new clearing decision it is not (a recorded break), and appends
//     after it are prefixes again.
func TestRenderProperties(t *testing.T) {
	t.Parallel()

	for _, seed := range []uint64{1, 2, 3, 42, 1234, 99991} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
			in := assembly.Input{Cleared: map[string]bool{}}
			if g.r.IntN(2) == 0 {
				in.System = []turn.Block{{Type: turn.BlockText, Text: g.text(80)}, {Type: turn.BlockText, Text: "memory index"}}
			}
			if g.r.IntN(2) == 0 {
				in.Head = []view.Message{
					{Position: -1, Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "summary: " + g.text(100)}}},
				}
			}
			tools := assembly.DefaultToolSet()
			prev := assembly.Render(in).Prefix()
			breaks, appends := 0, 0
			for step := range 80 {
				newDecision := false
				if g.r.IntN(4) == 0 {
					results := assembly.Compactable(in.Messages, tools, in.Cleared)
					for _, r := range results {
						if g.r.IntN(2) == 0 {
							in.Cleared[r.ToolUseID] = true
							newDecision = true
						}
					}
				}
				if !newDecision {
					for range 1 + g.r.IntN(3) {
						if len(in.Messages) > 0 && in.Messages[len(in.Messages)-1].Role == "assistant" {
							in.Messages = append(in.Messages, g.user())
						} else {
							in.Messages = append(in.Messages, g.assistant())
						}
					}
				}

				c := assembly.Render(in)
				checkShape(t, in, c)
				first := encode(t, c)
				require.Equal(t, first, encode(t, c), "step %d: same Context, different bytes", step)
				require.Equal(t, first, encode(t, assembly.Render(in)), "step %d: same state, different bytes", step)

				next := c.Prefix()
				if newDecision {
					breaks++
					require.False(t, assembly.IsPrefix(prev, next), "step %d: a new clearing decision must break the prefix", step)
				} else {
					appends++
					require.True(t, assembly.IsPrefix(prev, next), "step %d: appends must keep the prefix", step)
				}
				prev = next
			}
			require.Positive(t, breaks, "no decision exercised")
			require.Positive(t, appends)
		})
	}
}
