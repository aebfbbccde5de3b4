package tokens

import (
	"encoding/json"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// EstimatePrefix estimates a request's system prompt and tools (see
// turn.RequestPrefix): the client's token count when given; else the text
// of system and tools by its kind (a tool's description as text, the rest of
// its definition at the code rate, 3 bytes per token); else bytes at 4 per
// token. The second result is false when the prefix names only a hash, which
// the caller resolves against what it stored. An error is a system or tools
// that is not the shape the Messages API takes.
func EstimatePrefix(p turn.RequestPrefix) (int64, bool, error) {
	if p.Tokens < 0 || p.Bytes < 0 {
		return 0, false, fmt.Errorf("tokens (%d) and bytes (%d) must be zero or more", p.Tokens, p.Bytes)
	}
	switch {
	case p.Tokens > 0:
		return p.Tokens, true, nil
	case len(p.System) > 0 || len(p.Tools) > 0:
		sys, err := estimateSystem(p.System)
		if err != nil {
			return 0, false, err
		}
		tools, err := estimateTools(p.Tools)
		if err != nil {
			return 0, false, err
		}
		return ceilTwelfths(sys + tools), true, nil
	case p.Bytes > 0:
		return ceilDiv(p.Bytes, 4), true, nil
	}
	return 0, false, nil
}

func estimateSystem(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return textTwelfths(s), nil
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return 0, fmt.Errorf("system: want a string or an array of text blocks: %w", err)
	}
	var q int64
	for i, b := range blocks {
		if b.Type != turn.BlockText {
			return 0, fmt.Errorf("system[%d]: a block of type %q; the system takes text blocks", i, b.Type)
		}
		q += textTwelfths(b.Text)
	}
	return q, nil
}

func estimateTools(raw json.RawMessage) (int64, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		return 0, fmt.Errorf("tools: want an array of tool definitions: %w", err)
	}
	var q int64
	for _, t := range tools {
		for k, v := range t {
			var text string
			if k == "description" && json.Unmarshal(v, &text) == nil {
				q += textTwelfths(text)
				continue
			}
			q += twelfthsPerCodeByte * int64(len(k)+len(v))
		}
	}
	return q, nil
}
