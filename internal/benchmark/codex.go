package benchmark

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
	"github.com/mnemos-ai/mnemos/pkg/openaiwire"
)

// The Responses door (POST /v1/responses), driven by the bench's own
// client as the Codex CLI drives it: the whole history every round as
// input items, a developer message first, streamed, stored nowhere
// (store false), the session's id as the prompt cache key and in the
// session-id header, against the System's scripted OpenAI upstream
// (internal/testkit/llmtest/responses, which models OpenAI's prompt cache).

// codexModel is the model every request names: 272K tokens of input.
const codexModel = "gpt-5"

// Input items, with their fields in the order the Codex CLI writes them.
type (
	codexPart struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	codexMessage struct {
		Type    string      `json:"type"`
		Role    string      `json:"role"`
		Content []codexPart `json:"content"`
	}
	codexCall struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	codexCallOutput struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
)

// codexJSON is v as the Codex CLI encodes it: HTML left unescaped, no
// newline after.
func codexJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client's own structs and maps of strings always encode
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// codexSays is a message item of one part: role's text, of type part
// (input_text, output_text).
func codexSays(role, part, text string) []byte {
	return codexJSON(codexMessage{Type: "message", Role: role, Content: []codexPart{{Type: part, Text: text}}})
}

// codexConversation is a client's side of a session at the Responses
// door: what it sends each round.
type codexConversation struct {
	// head and tail are the body around the input items, the same every
	// round: the model and instructions before, the tools and the
	// request's settings after.
	head, tail []byte
	// items are the input items as sent, each encoded once: an item does
	// not change once it is in the history.
	items [][]byte
}

// newCodexConversation is the start of session id as the Codex CLI sends
// it: instructions and tools (about 1,000 tokens) and, to begin the
// history, a developer message of the sandbox's permissions; and its
// tokens as the upstream counts them (responses.Measure).
func newCodexConversation(id string) (*codexConversation, int64) {
	tools := codexJSON(codexTools())
	c := &codexConversation{
		head: fmt.Appendf(nil, `{"model":%s,"instructions":%s,"input":[`, codexJSON(codexModel), codexJSON(codexInstructions)),
		tail: fmt.Appendf(nil, `],"tools":%s,"tool_choice":"auto","parallel_tool_calls":false,"store":false,"stream":true,"include":[],"prompt_cache_key":%s}`,
			tools, codexJSON(id)),
	}
	measured := codexJSON(struct {
		Tools        json.RawMessage `json:"tools"`
		Instructions string          `json:"instructions"`
	}{tools, codexInstructions})
	tokens := codexTokens(measured)
	c.items = append(c.items, codexSays("developer", "input_text",
		"<permissions instructions>\nFilesystem sandboxing: workspace-write. Network access is restricted. Approvals: on-request.\n</permissions instructions>"))
	return c, tokens + codexTokens(c.items[0])
}

// codexTokens is a part of a prompt as the upstream counts it: a token
// for 4 bytes of its JSON, and 4 more.
func codexTokens(part []byte) int64 { return int64(len(part))/4 + 4 }

var codexInstructions = strings.Repeat("You are a coding agent running in the Codex CLI, a terminal-based assistant. "+
	"Read before you edit, keep changes small, and say what you changed. ", 20)

// codexTools are the function tools the client offers.
func codexTools() []map[string]any {
	tool := func(name, description string, params ...string) map[string]any {
		props := map[string]any{}
		for _, p := range params {
			props[p] = map[string]string{"type": "string"}
		}
		return map[string]any{"type": "function", "name": name, "description": description, "strict": false,
			"parameters": map[string]any{"type": "object", "properties": props, "required": params[:1], "additionalProperties": false}}
	}
	return []map[string]any{
		tool("exec_command", "Runs a command in a PTY, returning its output or a session id for an ongoing interaction.", "cmd", "workdir"),
		tool("write_stdin", "Writes characters to an existing exec_command session and returns recent output.", "session_id", "chars"),
		tool("update_plan", "Updates the task plan: a list of steps, each pending, in progress or completed.", "plan", "explanation"),
		tool("apply_patch", "Applies a patch to files in the workspace, in the apply_patch format.", "input"),
	}
}

// request is the body of the next round: the whole history.
func (c *codexConversation) request() []byte { return c.upTo(len(c.items)) }

// upTo is the body of a round whose input is the history's first n items.
func (c *codexConversation) upTo(n int) []byte {
	size := len(c.head) + len(c.tail) + n
	for _, it := range c.items[:n] {
		size += len(it)
	}
	body := make([]byte, 0, size)
	body = append(body, c.head...)
	for i, it := range c.items[:n] {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, it...)
	}
	return append(body, c.tail...)
}

// codexOut is an output item of an answer, as far as the client reads it.
type codexOut struct {
	Type      string      `json:"type"`
	Content   []codexPart `json:"content"`
	CallID    string      `json:"call_id"`
	Name      string      `json:"name"`
	Arguments string      `json:"arguments"`
}

