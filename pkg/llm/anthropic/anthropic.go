// Package anthropic is the llm.Provider over the Anthropic Messages API,
// through the official Go SDK. The system prompt, and the tool definitions
// when there are any, are marked for prompt caching: they are the prefix
// every call of a task shares.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Name is the provider's kind.
const Name = "anthropic"

// Defaults of Config.
const (
	DefaultModel     = sdk.ModelClaudeSonnet5_5
	DefaultTimeout   = 10 * time.Minute
	DefaultMaxTokens = 8192
)

// AnswerTool is the name of the tool a call asking for JSON forces the
// model to call; its input is the answer.
const AnswerTool = "answer"

// Config configures the provider. Only APIKey is required.
type Config struct {
	APIKey string
	// BaseURL replaces the API's address (a proxy, a test server).
	BaseURL string
	// Model is the default model (DefaultModel); Models picks one per task.
	Model  string
	Models llm.Models
	// Timeout bounds one call (DefaultTimeout).
	Timeout time.Duration
	// HTTPClient replaces the default HTTP client.
	HTTPClient *http.Client
}

// Provider calls the Anthropic Messages API. Its SDK client never retries:
// retries belong to llm.Guard.
type Provider struct {
	client  sdk.Client
	model   string
	models  llm.Models
	timeout time.Duration
}

// New returns a provider for cfg. It reads no environment variable.
func New(cfg Config) (*Provider, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("anthropic: an API key is required")
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(0),
		// An explicit timeout also lifts the SDK's refusal of large
		// max_tokens without streaming; our own deadline is cfg.Timeout.
		option.WithRequestTimeout(cfg.Timeout),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{client: sdk.NewClient(opts...), model: cfg.Model, models: cfg.Models, timeout: cfg.Timeout}, nil
}

// Name returns "anthropic".
func (p *Provider) Name() string { return Name }

// Model is the model req is sent to: its own, else its task's, else the
// provider's default.
func (p *Provider) Model(req llm.Request) string { return p.models.Pick(req, p.model) }

// Complete makes one Messages API call. With req.JSONSchema set it forces a
// call of AnswerTool, whose input schema is the schema, and returns that
// input as Text.
//
// With req.Prefix set the call is a fork of the agent's request (see
// fork). A fork the API refuses, or whose answer cannot be used, is made
// again as an ordinary call, its usage added: a fork only saves money.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if req.Prefix != nil && len(req.Ask) > 0 {
		resp, err := p.fork(ctx, req)
		if err == nil || !forkFallsBack(err) || ctx.Err() != nil {
			return resp, err
		}
		plain, err := p.complete(ctx, req)
		plain.Usage = plain.Usage.Add(resp.Usage)
		return plain, err
	}
	return p.complete(ctx, req)
}

// forkFallsBack reports whether a failed fork is made again unforked: when
// the request or its answer was at fault (a fork adds to an agent request
// that may be near its window), not the API's state.
func forkFallsBack(err error) bool {
	switch llm.KindOf(err) {
	case llm.KindRequest, llm.KindBadResponse, llm.KindUnsupported, llm.KindPromptTooLong:
		return true
	}
	return false
}

