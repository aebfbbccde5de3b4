package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// NewAnthropicServer serves POST /v1/messages in the Anthropic Messages
// API's format until the test ends. Like the real API it refuses (400,
// invalid_request_error) a call without model or max_tokens, without
// messages, with a role other than user and assistant, with empty content
// or a blank text block, ending with an assistant message whose text ends
// in whitespace, or whose tool_use and tool_result blocks do not
// pair up (every tool_use answered in the next user message, every
// tool_result answering the previous assistant message), or forcing a tool
// on a model that refuses it. A JSON request (tool_choice of one tool, or
// the answer tool offered and the choice left to the model) is answered
// with a call of that tool whose input is the reply's Text, when that text
// is a JSON object.
func NewAnthropicServer(t testing.TB, script Script) *Server {
	return newServer(t, script, anthropicWire{}, []string{"/v1/messages"}, "")
}

type anthropicWire struct{}

// answerToolName is the tool the Anthropic provider offers for a JSON
// answer (anthropic.AnswerTool).
const answerToolName = "answer"

// refusesForcedTools reports the models the API refuses a forcing
// tool_choice for, as it does: Claude Sonnet 5.5 and Opus 5.5.
func refusesForcedTools(model string) bool {
	return strings.Contains(model, "claude-sonnet-5-5") || strings.Contains(model, "claude-opus-5-5")
}

type anthropicMessage struct {
	Role    string       `json:"role"`
	Content turn.Content `json:"content"`
}

type anthropicBody struct {
	Model     string             `json:"model"`
	MaxTokens int64              `json:"max_tokens"`
	System    json.RawMessage    `json:"system"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []struct {
		Name         string          `json:"name"`
		CacheControl json.RawMessage `json:"cache_control"`
	} `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
}

func (anthropicWire) decode(data []byte) (Request, error) {
	var body anthropicBody
	if err := json.Unmarshal(data, &body); err != nil {
		return Request{}, fmt.Errorf("body: %w", err)
	}
	req := Request{Model: body.Model, MaxTokens: body.MaxTokens}
	if err := anthropicSystem(body.System, &req); err != nil {
		return req, err
	}
	forced := ""
	switch {
	case body.ToolChoice != nil && (body.ToolChoice.Type == "tool" || body.ToolChoice.Type == "any") && refusesForcedTools(body.Model):
		return req, fmt.Errorf("tool_choice: %s does not support forcing a tool; use \"auto\" or leave tool_choice out", body.Model)
	case body.ToolChoice != nil && body.ToolChoice.Type == "tool":
		forced, req.JSON, req.answerTool = body.ToolChoice.Name, true, body.ToolChoice.Name
	case body.ToolChoice == nil || body.ToolChoice.Type == "auto":
		// Offered the answer tool and left to choose, the fake model calls it.
		for _, tool := range body.Tools {
			if tool.Name == answerToolName {
				forced, req.JSON, req.answerTool = answerToolName, true, answerToolName
			}
		}
	}
	for i, tool := range body.Tools {
		if tool.Name != forced {
			req.Tools = append(req.Tools, tool.Name)
		}
		req.CachedTools = i == len(body.Tools)-1 && len(tool.CacheControl) > 0
	}
	for _, m := range body.Messages {
		req.Messages = append(req.Messages, Message{Role: m.Role, Text: Flatten(m.Content)})
	}
	switch {
	case body.Model == "":
		return req, errors.New("model: Field required")
	case body.MaxTokens <= 0:
		return req, errors.New("max_tokens: Field required")
	case len(body.Messages) == 0:
		return req, errors.New("messages: at least one message is required")
	}
	return req, checkAnthropicMessages(body.Messages)
}

// checkAnthropicMessages refuses what the Messages API refuses of a
// conversation: a role other than user or assistant, empty content, blank
// text, trailing white space that ends the last assistant message, and tool
// results that do not answer the previous message's tool calls exactly.
func checkAnthropicMessages(msgs []anthropicMessage) error {
	var pending map[string]bool // tool_use ids the next user message must answer
	for i, m := range msgs {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if len(m.Content) == 0 {
			return fmt.Errorf("messages.%d: all messages must have non-empty content", i)
		}
		last := m.Role == "assistant" && i == len(msgs)-1
		answered, uses, err := checkAnthropicBlocks(i, m, last, pending)
		if err != nil {
			return err
		}
		for id := range pending {
			if !answered[id] {
				return fmt.Errorf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s", i, id)
			}
		}
		pending = uses
	}
	return nil
}

