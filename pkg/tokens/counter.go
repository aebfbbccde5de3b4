package tokens

import (
	"sync"

	"github.com/tiktoken-go/tokenizer/codec"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Counter counts the tokens of a model's content: exactly, with the
// model's own BPE tokenizer, when its ranks are public and ship with Mnemos
// (OpenAI's o200k_base), else by the estimate. A count is of the content
// alone: the few tokens a provider's chat format adds around each message
// are not in it (the session's calibration factor learns them from usage).
// A Counter is safe for concurrent use.
type Counter interface {
	// Name says how the counter counts: an encoding's name, or "estimate".
	Name() string
	// Text counts the tokens of a text.
	Text(s string) int64
	// Content counts a message's content and the part of it that is dense,
	// as EstimateSplit splits it.
	Content(c turn.Content) (total, dense int64)
}

// CounterFor chooses a model's counter: the BPE tokenizer of the encoding
// the model table names for it (EncodingO200k for OpenAI models), else
// Estimator. The accounting of Claude models keeps the estimate: their
// tokenizer is not public, and the count rule anchors on their usage.
func CounterFor(model string) Counter {
	if info, _ := LookupModel(model); info.Encoding == EncodingO200k {
		return O200k()
	}
	return Estimator
}

// Estimator is the Counter of the estimate: EstimateBlock's rates by kind.
var Estimator Counter = estimator{}

type estimator struct{}

func (estimator) Name() string                          { return "estimate" }
func (estimator) Text(s string) int64                   { return ceilTwelfths(textTwelfths(s)) }
func (estimator) Content(c turn.Content) (int64, int64) { return EstimateSplit(c) }

// O200k is the Counter of OpenAI's o200k_base encoding. Its ranks are Go
// source in github.com/tiktoken-go/tokenizer, so nothing is read or
// downloaded at run time; the first call builds the vocabulary (about
// 200,000 entries) once for the process.
var O200k = sync.OnceValue(func() Counter {
	return &bpe{codec: codec.NewO200kBase()}
})

// bpe counts with a tiktoken encoding. The codec is read-only after it is
// built and its split pattern is safe for concurrent use.
type bpe struct {
	codec *codec.Codec
}

func (b *bpe) Name() string { return b.codec.GetName() }

// Text counts s's tokens. The codec fails only on invalid UTF-8 in strict
// mode, which it is not in; should it fail, the estimate counts instead.
func (b *bpe) Text(s string) int64 {
	if s == "" {
		return 0
	}
	n, err := b.codec.Count(s)
	if err != nil {
		return Estimator.Text(s)
	}
	return int64(n)
}

// Content counts each block as EstimateBlock does, with the tokenizer in
// place of the rates: text, thinking, a tool call's name and input, a tool
// result's text, an unknown block's raw JSON. Images and documents stay at
// MediaTokens; redacted thinking (encrypted, not what the model reads)
// stays estimated. Dense is what EstimateSplit calls dense.
func (b *bpe) Content(c turn.Content) (total, dense int64) {
	for i := range c {
		t, d := b.block(&c[i])
		total += t
		dense += d
	}
	return total, dense
}

func (b *bpe) block(blk *turn.Block) (total, dense int64) {
	switch blk.Type {
	case turn.BlockText:
		n := b.Text(blk.Text)
		if TextKind(blk.Text) != KindProse {
			return n, n
		}
		return n, 0
	case turn.BlockThinking:
		return b.Text(blk.Thinking), 0
	case turn.BlockRedactedThinking, turn.BlockImage, turn.BlockDocument:
		return EstimateBlock(*blk), 0
	case turn.BlockToolUse:
		n := b.Text(blk.Name) + b.Text(string(blk.Input))
		return n, n
	case turn.BlockToolResult:
		if blk.Content == nil {
			return 0, 0
		}
		for i := range *blk.Content {
			inner := &(*blk.Content)[i]
			if inner.Type != turn.BlockText {
				t, _ := b.block(inner)
				total += t
				continue
			}
			n := b.Text(inner.Text)
			total += n
			if isJSONContainer(inner.Text) || TextKind(inner.Text) != KindProse {
				dense += n
			}
		}
		return total, dense
	default:
		if blk.Raw != nil {
			n := b.Text(string(blk.Raw))
			return n, n
		}
		n := b.Text(blk.Text) + b.Text(blk.Thinking) + b.Text(blk.Name) + b.Text(string(blk.Input))
		n += ceilTwelfths(twelfthsPerTextByte * int64(len(blk.Data)))
		if blk.Content != nil {
			t, d := b.block(&turn.Block{Type: turn.BlockToolResult, Content: blk.Content})
			n += t
			dense += d
		}
		return n, dense
	}
}
