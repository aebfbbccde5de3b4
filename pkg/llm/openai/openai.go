// Package openai is the llm.Provider over the Chat Completions API, through
// the official OpenAI Go SDK. vLLM, Ollama and llama.cpp servers speak the
// same API: point BaseURL at them (the API key may then be empty).
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Name is the provider's kind.
const Name = "openai"

// Defaults of Config.
const (
	DefaultBaseURL   = "https://api.openai.com/v1/"
	DefaultModel     = shared.ChatModelGPT5_4Mini
	DefaultTimeout   = 10 * time.Minute
	DefaultMaxTokens = 8192
)

// AnswerSchema is the name given to a request's JSON Schema in response_format.
const AnswerSchema = "answer"

// Config configures the provider. Every field is optional for a local
// server but BaseURL; the OpenAI API itself needs APIKey.
type Config struct {
	APIKey string
	// BaseURL is the server's API root, e.g. http://localhost:11434/v1
	// (DefaultBaseURL). The response length is sent as
	// max_completion_tokens to the OpenAI API and as max_tokens, which
	// every compatible server reads, to any other host.
	BaseURL string
	// Model is the default model (DefaultModel); Models picks one per task.
	Model  string
	Models llm.Models
	// Timeout bounds one call (DefaultTimeout).
	Timeout time.Duration
	// HTTPClient replaces the default HTTP client.
	HTTPClient *http.Client
}

// Provider calls a Chat Completions server. Its SDK client never retries:
// retries belong to llm.Guard.
type Provider struct {
	client  sdk.Client
	model   string
	models  llm.Models
	timeout time.Duration
	// legacyMaxTokens sends max_tokens, which every compatible server
	// understands, instead of the OpenAI API's max_completion_tokens.
	legacyMaxTokens bool
}

// New returns a provider for cfg. Environment variables the SDK would read
// (OPENAI_API_KEY, OPENAI_BASE_URL) are overridden by cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q: want an absolute URL", cfg.BaseURL)
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(0),
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{
		client:          sdk.NewClient(opts...),
		model:           cfg.Model,
		models:          cfg.Models,
		timeout:         cfg.Timeout,
		legacyMaxTokens: base.Hostname() != "api.openai.com",
	}, nil
}

// Name returns "openai".
func (p *Provider) Name() string { return Name }

// Model is the model req is sent to: its own, else its task's, else the
// provider's default.
func (p *Provider) Model(req llm.Request) string { return p.models.Pick(req, p.model) }

// Complete makes one chat completion call. With req.JSONSchema set it asks
// for a json_schema response format and checks that the answer is JSON.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	params, err := p.params(req)
	if err != nil {
		return llm.Response{}, &llm.Error{Kind: llm.KindRequest, Err: fmt.Errorf("openai: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	cc, err := p.client.Chat.Completions.New(ctx, params)
	if err != nil {
		return llm.Response{}, classify(err)
	}
	return response(cc, req.JSONSchema != nil)
}

// params translates req to the SDK's request.
func (p *Provider) params(req llm.Request) (sdk.ChatCompletionNewParams, error) {
	params := sdk.ChatCompletionNewParams{Model: p.Model(req)}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	if p.legacyMaxTokens {
		params.MaxTokens = sdk.Int(maxTokens)
	} else {
		params.MaxCompletionTokens = sdk.Int(maxTokens)
	}
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	for i, m := range llm.Normalize(req.Messages) {
		msgs, err := messages(m)
		if err != nil {
			return params, fmt.Errorf("message %d: %w", i, err)
		}
		params.Messages = append(params.Messages, msgs...)
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = sdk.String(t.Description)
		}
		if len(t.InputSchema) > 0 {
			if err := json.Unmarshal(t.InputSchema, &fn.Parameters); err != nil {
				return params, fmt.Errorf("tool %q: input schema: want a JSON object: %w", t.Name, err)
			}
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	if req.JSONSchema != nil {
		var schema map[string]any
		if err := json.Unmarshal(req.JSONSchema, &schema); err != nil {
			return params, fmt.Errorf("json schema: want a JSON object: %w", err)
		}
		params.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: AnswerSchema, Schema: schema},
		}
	}
	return params, nil
}

// messages translates one Anthropic-shaped message, which may become
// several: a user message's tool results become tool messages (first, so
// they follow the assistant message that called the tools), and the rest of
// it one user message. Thinking blocks are dropped.
func messages(m llm.Message) ([]sdk.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case "user":
		return userMessages(m.Content)
	case "assistant":
		return assistantMessage(m.Content), nil
	default:
		return nil, fmt.Errorf("role %q: want user or assistant (the system prompt is Request.System)", m.Role)
	}
}

