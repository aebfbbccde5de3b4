package tokens_test

import (
	"bytes"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Separators of a fuzz input: messages are separated by 0x1d, the blocks of
// a message by 0x1e; a block's first byte picks its type, the rest is its
// text (and, after a 0x1f, the tool input or nested text).
const (
	messageSep = 0x1d
	blockSep   = 0x1e
	fieldSep   = 0x1f
)

// messagesOf builds messages of every block type from arbitrary bytes, so
// the fuzzer reaches every branch of the estimate: plain and JSON-looking
// text, tool inputs that are not JSON, nested tool results, media, unknown
// block types.
func messagesOf(data []byte) []turn.Message {
	var out []turn.Message
	for _, m := range bytes.Split(data, []byte{messageSep}) {
		var c turn.Content
		for _, b := range bytes.Split(m, []byte{blockSep}) {
			c = append(c, blockOf(b))
		}
		out = append(out, turn.Message{Role: "user", Content: c})
	}
	return out
}

func blockOf(b []byte) turn.Block {
	if len(b) == 0 {
		return turn.Block{Type: turn.BlockText}
	}
	kind, rest := b[0], b[1:]
	main, extra, _ := bytes.Cut(rest, []byte{fieldSep})
	text := string(main)
	switch kind % 9 {
	case 0:
		return turn.Block{Type: turn.BlockText, Text: text}
	case 1:
		return turn.Block{Type: turn.BlockThinking, Thinking: text, Signature: string(extra)}
	case 2:
		return turn.Block{Type: turn.BlockRedactedThinking, Data: text}
	case 3:
		return turn.Block{Type: turn.BlockToolUse, ID: "t", Name: text, Input: json.RawMessage(extra)}
	case 4:
		inner := turn.Content{{Type: turn.BlockText, Text: text}}
		return turn.Block{Type: turn.BlockToolResult, ToolUseID: "t", Content: &inner}
	case 5:
		inner := turn.Content{{Type: turn.BlockText, Text: text}, {Type: turn.BlockImage}, blockOf(extra)}
		return turn.Block{Type: turn.BlockToolResult, ToolUseID: "t", Content: &inner, IsError: len(extra)%2 == 0}
	case 6:
		return turn.Block{Type: turn.BlockImage}
	case 7:
		return turn.Block{Type: turn.BlockDocument, Title: text}
	default:
		inner := turn.Content{{Type: turn.BlockText, Text: string(extra)}}
		return turn.Block{Type: "x-" + text, Text: text, Input: json.RawMessage(extra), Content: &inner}
	}
}

// bytesOf is every byte of content an estimate may read.
func bytesOf(c turn.Content) int {
	n := 0
	for _, b := range c {
		n += len(b.Text) + len(b.Thinking) + len(b.Data) + len(b.Name) + len(b.Input) + len(b.Signature) + len(b.Title)
		if b.Content != nil {
			n += bytesOf(*b.Content)
		}
	}
	return n
}

// blocksOf counts blocks, nested ones included: each rounds up once.
func blocksOf(c turn.Content) int64 {
	n := int64(len(c))
	for _, b := range c {
		if b.Content != nil {
			n += blocksOf(*b.Content)
		}
	}
	return n
}

// mediaOf counts images and documents, each a flat estimate.
func mediaOf(c turn.Content) int64 {
	var n int64
	for _, b := range c {
		if b.Type == turn.BlockImage || b.Type == turn.BlockDocument {
			n++
		}
		if b.Content != nil {
			n += mediaOf(*b.Content)
		}
	}
	return n
}

// allocated is how many bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FuzzEstimate: estimating never panics and is never negative; a content's
// estimate is the sum of its blocks', at most its bytes / 1.5 (rounded up
// per block) plus the flat media estimate; it allocates no more than twice the
// bytes it reads (plus a little); and a session's count never goes down as
// messages are added, before and after a response's usage. The seed corpus
// is in testdata/fuzz/FuzzEstimate.
func FuzzEstimate(f *testing.F) {
	f.Add([]byte("\x00hello world\x1e\x03Bash\x1f{\"command\":\"ls\"}\x1d\x04[1, 2, 3]\x1e\x06"), int64(1000))
	f.Fuzz(func(t *testing.T, data []byte, input int64) {
		msgs := messagesOf(data)
		var tally tokens.Tally
		var sum int64
		for i, m := range msgs {
			var blocks int64
			for _, b := range m.Content {
				e := tokens.EstimateBlock(b)
				if e < 0 {
					t.Fatalf("block %+v estimated at %d", b, e)
				}
				blocks += e
			}
			est := tokens.EstimateMessage(m)
			if est != blocks {
				t.Fatalf("message %d: estimate %d, its blocks' sum %d", i, est, blocks)
			}
			// Every byte counts at most as base64 (bytes/1.5, the densest
			// rate), each block rounds up once, nested ones included, and
			// media are flat.
			bound := int64(bytesOf(m.Content))*2/3 + blocksOf(m.Content) + tokens.MediaTokens*mediaOf(m.Content)
			if est > bound {
				t.Fatalf("message %d: estimate %d above its bound %d", i, est, bound)
			}
			if n := bytesOf(m.Content); n > 1<<10 {
				if a := allocated(func() { tokens.EstimateMessage(m) }); a > uint64(2*n+64<<10) {
					t.Fatalf("message %d: %d bytes allocated to estimate %d bytes", i, a, n)
				}
			}
			before := tally.Count()
			tally.Add(est)
			if tally.Count() < before {
				t.Fatalf("count went down from %d to %d adding a message", before, tally.Count())
			}
			sum += est
		}
		if input < 0 {
			input = -input
		}
		input %= 1 << 40
		tally.SetResponse(turn.Usage{InputTokens: input, OutputTokens: 1}, msgs[0].Content)
		for _, m := range msgs {
			before := tally.Count()
			tally.Add(tokens.EstimateMessage(m))
			if tally.Count() < before {
				t.Fatalf("count went down from %d to %d after a response", before, tally.Count())
			}
		}
		if sum < 0 {
			t.Fatalf("estimates summed to %d", sum)
		}
	})
}
