package openaiwire

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Stop reasons a round records, in the Messages API's words, which the
// accountant and the extractor read (turn.Event.ClosesUserTurn).
const (
	stopEndTurn   = "end_turn"
	stopToolUse   = "tool_use"
	stopMaxTokens = "max_tokens"
	stopRefusal   = "refusal"
)

// ResponsesAnswer is what a Responses API answer carries for the round.
type ResponsesAnswer struct {
	// Output holds the output items, as the upstream sent them.
	Output []json.RawMessage
	// Status is the response's status: completed, incomplete, …
	Status string
	// IncompleteReason is incomplete_details.reason, when incomplete.
	IncompleteReason string
	// Usage is the usage it reported, nil when it reported none.
	Usage *turn.Usage
}

// Message is the answer as the round's response: one assistant message
// holding every output item's blocks (ResponsesInput's mapping), with a
// stop reason: max_tokens when it stopped at max_output_tokens, refusal at
// a content filter, tool_use when it called a tool, else end_turn.
func (a ResponsesAnswer) Message() (turn.Message, error) {
	var msgs []turn.Message
	calls := false
	for i, raw := range a.Output {
		_, pieces := responsesDialect.item(raw, "assistant")
		for _, p := range pieces {
			calls = calls || p.block.Type == turn.BlockToolUse
		}
		var err error
		if msgs, err = finish(msgs, "assistant", pieces, responsesJoins); err != nil {
			return turn.Message{}, fmt.Errorf("output %d: %w", i, err)
		}
	}
	m := turn.Message{Role: "assistant", Content: turn.Content{}}
	if len(msgs) > 0 {
		m = msgs[0]
	}
	switch {
	case a.Status == "incomplete" && a.IncompleteReason == "max_output_tokens":
		m.StopReason = stopMaxTokens
	case a.Status == "incomplete" && a.IncompleteReason == "content_filter":
		m.StopReason = stopRefusal
	case calls:
		m.StopReason = stopToolUse
	case a.Status == "completed" || a.Status == "":
		m.StopReason = stopEndTurn
	default:
		m.StopReason = a.Status
	}
	return m, nil
}

// responseBody is the part of a Responses API response object read here.
type responseBody struct {
	Status            string            `json:"status"`
	Output            []json.RawMessage `json:"output"`
	Usage             json.RawMessage   `json:"usage"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *apiError `json:"error"`
}

// apiError is an error as OpenAI's APIs write it.
type apiError struct {
	Type    string `json:"type"`
	Code    any    `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) err() error {
	what := e.Type
	if e.Code != nil {
		what = fmt.Sprint(e.Code)
	}
	if what == "" {
		what = "error"
	}
	return fmt.Errorf("the upstream failed: %s: %s", what, e.Message)
}

func (r responseBody) answer() (ResponsesAnswer, error) {
	a := ResponsesAnswer{Output: r.Output, Status: r.Status}
	if r.IncompleteDetails != nil {
		a.IncompleteReason = r.IncompleteDetails.Reason
	}
	if len(r.Usage) > 0 && string(r.Usage) != "null" {
		u, err := ResponsesUsage(r.Usage)
		if err != nil {
			return ResponsesAnswer{}, err
		}
		a.Usage = &u
	}
	return a, nil
}

// ParseResponse reads a whole (not streamed) Responses API answer.
func ParseResponse(body []byte) (ResponsesAnswer, error) {
	var r responseBody
	if err := json.Unmarshal(body, &r); err != nil {
		return ResponsesAnswer{}, fmt.Errorf("a response: %w", err)
	}
	if r.Status == "failed" && r.Error != nil {
		return ResponsesAnswer{}, r.Error.err()
	}
	return r.answer()
}

// ChatAnswer is what a Chat Completions answer carries for the round: its
// first choice.
type ChatAnswer struct {
	// Message is the choice's assistant message: as the upstream sent it,
	// or assembled from a stream's deltas.
	Message json.RawMessage
	// FinishReason is the choice's finish_reason.
	FinishReason string
	// Usage is the usage it reported, nil when it reported none (a stream
	// reports it only with stream_options.include_usage).
	Usage *turn.Usage
}

