package llmtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// NewOpenAIServer serves POST /v1/chat/completions (and /chat/completions),
// as JSON or, asked to stream, as chunks (streamChat), in the OpenAI Chat
// Completions format until the test ends; its URL ends
// in /v1. Like the real API it refuses (400) a call without model or
// messages, with an unknown role, or whose tool messages do not answer the
// tool_calls of the assistant message before them (each one answered,
// none answered twice or out of place). A reply's usage is reported with
// prompt_tokens = input + cache read + cache write, the cache read as
// prompt_tokens_details.cached_tokens and the cache write, when there is
// one, as prompt_tokens_details.cache_write_tokens.
func NewOpenAIServer(t testing.TB, script Script) *Server {
	return newServer(t, script, openaiWire{}, []string{"/v1/chat/completions", "/chat/completions"}, "/v1")
}

type openaiWire struct{}

type openaiBody struct {
	Model               string `json:"model"`
	MaxTokens           int64  `json:"max_tokens"`
	MaxCompletionTokens int64  `json:"max_completion_tokens"`
	Messages            []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

func (openaiWire) decode(data []byte) (Request, error) {
	var body openaiBody
	if err := json.Unmarshal(data, &body); err != nil {
		return Request{}, fmt.Errorf("we could not parse the JSON body of your request: %w", err)
	}
	req := Request{Model: body.Model, MaxTokens: max(body.MaxTokens, body.MaxCompletionTokens)}
	req.JSON = body.ResponseFormat != nil && (body.ResponseFormat.Type == "json_schema" || body.ResponseFormat.Type == "json_object")
	for _, t := range body.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	switch {
	case body.Model == "":
		return req, errors.New("you must provide a model parameter")
	case len(body.Messages) == 0:
		return req, errors.New("'messages' must contain at least one message")
	}
	pending := map[string]bool{} // tool_calls still to be answered
	for i, m := range body.Messages {
		text, err := openaiText(m.Content)
		if err != nil {
			return req, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		if m.Role == "tool" {
			if !pending[m.ToolCallID] {
				return req, fmt.Errorf("messages[%d]: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (id %q)", i, m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
			req.Messages = append(req.Messages, Message{Role: "tool", Text: text})
			continue
		}
		if len(pending) > 0 {
			return req, fmt.Errorf("messages[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'", i)
		}
		switch m.Role {
		case "system", "developer":
			req.System += text
			continue
		case "user":
		case "assistant":
			for _, c := range m.ToolCalls {
				pending[c.ID] = true
				args := c.Function.Arguments
				if !json.Valid([]byte(args)) {
					return req, fmt.Errorf("messages[%d].tool_calls: arguments are not JSON: %q", i, args)
				}
				line := fmt.Sprintf("[tool_use %s %s]", c.Function.Name, compact(json.RawMessage(args)))
				if text == "" {
					text = line
				} else {
					text += "\n" + line
				}
			}
		default:
			return req, fmt.Errorf("messages[%d].role: invalid value %q", i, m.Role)
		}
		req.Messages = append(req.Messages, Message{Role: m.Role, Text: text})
	}
	if len(pending) > 0 {
		return req, errors.New("an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'")
	}
	return req, nil
}

// openaiText reads message content: a string, null, or parts (text parts
// as they are, image parts as "[image]", one line each).
func openaiText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("want a string or an array of content parts")
	}
	lines := make([]string, 0, len(parts))
	for _, p := range parts {
		switch p.Type {
		case "text":
			lines = append(lines, p.Text)
		case "image_url":
			lines = append(lines, "[image]")
		default:
			return "", fmt.Errorf("unknown content part type %q", p.Type)
		}
	}
	return strings.Join(lines, "\n"), nil
}

// finishReasons maps Anthropic-shaped stop reasons to finish reasons.
var finishReasons = map[string]string{
	"end_turn":   "stop",
	"max_tokens": "length",
	"tool_use":   "tool_calls",
	"refusal":    "content_filter",
}

func (openaiWire) answer(rw http.ResponseWriter, req Request, reply Reply, body []byte) {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if reply.Text != "" {
		msg["content"] = reply.Text
	}
	if calls := toolCalls(reply.ToolCalls, "call_"); calls != nil {
		wire := make([]map[string]any, len(calls))
		for i, c := range calls {
			wire[i] = map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": string(c.Input)}}
		}
		msg["tool_calls"] = wire
	}
	finish, ok := finishReasons[reply.stopReason()]
	if !ok {
		finish = reply.stopReason()
	}
	model := reply.Model
	if model == "" {
		model = req.Model
	}
	u := reply.usage(body)
	prompt := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	details := map[string]any{"cached_tokens": u.CacheReadTokens, "audio_tokens": 0}
	if u.CacheWriteTokens > 0 {
		details["cache_write_tokens"] = u.CacheWriteTokens
	}
	usage := map[string]any{
		"prompt_tokens":         prompt,
		"completion_tokens":     u.OutputTokens,
		"total_tokens":          prompt + u.OutputTokens,
		"prompt_tokens_details": details,
	}
	var ask struct {
		Stream        bool `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if json.Unmarshal(body, &ask) == nil && ask.Stream {
		streamChat(rw, model, msg, finish, usage, ask.StreamOptions.IncludeUsage)
		return
	}
	writeJSON(rw, http.StatusOK, map[string]any{
		"id":                 "chatcmpl-llmtest",
		"object":             "chat.completion",
		"created":            1767225600,
		"model":              model,
		"choices":            []map[string]any{{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":              usage,
		"system_fingerprint": "fp_llmtest",
	})
}

func (openaiWire) fail(rw http.ResponseWriter, reply Reply) {
	status, typ, code := http.StatusInternalServerError, "server_error", any(nil)
	msg := "The server had an error while processing your request. Sorry about that!"
	switch reply.Fail {
	case llm.KindPromptTooLong:
		status, typ, code = http.StatusBadRequest, "invalid_request_error", "context_length_exceeded"
		msg = fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. "+
			"Please reduce the length of the messages.", reply.Limit, reply.Actual)
	case llm.KindRateLimited:
		status, typ, code = http.StatusTooManyRequests, "requests", "rate_limit_exceeded"
		msg = "Rate limit reached for requests per min. Please try again later."
	case llm.KindAuth:
		status, typ, code = http.StatusUnauthorized, "invalid_request_error", "invalid_api_key"
		msg = "Incorrect API key provided."
	case llm.KindRequest:
		status, typ, msg = http.StatusBadRequest, "invalid_request_error", "scripted bad request"
	}
	if reply.Status != 0 {
		status = reply.Status
	}
	if status == 529 { // Anthropic's overloaded; OpenAI says 503
		status, msg = http.StatusServiceUnavailable, "The engine is currently overloaded, please try again later."
	}
	openaiError(rw, status, typ, code, msg)
}

func (openaiWire) failRequest(rw http.ResponseWriter, msg string) {
	openaiError(rw, http.StatusBadRequest, "invalid_request_error", nil, msg)
}

func openaiError(rw http.ResponseWriter, status int, typ string, code any, msg string) {
	writeJSON(rw, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code},
	})
}

// streamChat writes an answer as the API's chunks: the role, the text in
// two deltas, each tool call (its id and name, then its arguments in two
// pieces), the finish reason, the usage when the request asked for it, and
// [DONE].
func streamChat(rw http.ResponseWriter, model string, msg map[string]any, finish string, usage map[string]any, withUsage bool) {
	rw.Header().Set("Content-Type", "text/event-stream")
	rw.WriteHeader(http.StatusOK)
	chunk := func(delta map[string]any, finish any, usage any) {
		c := map[string]any{"id": "chatcmpl-llmtest", "object": "chat.completion.chunk", "created": 1767225600, "model": model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
		if usage != nil {
			c["choices"], c["usage"] = []any{}, usage
		}
		data, _ := json.Marshal(c)
		fmt.Fprintf(rw, "data: %s\n\n", data)
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if text, ok := msg["content"].(string); ok {
		half := len(text) / 2
		chunk(map[string]any{"content": text[:half]}, nil, nil)
		chunk(map[string]any{"content": text[half:]}, nil, nil)
	}
	calls, _ := msg["tool_calls"].([]map[string]any)
	for i, c := range calls {
		fn := c["function"].(map[string]any)
		args := fn["arguments"].(string)
		half := len(args) / 2
		chunk(map[string]any{"tool_calls": []map[string]any{{"index": i, "id": c["id"], "type": "function",
			"function": map[string]any{"name": fn["name"], "arguments": args[:half]}}}}, nil, nil)
		chunk(map[string]any{"tool_calls": []map[string]any{{"index": i, "function": map[string]any{"arguments": args[half:]}}}}, nil, nil)
	}
	chunk(map[string]any{}, finish, nil)
	if withUsage {
		chunk(nil, nil, usage)
	}
	fmt.Fprint(rw, "data: [DONE]\n\n")
}
