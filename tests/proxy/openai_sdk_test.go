package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	scripted "github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// sentBodies keeps the body of every request an SDK client sends, as it
// sent it (an SDK middleware), to hold against what the upstream got.
type sentBodies struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (s *sentBodies) middleware(r *http.Request, next oaioption.MiddlewareNext) (*http.Response, error) {
	if err := s.keep(r); err != nil {
		return nil, err
	}
	return next(r)
}

// keep keeps r's body, and leaves it to be read again.
func (s *sentBodies) keep(r *http.Request) error {
	if r.Body == nil {
		return nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	s.mu.Unlock()
	return nil
}

func (s *sentBodies) all() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// openaiClient is the official OpenAI SDK pointed at Mnemos with the
// tenant's key and a session header, its requests kept in sent.
func openaiClient(m *mnemos, session string, sent *sentBodies) openai.Client {
	return openai.NewClient(oaioption.WithBaseURL(m.api.URL+"/v1"), oaioption.WithAPIKey(key), oaioption.WithMaxRetries(0),
		oaioption.WithHeader("X-Mnemos-Session", session), oaioption.WithMiddleware(sent.middleware))
}

// sameConversation holds an upstream's body against the client's: the same
// JSON value (Mnemos changed nothing), and the client's conversation items
// byte for byte, in order.
func sameConversation(t *testing.T, field string, client, upstream []byte) {
	t.Helper()
	require.JSONEq(t, string(client), string(upstream), "the upstream got what the client sent")
	var c, u map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(client, &c))
	require.NoError(t, json.Unmarshal(upstream, &u))
	var ci, ui []json.RawMessage
	require.NoError(t, json.Unmarshal(c[field], &ci))
	require.NoError(t, json.Unmarshal(u[field], &ui))
	require.Len(t, ui, len(ci))
	for i := range ci {
		require.Equal(t, string(ci[i]), string(ui[i]), "%s %d goes up as the client's own bytes", field, i)
	}
}

// TestTheResponsesDoorServesTheOpenAISDK: the official Go SDK, pointed at
// Mnemos, runs a tool round of the Responses API not streamed, then the
// round after it streamed. Each request reaches the upstream as the client
// sent it (nothing to manage in so short a session), the answers come back
// as the upstream gave them, and both rounds are the session's: its four
// messages stored, counted from the upstream's usage.
func TestTheResponsesDoorServesTheOpenAISDK(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	up := scripted.Start(t, scripted.Config{Script: func(r *scripted.Request) (scripted.Reply, error) {
		if r.Outputs() == 0 {
			return scripted.Say(scripted.Reasoning("look it up"), scripted.FunctionCall("lookup", map[string]string{"q": "capital of France"})), nil
		}
		return scripted.Say(scripted.Text("Paris.")), nil
	}})
	m := startMnemos(t, "http://127.0.0.1:1", key)
	require.NoError(t, m.store.SetTenantUpstream(ctx, tenant, store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(up.URL, "/v1"), Key: "sk-acme-openai"}))
	sent := &sentBodies{}
	client := openaiClient(m, "responses-sdk", sent)

	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("What is the capital of France?", responses.EasyInputMessageRoleUser)}
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Instructions: openai.String("Answer in one word."), Store: openai.Bool(false)})
	require.NoError(t, err)
	require.Len(t, first.Output, 2)
	var call responses.ResponseFunctionToolCall
	for _, item := range first.Output {
		// The answer's items go back as the client got them.
		input = append(input, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(item.RawJSON())))
		if item.Type == "function_call" {
			call = item.AsFunctionCall()
		}
	}
	require.Equal(t, "lookup", call.Name)
	// The first round applied, the next request is rendered from what the
	// session stored: the answer the client echoes without what it drops
	// of it must go up as the client sent it.
	waitApplied(t, m.store, "responses-sdk", 1)
	input = append(input, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
		CallID: openai.String(call.CallID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("Paris is the capital of France.")}}})

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
		Instructions: openai.String("Answer in one word."), Store: openai.Bool(false)})
	var text string
	var completed bool
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			completed = true
			require.Equal(t, "Paris.", ev.Response.OutputText())
		}
	}
	require.NoError(t, stream.Err())
	require.True(t, completed)
	require.Equal(t, "Paris.", text)

	calls, bodies := up.Calls(), sent.all()
	require.Len(t, calls, 2)
	require.Len(t, bodies, 2)
	for i := range calls {
		sameConversation(t, "input", bodies[i], calls[i].Body)
		require.Equal(t, "Bearer sk-acme-openai", calls[i].Header.Get("Authorization"), "the upstream gets the key Mnemos holds")
	}
	sess := waitApplied(t, m.store, "responses-sdk", 2)
	require.EqualValues(t, 4, sess.MessageCount, "question, call, result, answer")
	require.Positive(t, sess.TokenCount)
}

// TestTheChatDoorServesTheOpenAISDK: the same for Chat Completions, a tool
// round not streamed and the next streamed with its usage.
func TestTheChatDoorServesTheOpenAISDK(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	up := llmtest.NewOpenAIServer(t, func(r llmtest.Request) llmtest.Reply {
		if len(r.Messages) < 3 {
			return llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "lookup", Input: json.RawMessage(`{"q":"capital of France"}`)}}}
		}
		return llmtest.Text("Paris.")
	})
	m := startMnemos(t, "http://127.0.0.1:1", key)
	require.NoError(t, m.store.SetTenantUpstream(ctx, tenant, store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(up.URL, "/v1"), Key: "sk-acme-openai"}))
	sent := &sentBodies{}
	client := openaiClient(m, "chat-sdk", sent)

	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Answer in one word."), openai.UserMessage("What is the capital of France?")}
	first, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-5", Messages: msgs})
	require.NoError(t, err)
	require.Len(t, first.Choices, 1)
	require.Len(t, first.Choices[0].Message.ToolCalls, 1)
	waitApplied(t, m.store, "chat-sdk", 1) // as for the Responses door: the next request rendered from the store
	msgs = append(msgs, first.Choices[0].Message.ToParam(), openai.ToolMessage("Paris is the capital of France.", first.Choices[0].Message.ToolCalls[0].ID))

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-5", Messages: msgs,
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	require.NoError(t, stream.Err())
	require.Equal(t, "Paris.", acc.Choices[0].Message.Content)
	require.Positive(t, acc.Usage.PromptTokens)

	reqs, bodies := up.Requests(), sent.all()
	require.Len(t, reqs, 2)
	require.Len(t, bodies, 2)
	for i := range reqs {
		sameConversation(t, "messages", bodies[i], reqs[i].Body)
		require.Equal(t, "Bearer sk-acme-openai", reqs[i].Header.Get("Authorization"))
	}
	sess := waitApplied(t, m.store, "chat-sdk", 2)
	require.EqualValues(t, 4, sess.MessageCount, "question, call, result, answer: the system message is the prefix")
	require.Positive(t, sess.TokenCount)
}