// Turn is the answer as the round's response: one assistant message
// (ChatInput's mapping), with a stop reason: max_tokens for length,
// refusal for content_filter, tool_use when it called a tool, else end_turn.
func (a ChatAnswer) Turn() (turn.Message, error) {
	if len(a.Message) == 0 {
		return turn.Message{}, errors.New("the answer holds no message")
	}
	_, pieces := chatDialect.item(a.Message, "assistant")
	msgs, err := finish(nil, "assistant", pieces, chatJoins)
	if err != nil {
		return turn.Message{}, err
	}
	m := msgs[0]
	switch a.FinishReason {
	case "length":
		m.StopReason = stopMaxTokens
	case "content_filter":
		m.StopReason = stopRefusal
	case "tool_calls", "function_call":
		m.StopReason = stopToolUse
	case "stop", "":
		m.StopReason = stopEndTurn
		if m.ToolUseCount() > 0 {
			m.StopReason = stopToolUse
		}
	default:
		m.StopReason = a.FinishReason
	}
	return m, nil
}

// ParseChatCompletion reads a whole (not streamed) Chat Completions answer.
func ParseChatCompletion(body []byte) (ChatAnswer, error) {
	var r struct {
		Choices []struct {
			Index        int             `json:"index"`
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
		Error *apiError       `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return ChatAnswer{}, fmt.Errorf("a chat completion: %w", err)
	}
	if r.Error != nil {
		return ChatAnswer{}, r.Error.err()
	}
	var a ChatAnswer
	for _, c := range r.Choices {
		if c.Index == 0 {
			a.Message, a.FinishReason = c.Message, c.FinishReason
		}
	}
	if len(r.Usage) > 0 && string(r.Usage) != "null" {
		u, err := ChatUsage(r.Usage)
		if err != nil {
			return ChatAnswer{}, err
		}
		a.Usage = &u
	}
	return a, nil
}

// wireUsage is a usage of either API: the Responses API's names, then
// Chat Completions'.
type wireUsage struct {
	InputTokens      int64         `json:"input_tokens"`
	InputDetails     *cachedDetail `json:"input_tokens_details"`
	OutputTokens     int64         `json:"output_tokens"`
	PromptTokens     int64         `json:"prompt_tokens"`
	PromptDetails    *cachedDetail `json:"prompt_tokens_details"`
	CompletionTokens int64         `json:"completion_tokens"`
}

type cachedDetail struct {
	CachedTokens int64 `json:"cached_tokens"`
}

func (d *cachedDetail) cached() int64 {
	if d == nil {
		return 0
	}
	return d.CachedTokens
}

func readUsage(raw json.RawMessage) (wireUsage, error) {
	var u wireUsage
	if err := json.Unmarshal(raw, &u); err != nil {
		return u, fmt.Errorf("usage: %w", err)
	}
	return u, nil
}

// ResponsesUsage maps a Responses API usage: input_tokens counts the cached
// tokens too (input_tokens_details.cached_tokens), so the fresh input is
// the difference and the cached part is a cache read. OpenAI's automatic
// caching reports no cache writes.
func ResponsesUsage(raw json.RawMessage) (turn.Usage, error) {
	u, err := readUsage(raw)
	return usage(u.InputTokens, u.InputDetails.cached(), u.OutputTokens), err
}

// ChatUsage maps a Chat Completions usage the way ResponsesUsage does:
// prompt_tokens, prompt_tokens_details.cached_tokens, completion_tokens.
func ChatUsage(raw json.RawMessage) (turn.Usage, error) {
	u, err := readUsage(raw)
	return usage(u.PromptTokens, u.PromptDetails.cached(), u.CompletionTokens), err
}

// usage is the turn usage of input tokens of which cached were read from
// the cache; counts below zero (which no upstream should report) are zero.
func usage(input, cached, output int64) turn.Usage {
	input, cached, output = max(input, 0), max(cached, 0), max(output, 0)
	cached = min(cached, input)
	return turn.Usage{InputTokens: input - cached, CacheReadInputTokens: cached, OutputTokens: output}
}