// checkAnthropicBlocks checks message i's blocks and returns the tool calls
// it answers and the ones it makes.
func checkAnthropicBlocks(i int, m anthropicMessage, lastAssistant bool, pending map[string]bool) (answered, uses map[string]bool, err error) {
	answered, uses = map[string]bool{}, map[string]bool{}
	for j, b := range m.Content {
		switch b.Type {
		case turn.BlockText:
			if strings.TrimSpace(b.Text) == "" {
				return nil, nil, fmt.Errorf("messages.%d.content.%d.text: text content blocks must contain non-whitespace text", i, j)
			}
			if lastAssistant && j == len(m.Content)-1 && strings.TrimRightFunc(b.Text, unicode.IsSpace) != b.Text {
				return nil, nil, errors.New("messages: final assistant content cannot end with trailing whitespace")
			}
		case turn.BlockToolUse:
			uses[b.ID] = true
		case turn.BlockToolResult:
			if m.Role != "user" || !pending[b.ToolUseID] {
				return nil, nil, fmt.Errorf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s; "+
					"each `tool_result` block must have a corresponding `tool_use` block in the previous message", i, j, b.ToolUseID)
			}
			answered[b.ToolUseID] = true
		}
	}
	return answered, uses, nil
}

// anthropicSystem reads the system prompt: a string, or text blocks.
func anthropicSystem(raw json.RawMessage, req *Request) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		return json.Unmarshal(raw, &req.System)
	}
	var blocks []struct {
		Text         string          `json:"text"`
		CacheControl json.RawMessage `json:"cache_control"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return fmt.Errorf("system: %w", err)
	}
	for i, b := range blocks {
		req.System += b.Text
		req.CachedSystem = i == len(blocks)-1 && len(b.CacheControl) > 0
	}
	return nil
}

func (anthropicWire) answer(rw http.ResponseWriter, req Request, reply Reply, body []byte) {
	var content []map[string]any
	stop := reply.stopReason()
	var answer map[string]any
	if req.JSON && json.Unmarshal([]byte(reply.Text), &answer) == nil && answer != nil {
		content = append(content, map[string]any{"type": "tool_use", "id": "toolu_answer", "name": req.answerTool, "input": answer})
		stop = "tool_use"
	} else if reply.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": reply.Text})
	}
	for _, c := range toolCalls(reply.ToolCalls, "toolu_") {
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Input})
	}
	if content == nil {
		content = []map[string]any{}
	}
	model := reply.Model
	if model == "" {
		model = req.Model
	}
	u := reply.usage(body)
	writeJSON(rw, http.StatusOK, map[string]any{
		"id":            "msg_llmtest",
		"type":          "message",
		"role":          "assistant",
		"model":         model,
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens":                u.InputTokens,
			"output_tokens":               u.OutputTokens,
			"cache_creation_input_tokens": u.CacheWriteTokens,
			"cache_read_input_tokens":     u.CacheReadTokens,
		},
	})
}

func (anthropicWire) fail(rw http.ResponseWriter, reply Reply) {
	status, typ, msg := http.StatusInternalServerError, "api_error", "Internal server error"
	switch reply.Fail {
	case llm.KindPromptTooLong:
		status, typ = http.StatusBadRequest, "invalid_request_error"
		msg = fmt.Sprintf("prompt is too long: %d tokens > %d maximum", reply.Actual, reply.Limit)
	case llm.KindRateLimited:
		status, typ = http.StatusTooManyRequests, "rate_limit_error"
		msg = "This request would exceed your organization's rate limit. Please try again later."
	case llm.KindAuth:
		status, typ, msg = http.StatusUnauthorized, "authentication_error", "invalid x-api-key"
	case llm.KindRequest:
		status, typ, msg = http.StatusBadRequest, "invalid_request_error", "messages: scripted bad request"
	}
	if reply.Status != 0 {
		status = reply.Status
	}
	if status == 529 {
		typ, msg = "overloaded_error", "Overloaded"
	}
	anthropicError(rw, status, typ, msg)
}

func (anthropicWire) failRequest(rw http.ResponseWriter, msg string) {
	anthropicError(rw, http.StatusBadRequest, "invalid_request_error", msg)
}

func anthropicError(rw http.ResponseWriter, status int, typ, msg string) {
	rw.Header().Set("Request-Id", "req_llmtest")
	writeJSON(rw, status, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": msg},
		"request_id": "req_llmtest",
	})
}
