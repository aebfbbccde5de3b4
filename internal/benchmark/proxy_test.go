package benchmark

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestARequestIsTheConversationEncodedWhole: request, which keeps each
// message's encoding, writes the bytes json.Encoder writes for the whole
// conversation as a map, round after round (each message is last once,
// then not), with tools and without.
func TestARequestIsTheConversationEncodedWhole(t *testing.T) {
	whole := func(c *conversation) []byte {
		msgs := slices.Clone(c.msgs)
		if n := len(msgs); n > 0 {
			msgs[n-1].Content = marked(msgs[n-1].Content)
		}
		req := map[string]any{"model": proxyModel, "max_tokens": 8192, "system": marked(c.system), "messages": msgs}
		if len(c.tools) > 0 {
			req["tools"] = c.tools
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(req))
		return buf.Bytes()
	}
	for _, tools := range [][]block{nil, {{"name": "Read", "input_schema": map[string]any{"type": "object"}}}} {
		c, _ := builtConversation("s-1", 3_000)
		c.tools = tools
		for round := range 5 {
			c.msgs = append(c.msgs, message{Role: "user", Content: []block{{"type": "text", "text": "<go on> & \"quote\""}}})
			got, err := c.request()
			require.NoError(t, err)
			sameBytes(t, whole(c), got, "round %d", round)
			again, err := c.request()
			require.NoError(t, err)
			sameBytes(t, got, again, "round %d, asked again", round)
			c.answered(answer{Content: []block{{"type": "text", "text": "done"}}}, func(map[string]any) string { return "" })
		}
	}
}

// sameBytes fails unless got is want, showing where they part.
func sameBytes(t *testing.T, want, got []byte, format string, args ...any) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	at := 0
	for at < min(len(want), len(got)) && want[at] == got[at] {
		at++
	}
	show := func(b []byte) []byte { return b[at:min(len(b), at+120)] }
	t.Fatalf("%s: %d bytes, want %d; from byte %d got %q, want %q", fmt.Sprintf(format, args...), len(got), len(want), at, show(got), show(want))
}