// answered adds the model's output to the history as the client sends it
// back (without the items' ids and statuses), then the result of each of
// its function calls as result says it.
func (c *codexConversation) answered(out []codexOut, result func(call codexOut) string) {
	var calls []codexOut
	for _, o := range out {
		switch o.Type {
		case "message":
			var text strings.Builder
			for _, p := range o.Content {
				text.WriteString(p.Text)
			}
			c.items = append(c.items, codexSays("assistant", "output_text", text.String()))
		case "function_call":
			calls = append(calls, o)
			c.items = append(c.items, codexJSON(codexCall{Type: "function_call", CallID: o.CallID, Name: o.Name, Arguments: o.Arguments}))
		}
	}
	for _, call := range calls {
		c.items = append(c.items, codexJSON(codexCallOutput{Type: "function_call_output", CallID: call.CallID, Output: result(call)}))
	}
}

// codexOutput is the output of a streamed answer, which must complete.
func codexOutput(stream []byte) ([]codexOut, error) {
	a, err := openaiwire.ReadResponsesStream(bytes.NewReader(stream))
	if err != nil {
		return nil, fmt.Errorf("benchmark: responses: the answer: %w", err)
	}
	out := make([]codexOut, len(a.Output))
	for i, raw := range a.Output {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("benchmark: responses: output item %d: %w", i, err)
		}
	}
	return out, nil
}

// postResponses sends a round of session to base's /v1/responses —
// Mnemos's when through, else the upstream's — with the Codex CLI's
// headers, and reads the whole stream; took is from sending to the last
// byte read.
func postResponses(ctx context.Context, base, session string, through bool, body []byte) ([]codexOut, time.Duration, error) {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	h.Set("Authorization", "Bearer "+straightKey)
	if through {
		h.Set("Authorization", "Bearer "+APIKey)
	}
	h.Set("Session-Id", session)
	h.Set("X-Codex-Turn-Metadata", `{"request_kind":"turn"}`)
	data, took, err := roundTrip(ctx, base+"/v1/responses", h, body)
	if err != nil {
		return nil, 0, err
	}
	out, err := codexOutput(data)
	return out, took, err
}

// responsesDoor is POST /v1/responses, in front of the System's OpenAI
// upstream.
type responsesDoor struct {
	s *System
	// made counts the upstreams answer made, so that each hands out ids
	// of its own.
	made int
}

// build is a session of about size tokens, as the upstream counts them:
// the conversation's start, then rounds of a request, a call of
// exec_command with its result, and builtAnswer.
func (d *responsesDoor) build(id string, size int64) (doorSession, int) {
	c, tokens := newCodexConversation(id)
	add := func(item []byte) {
		tokens += codexTokens(item)
		c.items = append(c.items, item)
	}
	rounds := 0
	for ; tokens < size; rounds++ {
		call := fmt.Sprintf("call_%s_%d", strings.ReplaceAll(id, "-", "_"), rounds)
		add(codexSays("user", "input_text", builtRequest))
		add(codexJSON(codexCall{Type: "function_call", CallID: call, Name: "exec_command", Arguments: `{"cmd":"rg -n loadConfig src/"}`}))
		add(codexJSON(codexCallOutput{Type: "function_call_output", CallID: call, Output: builtOutput(rounds)}))
		add(codexSays("assistant", "output_text", builtAnswer))
	}
	return &responsesSession{s: d.s, id: id, c: c}, rounds
}

func (d *responsesDoor) answer(final bool) func() []int64 {
	d.made++
	up := responses.New(responses.Config{IDPrefix: fmt.Sprintf("u%d_", d.made), Script: func(*responses.Request) (responses.Reply, error) {
		if final {
			return responses.Say(responses.Text(builtAnswer)), nil
		}
		return responses.Say(responses.FunctionCall("exec_command", map[string]string{"cmd": "go test ./..."})), nil
	}})
	d.s.UseResponses(up)
	return inputSizes(up.Calls, func(c responses.Call) int64 { return c.Usage.Input })
}

// responsesSession is a codexConversation of session id.
type responsesSession struct {
	s  *System
	id string
	c  *codexConversation
}

func (r *responsesSession) request() ([]byte, error) { return r.c.request(), nil }

// beforeAnswer is the developer message the history begins with and the
// rounds but the last one's answer: one item for each entry of the rounds.
func (r *responsesSession) beforeAnswer(rounds int) ([]byte, error) {
	return r.c.upTo(rounds * builtPerRound), nil
}

func (r *responsesSession) ask(text string) {
	r.c.items = append(r.c.items, codexSays("user", "input_text", text))
}

func (r *responsesSession) send(ctx context.Context, through bool, body []byte) (time.Duration, func(), error) {
	base := r.s.UpstreamOpenAI
	if through {
		base = r.s.API
	}
	out, took, err := postResponses(ctx, base, r.id, through, body)
	return took, func() { r.c.answered(out, func(codexOut) string { return "done" }) }, err
}