func userMessages(content turn.Content) ([]sdk.ChatCompletionMessageParamUnion, error) {
	var (
		out      []sdk.ChatCompletionMessageParamUnion
		parts    []sdk.ChatCompletionContentPartUnionParam
		onlyText = true
	)
	for i, b := range content {
		switch b.Type {
		case turn.BlockText:
			if b.Text != "" {
				parts = append(parts, sdk.TextContentPart(b.Text))
			}
		case turn.BlockImage:
			u, err := imageURL(b.Source)
			if err != nil {
				return nil, fmt.Errorf("block %d: %w", i, err)
			}
			parts = append(parts, sdk.ImageContentPart(sdk.ChatCompletionContentPartImageImageURLParam{URL: u}))
			onlyText = false
		case turn.BlockDocument:
			parts = append(parts, sdk.TextContentPart(documentText(b)))
		case turn.BlockToolResult:
			out = append(out, sdk.ToolMessage(toolResultText(b), b.ToolUseID))
		}
	}
	switch {
	case len(parts) == 0:
	case onlyText:
		// Plain string content: the form every compatible server accepts.
		texts := make([]string, len(parts))
		for i, p := range parts {
			texts[i] = p.OfText.Text
		}
		out = append(out, sdk.UserMessage(strings.Join(texts, "\n\n")))
	default:
		out = append(out, sdk.UserMessage(parts))
	}
	return out, nil
}

func assistantMessage(content turn.Content) []sdk.ChatCompletionMessageParamUnion {
	var (
		texts []string
		calls []sdk.ChatCompletionMessageToolCallUnionParam
	)
	for _, b := range content {
		switch b.Type {
		case turn.BlockText:
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		case turn.BlockToolUse:
			args := string(b.Input)
			if args == "" {
				args = "{}"
			}
			calls = append(calls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID:       b.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: args},
				},
			})
		}
	}
	if len(texts) == 0 && len(calls) == 0 {
		return nil
	}
	msg := sdk.ChatCompletionAssistantMessageParam{ToolCalls: calls}
	if len(texts) > 0 {
		msg.Content.OfString = sdk.String(strings.Join(texts, "\n\n"))
	}
	return []sdk.ChatCompletionMessageParamUnion{{OfAssistant: &msg}}
}

// imageURL turns an Anthropic image source into an image URL: a data URL
// for base64 data, the URL itself for a url source.
func imageURL(source json.RawMessage) (string, error) {
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	if err := json.Unmarshal(source, &src); err != nil {
		return "", fmt.Errorf("image source: %w", err)
	}
	switch {
	case src.Type == "base64" && src.MediaType != "" && src.Data != "":
		return "data:" + src.MediaType + ";base64," + src.Data, nil
	case src.Type == "url" && src.URL != "":
		return src.URL, nil
	default:
		return "", fmt.Errorf("image source %s: want base64 or url", source)
	}
}

// documentText is a document's text when its source is plain text, else a
// placeholder: Chat Completions servers take no Anthropic documents.
func documentText(b turn.Block) string {
	var src struct {
		Type string `json:"type"`
		Data string `json:"data"`
	}
	if json.Unmarshal(b.Source, &src) == nil && src.Type == "text" {
		return src.Data
	}
	if b.Title != "" {
		return "[document: " + b.Title + "]"
	}
	return "[document]"
}

// toolResultText flattens a tool result to the text a tool message holds:
// images become "[image]", and an error result says so first.
func toolResultText(b turn.Block) string {
	var parts []string
	if b.IsError {
		parts = append(parts, "Error:")
	}
	if b.Content != nil {
		for _, c := range *b.Content {
			switch c.Type {
			case turn.BlockText:
				parts = append(parts, c.Text)
			case turn.BlockImage:
				parts = append(parts, "[image]")
			case turn.BlockDocument:
				parts = append(parts, documentText(c))
			}
		}
	}
	return strings.Join(parts, "\n")
}

// stopReasons maps finish reasons to the Anthropic-shaped stop reasons the
// rest of Mnemos reads.
var stopReasons = map[string]string{
	"stop":           "end_turn",
	"length":         "max_tokens",
	"tool_calls":     "tool_use",
	"function_call":  "tool_use",
	"content_filter": "refusal",
}