// complete makes the ordinary call of req.
func (p *Provider) complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	params, err := p.params(req)
	if err != nil {
		return llm.Response{}, &llm.Error{Kind: llm.KindRequest, Err: fmt.Errorf("anthropic: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	msg, err := p.client.Messages.New(ctx, params)
	if err != nil {
		return llm.Response{}, classify(err)
	}
	return response(msg, req.JSONSchema != nil)
}

// answerAsk closes a JSON call to a model that cannot be made to call
// AnswerTool.
const answerAsk = "Give your answer by calling the " + AnswerTool + " tool once, with the answer as its input."

// ForcesTools reports whether model accepts a tool_choice that forces a
// tool. Claude Sonnet 5.5 and Opus 5.5 refuse one (400
// invalid_request_error): a JSON answer is asked of them in words, and
// read from the answer tool's call or, failing that, from the text.
func ForcesTools(model string) bool {
	m := strings.ToLower(model)
	for _, family := range []string{"claude-sonnet-5-5", "claude-opus-5-5"} {
		if strings.Contains(m, family) {
			return false
		}
	}
	return true
}

// params translates req to the SDK's request.
func (p *Provider) params(req llm.Request) (sdk.MessageNewParams, error) {
	params := sdk.MessageNewParams{
		Model:     p.Model(req),
		MaxTokens: req.MaxTokens,
	}
	if params.MaxTokens <= 0 {
		params.MaxTokens = DefaultMaxTokens
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System, CacheControl: sdk.NewCacheControlEphemeralParam()}}
	}
	for i, m := range llm.Normalize(req.Messages) {
		mp, err := message(m)
		if err != nil {
			return params, fmt.Errorf("message %d: %w", i, err)
		}
		if len(mp.Content) > 0 {
			params.Messages = append(params.Messages, mp)
		}
	}
	trimPrefill(params.Messages)
	for _, t := range req.Tools {
		tool, err := toolParam(t.Name, t.Description, t.InputSchema)
		if err != nil {
			return params, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		params.Tools = append(params.Tools, tool)
	}
	if req.JSONSchema != nil {
		tool, err := toolParam(AnswerTool, "Give your answer as this tool's input.", req.JSONSchema)
		if err != nil {
			return params, fmt.Errorf("json schema: %w", err)
		}
		params.Tools = append(params.Tools, tool)
		if ForcesTools(params.Model) {
			params.ToolChoice = sdk.ToolChoiceParamOfTool(AnswerTool)
		} else if n := len(params.Messages); n > 0 && params.Messages[n-1].Role == sdk.MessageParamRoleUser {
			// The model chooses: ask in words (its answer in text is read too).
			params.Messages[n-1].Content = append(params.Messages[n-1].Content, sdk.NewTextBlock(answerAsk))
		}
	}
	if n := len(params.Tools); n > 0 {
		params.Tools[n-1].OfTool.CacheControl = sdk.NewCacheControlEphemeralParam()
	}
	return params, nil
}

func toolParam(name, description string, schema json.RawMessage) (sdk.ToolUnionParam, error) {
	var in sdk.ToolInputSchemaParam
	if len(schema) > 0 {
		var probe struct {
			Type any `json:"type"`
		}
		if err := json.Unmarshal(schema, &probe); err != nil {
			return sdk.ToolUnionParam{}, fmt.Errorf("input schema: want a JSON object: %w", err)
		}
		if probe.Type != nil && probe.Type != "object" {
			return sdk.ToolUnionParam{}, fmt.Errorf("input schema: type %v, want object", probe.Type)
		}
		if err := json.Unmarshal(schema, &in); err != nil {
			return sdk.ToolUnionParam{}, fmt.Errorf("input schema: %w", err)
		}
	}
	tool := sdk.ToolUnionParamOfTool(in, name)
	if description != "" {
		tool.OfTool.Description = sdk.String(description)
	}
	return tool, nil
}

// trimPrefill trims the trailing whitespace the API refuses at the end of a
// conversation's last message when that is the assistant's (a prefill).
func trimPrefill(msgs []sdk.MessageParam) {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != sdk.MessageParamRoleAssistant {
		return
	}
	content := msgs[len(msgs)-1].Content
	if last := content[len(content)-1].OfText; last != nil {
		last.Text = strings.TrimRightFunc(last.Text, unicode.IsSpace)
	}
}

// message translates one message. Thinking blocks are dropped: calls never
// enable thinking, and a signature is only valid with the model that made
// it. Blank text blocks, which the API refuses, are dropped too.
func message(m llm.Message) (sdk.MessageParam, error) {
	var role sdk.MessageParamRole
	switch m.Role {
	case "user":
		role = sdk.MessageParamRoleUser
	case "assistant":
		role = sdk.MessageParamRoleAssistant
	default:
		return sdk.MessageParam{}, fmt.Errorf("role %q: want user or assistant (the system prompt is Request.System)", m.Role)
	}
	mp := sdk.MessageParam{Role: role}
	for i, b := range m.Content {
		var block sdk.ContentBlockParamUnion
		switch b.Type {
		case turn.BlockText:
			if strings.TrimSpace(b.Text) == "" {
				continue
			}
			block.OfText = &sdk.TextBlockParam{Text: b.Text}
		case turn.BlockImage:
			img, err := image(b)
			if err != nil {
				return mp, fmt.Errorf("block %d: %w", i, err)
			}
			block.OfImage = img
		case turn.BlockDocument:
			doc, err := document(b)
			if err != nil {
				return mp, fmt.Errorf("block %d: %w", i, err)
			}
			block.OfDocument = doc
		case turn.BlockToolUse:
			input := b.Input
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			block.OfToolUse = &sdk.ToolUseBlockParam{ID: b.ID, Name: b.Name, Input: input}
		case turn.BlockToolResult:
			tr, err := toolResult(b)
			if err != nil {
				return mp, fmt.Errorf("block %d: %w", i, err)
			}
			block.OfToolResult = tr
		default:
			continue
		}
		mp.Content = append(mp.Content, block)
	}
	return mp, nil
}

func image(b turn.Block) (*sdk.ImageBlockParam, error) {
	var src sdk.ImageBlockParamSourceUnion
	if err := json.Unmarshal(b.Source, &src); err != nil || (src.OfBase64 == nil && src.OfURL == nil) {
		return nil, fmt.Errorf("image source %s: want base64 or url", b.Source)
	}
	return &sdk.ImageBlockParam{Source: src}, nil
}

func document(b turn.Block) (*sdk.DocumentBlockParam, error) {
	var src sdk.DocumentBlockParamSourceUnion
	if err := json.Unmarshal(b.Source, &src); err != nil {
		return nil, fmt.Errorf("document source %s: %w", b.Source, err)
	}
	doc := &sdk.DocumentBlockParam{Source: src}
	if b.Title != "" {
		doc.Title = sdk.String(b.Title)
	}
	if b.Context != "" {
		doc.Context = sdk.String(b.Context)
	}
	return doc, nil
}

func toolResult(b turn.Block) (*sdk.ToolResultBlockParam, error) {
	tr := &sdk.ToolResultBlockParam{ToolUseID: b.ToolUseID}
	if b.IsError {
		tr.IsError = sdk.Bool(true)
	}
	if b.Content == nil {
		return tr, nil
	}
	for i, c := range *b.Content {
		var part sdk.ToolResultBlockParamContentUnion
		switch c.Type {
		case turn.BlockText:
			if strings.TrimSpace(c.Text) == "" {
				continue
			}
			part.OfText = &sdk.TextBlockParam{Text: c.Text}
		case turn.BlockImage:
			img, err := image(c)
			if err != nil {
				return nil, fmt.Errorf("tool result block %d: %w", i, err)
			}
			part.OfImage = img
		case turn.BlockDocument:
			doc, err := document(c)
			if err != nil {
				return nil, fmt.Errorf("tool result block %d: %w", i, err)
			}
			part.OfDocument = doc
		default:
			continue
		}
		tr.Content = append(tr.Content, part)
	}
	return tr, nil
}

// response translates the SDK's message. When JSON was asked for, the
// AnswerTool call's input is the Text, and its absence KindBadResponse.
func response(msg *sdk.Message, wantJSON bool) (llm.Response, error) {
	resp := llm.Response{
		StopReason: string(msg.StopReason),
		Model:      msg.Model,
		Usage: llm.Usage{
			InputTokens:      msg.Usage.InputTokens,
			OutputTokens:     msg.Usage.OutputTokens,
			CacheReadTokens:  msg.Usage.CacheReadInputTokens,
			CacheWriteTokens: msg.Usage.CacheCreationInputTokens,
		},
	}
	var text strings.Builder
	var answer json.RawMessage
	for _, c := range msg.Content {
		switch c.Type {
		case "text":
			text.WriteString(c.Text)
		case "tool_use":
			if wantJSON && c.Name == AnswerTool && answer == nil {
				answer = c.Input
				continue
			}
			resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Name, Input: c.Input})
		}
	}
	resp.Text = text.String()
	if wantJSON {
		if answer == nil {
			if text, ok := jsonAnswer(resp.Text); ok {
				answer = json.RawMessage(text) // a model that was not forced, answering in words
			}
		}
		if answer == nil {
			return resp, &llm.Error{Kind: llm.KindBadResponse,
				Err: fmt.Errorf("anthropic: asked for JSON, the model did not call %s (stop reason %q)", AnswerTool, resp.StopReason)}
		}
		resp.Text = string(answer)
		if len(resp.ToolCalls) == 0 && resp.StopReason == string(sdk.StopReasonToolUse) {
			// The forced call is the answer, not a tool to run.
			resp.StopReason = string(sdk.StopReasonEndTurn)
		}
	}
	return resp, nil
}

