// Package tokens holds the token accounting rules of docs/token-accounting.md: the cheap
// estimate of a message's size, the model table, the thresholds derived from
// a context window, and the count rule (last usage plus what came after it).
// Everything here is pure: no I/O, no clock, no globals that change.
package tokens

import (
	"encoding/json"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// The estimate works in quarter tokens so that text (bytes/4) and JSON
// (bytes/2) add up exactly before the single rounding of a block.
const (
	quartersPerTextByte = 1
	quartersPerJSONByte = 2
	quartersPerToken    = 4
)

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

// EstimateBlock estimates one block, rounded up: UTF-8 bytes/4 for text,
// thinking text (not its signature) and redacted thinking data; bytes/2 for
// JSON (a tool_use input, plus its name as text; a tool result whose text is
// a JSON object or array); a flat MediaTokens per image or document. A tool
// result with block content is the sum of its blocks.
func EstimateBlock(b turn.Block) int64 {
	switch b.Type {
	case turn.BlockText:
		return ceilQuarters(quartersPerTextByte * int64(len(b.Text)))
	case turn.BlockThinking:
		return ceilQuarters(quartersPerTextByte * int64(len(b.Thinking)))
	case turn.BlockRedactedThinking:
		return ceilQuarters(quartersPerTextByte * int64(len(b.Data)))
	case turn.BlockToolUse:
		return ceilQuarters(quartersPerTextByte*int64(len(b.Name)) + quartersPerJSONByte*int64(len(b.Input)))
	case turn.BlockToolResult:
		return estimateToolResult(b.Content)
	case turn.BlockImage, turn.BlockDocument:
		return MediaTokens
	default:
		// A block type this build does not know: count whatever it carries.
		if b.Raw != nil {
			return ceilQuarters(quartersPerJSONByte * int64(len(b.Raw)))
		}
		q := quartersPerTextByte*int64(len(b.Text)+len(b.Thinking)+len(b.Data)+len(b.Name)) +
			quartersPerJSONByte*int64(len(b.Input))
		n := ceilQuarters(q)
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
			n += ceilQuarters(quartersPerJSONByte * int64(len(b.Text)))
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
	return json.Valid([]byte(s[i : j+1]))
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// ceilQuarters converts quarter tokens to tokens, rounding up.
func ceilQuarters(q int64) int64 {
	return (q + quartersPerToken - 1) / quartersPerToken
}
