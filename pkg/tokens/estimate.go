// Package tokens holds the token accounting rules of docs/token-accounting.md: the cheap
// estimate of a message's size, the exact count of OpenAI models (their
// o200k_base tokenizer, see CounterFor), the model table, the thresholds
// derived from a context window, and the count rule (last usage plus what
// came after it). Everything here is pure: no I/O, no clock, no globals
// that change (the tokenizer's vocabulary is built once, on first use).
package tokens

import (
	"github.com/mnemos-ai/mnemos/pkg/jsonvalid"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// The estimate works in twelfths of a token so that every rate of a kind of
// content (4, 3, 2 and 1.5 bytes per token) adds up exactly before the single
// rounding of a block.
const (
	twelfthsPerTextByte = 3  // prose: 4 bytes per token
	twelfthsPerCodeByte = 4  // code and tool output: 3 bytes per token
	twelfthsPerJSONByte = 6  // JSON: 2 bytes per token
	twelfthsPerB64Byte  = 8  // base64: 1.5 bytes per token
	twelfthsPerToken    = 12 // twelfths per token
)

// classifyMin is the shortest text whose kind is looked at: below it a text
// counts as prose, since a few bytes tell nothing and cost little either way.
const classifyMin = 256

// MediaTokens is the flat estimate of one image or document block.
const MediaTokens = 2000

// EstimateMessage estimates the tokens of a message's content.
func EstimateMessage(m turn.Message) int64 {
	return EstimateContent(m.Content)
}

// EstimateContent is the sum of the estimates of its blocks.
func EstimateContent(c turn.Content) int64 {
	var n int64
	for i := range c {
		n += EstimateBlock(c[i])
	}
	return n
}

// EstimateBlock estimates one block, rounded up: for text, UTF-8 bytes/4 as
// prose, bytes/3 when it reads as code or tool output, bytes/1.5 when it is
// base64 (see TextKind); bytes/4 for
// thinking text (not its signature) and redacted thinking data; bytes/2 for
// JSON (a tool_use input, plus its name as text; a tool result whose text is
// a JSON object or array); a flat MediaTokens per image or document. A tool
// result with block content is the sum of its blocks.
func EstimateBlock(b turn.Block) int64 {
	switch b.Type {
	case turn.BlockText:
		return ceilTwelfths(textTwelfths(b.Text))
	case turn.BlockThinking:
		return ceilTwelfths(twelfthsPerTextByte * int64(len(b.Thinking)))
	case turn.BlockRedactedThinking:
		return ceilTwelfths(twelfthsPerTextByte * int64(len(b.Data)))
	case turn.BlockToolUse:
		return ceilTwelfths(twelfthsPerTextByte*int64(len(b.Name)) + twelfthsPerJSONByte*int64(len(b.Input)))
	case turn.BlockToolResult:
		return estimateToolResult(b.Content)
	case turn.BlockImage, turn.BlockDocument:
		return MediaTokens
	default:
		// A block type this build does not know: count whatever it carries.
		if b.Raw != nil {
			return ceilTwelfths(twelfthsPerJSONByte * int64(len(b.Raw)))
		}
		q := twelfthsPerTextByte*int64(len(b.Text)+len(b.Thinking)+len(b.Data)+len(b.Name)) +
			twelfthsPerJSONByte*int64(len(b.Input))
		n := ceilTwelfths(q)
		if b.Content != nil {
			n += estimateToolResult(b.Content)
		}
		return n
	}
}

// estimateToolResult estimates a tool result's content. On the wire the
// content is a string or blocks; turn.Content turns a string into one text
// block, so a text block whose text is a JSON object or array counts as JSON
// either way.
func estimateToolResult(c *turn.Content) int64 {
	if c == nil {
		return 0
	}
	var n int64
	for i := range *c {
		b := &(*c)[i]
		if b.Type == turn.BlockText && isJSONContainer(b.Text) {
			n += ceilTwelfths(twelfthsPerJSONByte * int64(len(b.Text)))
			continue
		}
		if b.Type == turn.BlockText {
			n += ceilTwelfths(textTwelfths(b.Text))
			continue
		}
		n += EstimateBlock(*b)
	}
	return n
}

// isJSONContainer reports whether s is a valid JSON object or array. The
// first and last non-space bytes are checked before the full validation, so
// plain text costs almost nothing.
func isJSONContainer(s string) bool {
	i, j := 0, len(s)-1
	for i <= j && isSpace(s[i]) {
		i++
	}
	for j >= i && isSpace(s[j]) {
		j--
	}
	if j-i < 1 {
		return false
	}
	object := s[i] == '{' && s[j] == '}'
	array := s[i] == '[' && s[j] == ']'
	if !object && !array {
		return false
	}
	return jsonvalid.Valid([]byte(s[i : j+1]))
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// ceilTwelfths converts quarter tokens to tokens, rounding up.
func ceilTwelfths(q int64) int64 {
	return (q + twelfthsPerToken - 1) / twelfthsPerToken
}

// Kinds of text the estimate tells apart.
const (
	KindProse  = "prose"
	KindCode   = "code"
	KindBase64 = "base64"
)

// TextKind says how a text is counted. Code and tool output (logs,
// listings, diffs) run nearer 3 bytes per token than prose's 4: they are
// told by their share of punctuation and digits. Base64 is a long run of
// its alphabet with no spaces that mixes cases and digits, and tokenizes densely. Texts shorter than
// classifyMin are prose.
func TextKind(s string) string {
	if len(s) < classifyMin {
		return KindProse
	}
	// Every byte of every tool result is looked at whenever a context is
	// rendered: the bytes are counted first, without a branch a byte, then
	// each byte value's count is added to its classes.
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var symbols, spaces, b64 int
	var seen byte
	for c, n := range counts {
		if n == 0 {
			continue
		}
		class := byteClasses[c]
		seen |= class
		if class&classB64 != 0 {
			b64 += n
		}
		if class&classSymbol != 0 {
			symbols += n
		}
		if class&classSpace != 0 {
			spaces += n
		}
	}
	mixed := seen&(classLower|classUpper|classDigit) == classLower|classUpper|classDigit
	if spaces == 0 && mixed && b64*100 >= len(s)*97 {
		return KindBase64
	}
	if symbols*100 >= len(s)*12 {
		return KindCode
	}
	return KindProse
}

// The classes of a byte TextKind counts, as bits of byteClasses.
const (
	classB64    = 1 << iota // of base64's alphabet: letters, digits, + / =
	classSymbol             // punctuation or a digit (ASCII)
	classSpace              // a space or a tab
	classLower
	classUpper
	classDigit
)

var byteClasses = func() (t [256]byte) {
	for c := range 256 {
		switch {
		case c >= 'a' && c <= 'z':
			t[c] = classB64 | classLower
		case c >= 'A' && c <= 'Z':
			t[c] = classB64 | classUpper
		case c >= '0' && c <= '9':
			t[c] = classB64 | classSymbol | classDigit
		case c == '+' || c == '/' || c == '=':
			t[c] = classB64 | classSymbol
		case c == ' ' || c == '\t':
			t[c] = classSpace
		case c == '\n' || c == '\r':
		case c < 0x80:
			t[c] = classSymbol
		}
	}
	return t
}()

// textTwelfths is a text's estimate in twelfths of a token, by its kind.
func textTwelfths(s string) int64 {
	switch TextKind(s) {
	case KindBase64:
		return twelfthsPerB64Byte * int64(len(s))
	case KindCode:
		return twelfthsPerCodeByte * int64(len(s))
	}
	return twelfthsPerTextByte * int64(len(s))
}

// EstimateSplit is EstimateContent and the part of it that is dense: code
// or tool output, base64, JSON (tool_use blocks, JSON tool results). Prose,
// thinking and media are the rest.
func EstimateSplit(c turn.Content) (total, dense int64) {
	for i := range c {
		b := &c[i]
		n := EstimateBlock(*b)
		total += n
		switch b.Type {
		case turn.BlockToolUse:
			dense += n
		case turn.BlockText:
			if TextKind(b.Text) != KindProse {
				dense += n
			}
		case turn.BlockToolResult:
			if b.Content == nil {
				continue
			}
			for j := range *b.Content {
				inner := &(*b.Content)[j]
				if inner.Type != turn.BlockText {
					continue
				}
				if isJSONContainer(inner.Text) {
					dense += ceilTwelfths(twelfthsPerJSONByte * int64(len(inner.Text)))
				} else if TextKind(inner.Text) != KindProse {
					dense += ceilTwelfths(textTwelfths(inner.Text))
				}
			}
		}
	}
	return total, dense
}