// The two ways the API says a request does not fit the window:
// "prompt is too long: 210000 tokens > 200000 maximum" and "input length and
// `max_tokens` exceed context limit: 188240 + 21333 > 200000, …".
var (
	tooLong      = regexp.MustCompile(`(\d+)\s*tokens?\s*>\s*(\d+)`)
	overTheLimit = regexp.MustCompile(`(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)`)
)

// classify turns an SDK error into an *llm.Error.
func classify(err error) error {
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) {
		return llm.TransportError(Name, err)
	}
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(apiErr.RawJSON()), &body) // a body that is not the API's JSON leaves it empty
	e := &llm.Error{
		Kind:   llm.StatusKind(apiErr.StatusCode),
		Status: apiErr.StatusCode,
		Err:    fmt.Errorf("anthropic: %s: %s", body.Error.Type, body.Error.Message),
	}
	if apiErr.Response != nil {
		e.RetryAfter = llm.RetryAfter(apiErr.Response.Header, time.Now())
	}
	msg := strings.ToLower(body.Error.Message)
	switch {
	case apiErr.StatusCode == http.StatusRequestEntityTooLarge:
		// The body is over the API's size limit: only a shorter prompt helps.
		e.Kind = llm.KindPromptTooLong
	case apiErr.StatusCode != http.StatusBadRequest:
	case strings.Contains(msg, "prompt is too long"):
		e.Kind = llm.KindPromptTooLong
		if m := tooLong.FindStringSubmatch(msg); m != nil {
			e.Gap = max(atoi(m[1])-atoi(m[2]), 0)
		}
	case strings.Contains(msg, "exceed context limit"):
		e.Kind = llm.KindPromptTooLong
		if m := overTheLimit.FindStringSubmatch(msg); m != nil {
			e.Gap = max(atoi(m[1])+atoi(m[2])-atoi(m[3]), 0)
		}
	}
	return e
}

// atoi reads digits a regexp matched; they always parse.
func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