// response translates the SDK's completion. The usage's input excludes the
// cached prompt tokens, which are counted as cache reads (and writes, for
// servers that report them), so Usage.Total counts each token once.
func response(cc *sdk.ChatCompletion, wantJSON bool) (llm.Response, error) {
	u := cc.Usage
	cached := u.PromptTokensDetails.CachedTokens
	written := u.PromptTokensDetails.CacheWriteTokens
	resp := llm.Response{
		Model: cc.Model,
		Usage: llm.Usage{
			InputTokens:      max(u.PromptTokens-cached-written, 0),
			OutputTokens:     u.CompletionTokens,
			CacheReadTokens:  cached,
			CacheWriteTokens: written,
		},
	}
	if len(cc.Choices) == 0 {
		return resp, &llm.Error{Kind: llm.KindBadResponse, Err: errors.New("openai: the completion has no choice")}
	}
	choice := cc.Choices[0]
	resp.StopReason = choice.FinishReason
	if r, ok := stopReasons[choice.FinishReason]; ok {
		resp.StopReason = r
	}
	resp.Text = choice.Message.Content
	for _, tc := range choice.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			continue
		}
		args := strings.TrimSpace(tc.Function.Arguments)
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			return resp, &llm.Error{Kind: llm.KindBadResponse,
				Err: fmt.Errorf("openai: tool call %s (%s): arguments are not JSON: %.200q", tc.ID, tc.Function.Name, args)}
		}
		resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(args)})
	}
	if wantJSON {
		answer := unfence(resp.Text)
		if !json.Valid([]byte(answer)) {
			return resp, &llm.Error{Kind: llm.KindBadResponse,
				Err: fmt.Errorf("openai: asked for JSON, got %.200q (refusal %q)", resp.Text, choice.Message.Refusal)}
		}
		resp.Text = answer
	}
	return resp, nil
}

// unfence strips whitespace and a surrounding markdown code fence, which
// some local models put around JSON even when asked not to.
func unfence(s string) string {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	s = strings.TrimSuffix(s[3:], "```")
	if nl := strings.IndexByte(s, '\n'); nl >= 0 && !strings.ContainsAny(s[:nl], "{[\"") {
		s = s[nl+1:] // the fence's language tag, e.g. "json"
	}
	return strings.TrimSpace(s)
}

// The ways servers say a prompt does not fit: OpenAI and vLLM, "maximum
// context length is 128000 tokens. However, your messages resulted in
// 130000 tokens" (or "you requested 130000 tokens"); llama.cpp, an
// exceed_context_size_error with n_prompt_tokens and n_ctx.
var (
	maxContext = regexp.MustCompile(`maximum context length is (\d+) tokens`)
	requested  = regexp.MustCompile(`(?:resulted in|you requested) (\d+) tokens`)
)

// classify turns an SDK error into an *llm.Error.
func classify(err error) error {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		return llm.TransportError(Name, err)
	}
	message, typ := apiErr.Message, apiErr.Type
	if message == "" {
		message, typ = topLevelError(apiErr.Response)
	}
	e := &llm.Error{
		Kind:   llm.StatusKind(apiErr.StatusCode),
		Status: apiErr.StatusCode,
		Err:    fmt.Errorf("openai: %s (type %q, code %q)", message, typ, apiErr.Code),
	}
	if apiErr.Response != nil {
		e.RetryAfter = llm.RetryAfter(apiErr.Response.Header, time.Now())
	}
	msg := strings.ToLower(message)
	switch {
	case apiErr.Code == "context_length_exceeded" || strings.Contains(msg, "maximum context length"):
		e.Kind = llm.KindPromptTooLong
		limit, actual := maxContext.FindStringSubmatch(msg), requested.FindStringSubmatch(msg)
		if limit != nil && actual != nil {
			e.Gap = max(atoi(actual[1])-atoi(limit[1]), 0)
		}
	case typ == "exceed_context_size_error":
		e.Kind = llm.KindPromptTooLong
		var extra struct {
			Prompt  int64 `json:"n_prompt_tokens"`
			Context int64 `json:"n_ctx"`
		}
		if json.Unmarshal([]byte(apiErr.RawJSON()), &extra) == nil && extra.Prompt > 0 && extra.Context > 0 {
			e.Gap = max(extra.Prompt-extra.Context, 0)
		}
	}
	return e
}

// topLevelError reads an error body that is not nested under "error", as
// some versions of vLLM write it: {"object":"error","message":…,"type":…}.
func topLevelError(res *http.Response) (message, typ string) {
	if res == nil || res.Body == nil {
		return "", ""
	}
	var body struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil || json.Unmarshal(data, &body) != nil {
		return "", ""
	}
	return body.Message, body.Type
}

// atoi reads digits a regexp matched; they always parse.
func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
