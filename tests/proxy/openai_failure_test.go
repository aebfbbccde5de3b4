package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/bustest"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	scripted "github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/internal/testkit/pgtest"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// The OpenAI door (POST /v1/responses and /v1/chat/completions) fails as
// the Messages door does (failure_test.go): with the upstream, Postgres or
// NATS gone, or the client leaving mid-answer, the client gets the
// upstream's answer or a clear error in OpenAI's shape, and the session
// neither loses a message nor counts one twice. Each case runs behind both
// of OpenAI's APIs, the official openai-go SDK the client.

// openaiModel is the model the OpenAI clients ask for.
const openaiModel = "gpt-5"

// openaiConversation is an OpenAI client's side of a session, by one of
// the door's APIs: each round sends the conversation with the user's text
// added and, when the answer comes, keeps it; a round that fails leaves the
// conversation as it was (the client sends it again).
type openaiConversation interface {
	// round sends the next round, not streamed; streamed streams it,
	// read to its end (or, for a ctx that ends, until it does), calling
	// event, when set, as each event comes. Each answers the upstream's
	// text.
	round(ctx context.Context, text string) (string, error)
	streamed(ctx context.Context, text string, event func()) (string, error)
}

// openaiAPI is one of OpenAI's APIs the door serves, as a test drives it.
type openaiAPI struct {
	name string
	// converse is a conversation by the API with Mnemos at base, the
	// tenant's key apiKey and the session header.
	converse func(base, apiKey, session string) openaiConversation
}

var openaiAPIs = []openaiAPI{
	{name: "responses", converse: func(base, apiKey, session string) openaiConversation {
		return &responsesConversation{c: openaiSDK(base, apiKey, session)}
	}},
	{name: "chat", converse: func(base, apiKey, session string) openaiConversation {
		return &chatConversation{c: openaiSDK(base, apiKey, session)}
	}},
}

// openaiSDK is the official OpenAI SDK pointed at Mnemos with apiKey and a
// session header, retrying nothing.
func openaiSDK(base, apiKey, session string) openai.Client {
	return openai.NewClient(oaioption.WithBaseURL(base+"/v1"), oaioption.WithAPIKey(apiKey), oaioption.WithMaxRetries(0),
		oaioption.WithHeader("X-Mnemos-Session", session))
}

// responsesConversation is a conversation by the Responses API, the
// answer's items sent back as the client got them.
type responsesConversation struct {
	c     openai.Client
	input responses.ResponseInputParam
}

func (cv *responsesConversation) params(text string) responses.ResponseNewParams {
	input := append(cv.input[:len(cv.input):len(cv.input)], responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
	return responses.ResponseNewParams{Model: openaiModel, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}, Store: openai.Bool(false)}
}

// keep adds the round's question and answer to the conversation.
func (cv *responsesConversation) keep(p responses.ResponseNewParams, got *responses.Response) string {
	cv.input = p.Input.OfInputItemList
	for _, item := range got.Output {
		cv.input = append(cv.input, param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(item.RawJSON())))
	}
	return got.OutputText()
}

func (cv *responsesConversation) round(ctx context.Context, text string) (string, error) {
	p := cv.params(text)
	got, err := cv.c.Responses.New(ctx, p)
	if err != nil {
		return "", err
	}
	return cv.keep(p, got), nil
}

func (cv *responsesConversation) streamed(ctx context.Context, text string, event func()) (string, error) {
	p := cv.params(text)
	stream := cv.c.Responses.NewStreaming(ctx, p)
	var done *responses.Response
	for stream.Next() {
		if event != nil {
			event()
		}
		if ev := stream.Current(); ev.Type == "response.completed" {
			done = &ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		return "", err
	}
	if done == nil {
		return "", errors.New("the stream ended without response.completed")
	}
	return cv.keep(p, done), nil
}

// chatConversation is a conversation by Chat Completions.
type chatConversation struct {
	c    openai.Client
	msgs []openai.ChatCompletionMessageParamUnion
}

func (cv *chatConversation) params(text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: openaiModel, Messages: append(cv.msgs[:len(cv.msgs):len(cv.msgs)], openai.UserMessage(text))}
}

func (cv *chatConversation) round(ctx context.Context, text string) (string, error) {
	p := cv.params(text)
	got, err := cv.c.Chat.Completions.New(ctx, p)
	if err != nil {
		return "", err
	}
	if len(got.Choices) != 1 {
		return "", fmt.Errorf("%d choices", len(got.Choices))
	}
	cv.msgs = append(p.Messages, got.Choices[0].Message.ToParam())
	return got.Choices[0].Message.Content, nil
}

func (cv *chatConversation) streamed(ctx context.Context, text string, event func()) (string, error) {
	p := cv.params(text)
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := cv.c.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if event != nil {
			event()
		}
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		return "", err
	}
	if len(acc.Choices) != 1 {
		return "", fmt.Errorf("%d choices", len(acc.Choices))
	}
	cv.msgs = append(p.Messages, acc.Choices[0].Message.ToParam())
	return acc.Choices[0].Message.Content, nil
}

// openaiUpstream is an OpenAI upstream a test can take away and bring back
// on the same address: the scripted Responses API and the scripted Chat
// Completions behind one base URL, each answering "noted". A test may put
// its own answer in front of them (intercept).
type openaiUpstream struct {
	URL       string // the base URL, without /v1, as a tenant's upstream is set
	responses *scripted.Upstream
	chat      *llmtest.Server
	addr      string
	handler   http.Handler
	closed    chan struct{} // closed when the test ends: releases held calls

	mu        sync.Mutex
	srv       *http.Server
	intercept func(w http.ResponseWriter, r *http.Request) bool
	bodies    [][]byte // every call's, in order
}

func startOpenAIUpstream(t *testing.T) *openaiUpstream {
	t.Helper()
	u := &openaiUpstream{
		responses: scripted.New(scripted.Config{Script: func(*scripted.Request) (scripted.Reply, error) {
			return scripted.Say(scripted.Text("noted")), nil
		}}),
		chat:   llmtest.NewOpenAIServer(t, func(llmtest.Request) llmtest.Reply { return llmtest.Text("noted") }),
		closed: make(chan struct{}),
	}
	chatURL, err := url.Parse(u.chat.URL)
	require.NoError(t, err)
	chat := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: chatURL.Scheme, Host: chatURL.Host})
	u.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		u.mu.Lock()
		intercept := u.intercept
		u.bodies = append(u.bodies, body)
		u.mu.Unlock()
		if intercept != nil && intercept(w, r) {
			return
		}
		if r.URL.Path == "/v1/chat/completions" {
			chat.ServeHTTP(w, r)
			return
		}
		u.responses.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u.addr = ln.Addr().String()
	u.URL = "http://" + u.addr
	u.serve(ln)
	t.Cleanup(func() {
		close(u.closed)
		u.down()
	})
	return u
}

func (u *openaiUpstream) serve(ln net.Listener) {
	srv := &http.Server{Handler: u.handler, ReadHeaderTimeout: time.Minute}
	u.mu.Lock()
	u.srv = srv
	u.mu.Unlock()
	go func() { _ = srv.Serve(ln) }() // ErrServerClosed once taken down
}

// down closes the upstream: its connections, and its address refuses new ones.
func (u *openaiUpstream) down() {
	u.mu.Lock()
	srv := u.srv
	u.srv = nil
	u.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// up serves the upstream on its address again.
func (u *openaiUpstream) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", u.addr)
	require.NoError(t, err, "the upstream's address is free again")
	u.serve(ln)
}

// setIntercept puts f in front of the scripted APIs: a call it answers
// (reporting true) does not reach them.
func (u *openaiUpstream) setIntercept(f func(w http.ResponseWriter, r *http.Request) bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.intercept = f
}

// calls counts the calls the upstream received.
func (u *openaiUpstream) calls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.bodies)
}

// conversationOf is how many items (or messages) the conversation of the
// upstream's call i held.
func (u *openaiUpstream) conversationOf(t *testing.T, i int) int {
	t.Helper()
	u.mu.Lock()
	body := u.bodies[i]
	u.mu.Unlock()
	var req struct {
		Input    []json.RawMessage `json:"input"`
		Messages []json.RawMessage `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &req))
	return len(req.Input) + len(req.Messages)
}

// eachOpenAIAPI runs test by each of OpenAI's APIs, in parallel, each with
// an OpenAI upstream of its own.
func eachOpenAIAPI(t *testing.T, test func(t *testing.T, api openaiAPI, up *openaiUpstream)) {
	t.Helper()
	for _, api := range openaiAPIs {
		t.Run(api.name, func(t *testing.T) {
			t.Parallel()
			test(t, api, startOpenAIUpstream(t))
		})
	}
}

// openaiMnemos runs Mnemos on st and b, its tenant's OpenAI upstream up,
// and no Anthropic upstream that answers.
func openaiMnemos(t *testing.T, st *store.Store, b *bus.Bus, up *openaiUpstream) *mnemos {
	t.Helper()
	m := startMnemosOn(t, st, b, "http://127.0.0.1:1", key)
	require.NoError(t, st.SetTenantUpstream(context.Background(), tenant, store.ProviderOpenAI, store.Upstream{URL: up.URL, Key: "sk-acme-openai"}))
	return m
}

// openaiError is err as the SDK's API error, which it must be, with its
// body in OpenAI's shape.
func openaiError(t *testing.T, err error, status int) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, status, apiErr.StatusCode, "%s", apiErr.RawJSON())
	require.NotEmpty(t, apiErr.Message)
	require.NotEmpty(t, apiErr.Type)
	var body struct {
		Error map[string]json.RawMessage `json:"error"`
	}
	require.NoError(t, json.Unmarshal(errorBody(t, apiErr), &body))
	for _, field := range []string{"message", "type", "code"} {
		require.Contains(t, body.Error, field, "OpenAI's error shape")
	}
	return apiErr
}

// errorBody is the body of the answer an API error came with.
func errorBody(t *testing.T, apiErr *openai.Error) []byte {
	t.Helper()
	require.NotNil(t, apiErr.Response)
	body, err := io.ReadAll(apiErr.Response.Body)
	require.NoError(t, err)
	apiErr.Response.Body = io.NopCloser(bytes.NewReader(body)) // for the next reader
	return body
}

// streamed is cv's streamed round without a look at its events.
func streamed(cv openaiConversation) func(context.Context, string) (string, error) {
	return func(ctx context.Context, text string) (string, error) { return cv.streamed(ctx, text, nil) }
}

// secondRound sends a session's second round by send, after rounds that
// failed, and checks that the session holds its two rounds, managed, and
// nothing of the failed ones.
func secondRound(t *testing.T, m *mnemos, session, text string, send func(context.Context, string) (string, error)) {
	t.Helper()
	got, err := send(context.Background(), text)
	require.NoError(t, err)
	require.Equal(t, "noted", got)
	sess := waitApplied(t, m.store, session, 2)
	require.EqualValues(t, 2, sess.ProxySeq, "the failed rounds are not rounds")
	require.EqualValues(t, 4, sess.MessageCount)
	require.Equal(t, []string{"first", "noted", text, "noted"}, storedTexts(t, m.store, session))
	proxyCount(t, m, "managed", 2)
}

// proxyCount waits until Mnemos counted n requests of outcome: it counts
// once the answer is written, and the client may have it a moment before.
func proxyCount(t *testing.T, m *mnemos, outcome string, n int64) {
	t.Helper()
	if !assert.Eventually(t, func() bool { return m.metrics.Sum("mnemos.proxy.requests", "outcome", outcome) == n },
		10*time.Second, 10*time.Millisecond) {
		counted := map[string]int64{}
		for _, o := range []string{"managed", "passthrough", "unmanaged", "refused", "upstream_error", "client_gone", "unrecorded",
			"new_agent", "branched", "retry", "invalid"} {
			if c := m.metrics.Sum("mnemos.proxy.requests", "outcome", o); c > 0 {
				counted[o] = c
			}
		}
		require.FailNow(t, fmt.Sprintf("%d requests counted %s", n, outcome), "counted: %v", counted)
	}
}

// TestTheOpenAIDoorAnswers502WhenTheUpstreamIsDown: with nothing listening
// at the OpenAI upstream's address, a round of a session, streamed or not,
// gets 502 upstream_unreachable in OpenAI's shape, counted, and nothing is
// recorded; once the upstream is back on its address, the next round
// continues the session as if the failed ones had not been sent.
func TestTheOpenAIDoorAnswers502WhenTheUpstreamIsDown(t *testing.T) {
	t.Parallel()
	eachOpenAIAPI(t, func(t *testing.T, api openaiAPI, up *openaiUpstream) {
		ctx := context.Background()
		m := openaiMnemos(t, pgtest.New(t), bustest.New(t), up)
		cv := api.converse(m.api.URL, key, "down")
		_, err := cv.round(ctx, "first")
		require.NoError(t, err)
		waitApplied(t, m.store, "down", 1)

		up.down()
		calls := up.calls()
		for i, send := range []func(context.Context, string) (string, error){cv.round, streamed(cv)} {
			_, err = send(ctx, "second, while the upstream is away")
			apiErr := openaiError(t, err, http.StatusBadGateway)
			require.Equal(t, "upstream_unreachable", apiErr.Code)
			require.Equal(t, "server_error", apiErr.Type)
			require.Contains(t, apiErr.Message, "the upstream did not answer")
			proxyCount(t, m, "upstream_error", int64(i+1))
		}
		require.Equal(t, calls, up.calls())

		up.up(t)
		secondRound(t, m, "down", "second, the upstream is back", streamed(cv))
	})
}

// TestTheOpenAIDoorPassesTheUpstreamsErrorsOn: an upstream's error — a 429
// with Retry-After and its rate-limit headers, a 500 — reaches the client
// as the upstream sent it, streamed or not: its status, its body byte for
// byte, the headers OpenAI's clients read. It is counted, and no round is
// recorded: the session's second round is the one that got an answer.
func TestTheOpenAIDoorPassesTheUpstreamsErrorsOn(t *testing.T) {
	t.Parallel()
	type failure struct {
		status  int
		headers map[string]string
		body    string
	}
	failures := []failure{
		{status: http.StatusTooManyRequests, headers: map[string]string{
			"Retry-After": "7", "X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "7s", "X-Request-Id": "req_429"},
			body: `{"error":{"message":"Rate limit reached for gpt-5 on requests per min (RPM): Limit 3, Used 3.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
		{status: http.StatusInternalServerError, headers: map[string]string{"X-Request-Id": "req_500", "Retry-After": "1"},
			body: `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`},
	}
	eachOpenAIAPI(t, func(t *testing.T, api openaiAPI, up *openaiUpstream) {
		ctx := context.Background()
		m := openaiMnemos(t, pgtest.New(t), bustest.New(t), up)
		cv := api.converse(m.api.URL, key, "refused")
		_, err := cv.round(ctx, "first")
		require.NoError(t, err)
		waitApplied(t, m.store, "refused", 1)
		var n int64
		for _, f := range failures {
			up.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
				for k, v := range f.headers {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(f.status)
				_, _ = io.WriteString(w, f.body)
				return true
			})
			for _, send := range []func(context.Context, string) (string, error){cv.round, streamed(cv)} {
				_, err := send(ctx, "second")
				apiErr := openaiError(t, err, f.status)
				require.Equal(t, f.body, string(errorBody(t, apiErr)), "the upstream's body, as it sent it")
				for k, v := range f.headers {
					require.Equal(t, v, apiErr.Response.Header.Get(k), "the upstream's %s", k)
				}
				n++
				proxyCount(t, m, "upstream_error", n)
			}
		}
		up.setIntercept(nil)
		secondRound(t, m, "refused", "second", cv.round)
	})
}

// TestTheOpenAIDoorFailsOpenWhenPostgresIsDown: while Postgres cannot be
// reached, a session's round goes up as the client sent it and the client
// gets the upstream's answer (outcome unmanaged); a tenant that turned
// proxy.fail_open off gets 503 in OpenAI's shape with Retry-After, and the
// upstream is not called. When Postgres is back, the next round records the
// missed one's messages with its own, each once, and the refused tenant's
// round sent again is recorded.
func TestTheOpenAIDoorFailsOpenWhenPostgresIsDown(t *testing.T) {
	t.Parallel()
	eachOpenAIAPI(t, func(t *testing.T, api openaiAPI, up *openaiUpstream) {
		ctx := context.Background()
		pg, via := linkTo(t, pgtest.URL(t))
		st, err := store.Open(ctx, store.Config{URL: via, MaxConns: 8})
		require.NoError(t, err)
		t.Cleanup(st.Close)
		m := openaiMnemos(t, st, bustest.New(t), up)
		const strictKey = "mnm_proxy_strict_key"
		require.NoError(t, st.EnsureTenant(ctx, "strict", "Strict"))
		require.NoError(t, st.AddAPIKey(ctx, "strict", "test", strictKey))
		require.NoError(t, st.SetTenantSettings(ctx, "strict", []byte(`{"proxy":{"fail_open":false}}`)))
		require.NoError(t, st.SetTenantUpstream(ctx, "strict", store.ProviderOpenAI, store.Upstream{URL: up.URL, Key: "sk-strict-openai"}))

		acme, strict := api.converse(m.api.URL, key, "pg"), api.converse(m.api.URL, strictKey, "pg")
		_, err = acme.round(ctx, "first")
		require.NoError(t, err)
		_, err = strict.round(ctx, "first")
		require.NoError(t, err, "strict's key, settings and upstream are known before Postgres goes")
		waitApplied(t, st, "pg", 1)
		awaitTexts(t, st, "strict", "pg", 2)

		pg.cut()
		calls := up.calls()
		got, err := acme.round(ctx, "second, while Postgres is away")
		require.NoError(t, err, "fail-open: the upstream's answer")
		require.Equal(t, "noted", got)
		require.Equal(t, calls+1, up.calls())
		require.Equal(t, 3, up.conversationOf(t, calls), "the request went up as the client sent it")
		proxyCount(t, m, "unmanaged", 1)

		_, err = strict.round(ctx, "second, while Postgres is away")
		apiErr := openaiError(t, err, http.StatusServiceUnavailable)
		require.Equal(t, "server_error", apiErr.Type)
		require.Contains(t, apiErr.Message, "proxy.fail_open is off")
		require.Equal(t, "5", apiErr.Response.Header.Get("Retry-After"))
		require.Equal(t, calls+1, up.calls(), "a refused request never reaches the upstream")
		proxyCount(t, m, "refused", 1)

		postgresBack(t, pg, st, func(text string) error { _, err := acme.round(ctx, text); return err })

		_, err = strict.round(ctx, "second, Postgres is back")
		require.NoError(t, err)
		require.Equal(t, []string{"first", "noted", "second, Postgres is back", "noted"}, awaitTexts(t, st, "strict", "pg", 4))
	})
}

// TestTheOpenAIDoorPublishesTheRoundWhenNATSIsBack: while NATS cannot be
// reached, a managed round still answers the client, its turn waits in the
// outbox, and once NATS is back it is published and applied once.
func TestTheOpenAIDoorPublishesTheRoundWhenNATSIsBack(t *testing.T) {
	t.Parallel()
	eachOpenAIAPI(t, func(t *testing.T, api openaiAPI, up *openaiUpstream) {
		cfg := bustest.Config(t)
		nats, via := linkTo(t, cfg.URL)
		cfg.URL = via
		st := pgtest.New(t)
		m := openaiMnemos(t, st, bustest.Connect(t, cfg), up)

		ctx := context.Background()
		cv := api.converse(m.api.URL, key, "nats")
		_, err := cv.round(ctx, "first")
		require.NoError(t, err)
		waitApplied(t, st, "nats", 1)

		nats.cut()
		got, err := cv.streamed(ctx, "second, while NATS is away", nil)
		require.NoError(t, err)
		require.Equal(t, "noted", got)
		proxyCount(t, m, "managed", 2) // recorded: Postgres was there
		var waiting int
		require.NoError(t, pgtest.Admin(t, st).QueryRow(ctx,
			`SELECT count(*) FROM outbox WHERE subject LIKE '%turn.completed.' || $1 || '.nats'`, tenant).Scan(&waiting))
		require.Equal(t, 1, waiting, "the round's turn waits in the outbox")
		sess, err := st.GetSession(ctx, tenant, "nats")
		require.NoError(t, err)
		require.EqualValues(t, 1, sess.AppliedSeq, "nothing applied without the bus")

		nats.restore()
		sess = waitApplied(t, st, "nats", 2)
		require.EqualValues(t, 4, sess.MessageCount)
		require.Equal(t, []string{"first", "noted", "second, while NATS is away", "noted"}, storedTexts(t, st, "nats"))
	})
}

// firstEvents are the first event of each API's stream, as the upstream
// sends it before the rest of its answer.
var firstEvents = map[string]string{
	"responses": "event: response.created\ndata: " + `{"type":"response.created","sequence_number":0,"response":{"id":"resp_slow","object":"response","created_at":1767225600,"status":"in_progress","model":"gpt-5","output":[]}}` + "\n\n",
	"chat":      "data: " + `{"id":"chatcmpl-slow","object":"chat.completion.chunk","created":1767225600,"model":"gpt-5","choices":[{"index":0,"delta":{"role":"assistant","content":"A long"},"logprobs":null,"finish_reason":null}]}` + "\n\n",
}

// TestTheOpenAIDoorRecordsNothingWhenTheClientLeaves: a client that leaves
// while the upstream has not answered yet, or after the first event of a
// streamed answer, did not get the round: it is not recorded, and counted
// client_gone (not as the upstream's error). The same request sent again
// is recorded, once.
func TestTheOpenAIDoorRecordsNothingWhenTheClientLeaves(t *testing.T) {
	t.Parallel()
	eachOpenAIAPI(t, func(t *testing.T, api openaiAPI, up *openaiUpstream) {
		m := openaiMnemos(t, pgtest.New(t), bustest.New(t), up)
		cv := api.converse(m.api.URL, key, "leaving")
		// hold holds the upstream's answer, after its first event when
		// streamed is set, until Mnemos hangs up.
		arrived := make(chan struct{}, 1)
		hold := func(streamed bool) {
			up.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
				if streamed {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					_, _ = io.WriteString(w, firstEvents[api.name])
					http.NewResponseController(w).Flush() //nolint:errcheck // a writer that cannot flush fails the test below
				}
				arrived <- struct{}{}
				select {
				case <-r.Context().Done():
				case <-up.closed:
				}
				return true
			})
		}

		hold(false)
		ctx, cancel := context.WithCancel(context.Background())
		left := make(chan error, 1)
		go func() {
			_, err := cv.round(ctx, "tell me everything")
			left <- err
		}()
		<-arrived
		cancel() // the client leaves before the answer's headers
		require.ErrorIs(t, <-left, context.Canceled)
		proxyCount(t, m, "client_gone", 1)

		hold(true)
		ctx, cancel = context.WithCancel(context.Background())
		events := 0
		_, err := cv.streamed(ctx, "tell me everything", func() {
			events++
			cancel() // the client leaves once the first event is in
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, 1, events)
		<-arrived
		proxyCount(t, m, "client_gone", 2)
		require.Zero(t, m.metrics.Sum("mnemos.proxy.requests", "outcome", "upstream_error"))
		_, err = m.store.GetSession(context.Background(), tenant, "leaving")
		require.ErrorIs(t, err, store.ErrNotFound, "a round the client did not get is not recorded")

		up.setIntercept(nil)
		got, err := cv.streamed(context.Background(), "tell me everything", nil)
		require.NoError(t, err)
		require.Equal(t, "noted", got)
		sess := waitApplied(t, m.store, "leaving", 1)
		require.EqualValues(t, 2, sess.MessageCount, "the question and the whole answer, once")
		require.Equal(t, 3, up.calls(), "the upstream was called three times; the session has one round")
		proxyCount(t, m, "managed", 1)
	})
}

// TestTheOpenAIDoorRefusesBadInput: a body that is not JSON, and a request
// whose conversation is not a list (nor, for the Responses API, a string),
// get 400 invalid_request_error in OpenAI's shape, counted, without a call
// upstream; the session's next good request is its first round.
func TestTheOpenAIDoorRefusesBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	up := startOpenAIUpstream(t)
	m := openaiMnemos(t, pgtest.New(t), bustest.New(t), up)
	c := openaiSDK(m.api.URL, key, "bad")
	input := responses.ResponseNewParams{Model: openaiModel, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}
	chat := openai.ChatCompletionNewParams{Model: openaiModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}
	bad := []struct {
		name string
		send func() error
		says string
	}{
		{"responses, not JSON", func() error {
			_, err := c.Responses.New(ctx, input, oaioption.WithRequestBody("application/json", []byte(`{"model":"gpt-5","input":[`)))
			return err
		}, "not a JSON object"},
		{"responses, input a number", func() error {
			_, err := c.Responses.New(ctx, input, oaioption.WithJSONSet("input", 42))
			return err
		}, "input: want an array of items"},
		{"responses, input an object", func() error {
			_, err := c.Responses.New(ctx, input, oaioption.WithJSONSet("input", map[string]string{"role": "user", "content": "hello"}))
			return err
		}, "input: want an array of items"},
		{"chat, not JSON", func() error {
			_, err := c.Chat.Completions.New(ctx, chat, oaioption.WithRequestBody("application/json", []byte(`not json`)))
			return err
		}, "not a JSON object"},
		{"chat, messages a string", func() error {
			_, err := c.Chat.Completions.New(ctx, chat, oaioption.WithJSONSet("messages", "hello"))
			return err
		}, "messages: want an array of messages"},
	}
	for i, b := range bad {
		apiErr := openaiError(t, b.send(), http.StatusBadRequest)
		require.Equal(t, "invalid_request_error", apiErr.Type, b.name)
		require.Equal(t, "invalid_request_error", apiErr.Code, b.name)
		require.Contains(t, apiErr.Message, b.says, b.name)
		proxyCount(t, m, "invalid", int64(i+1))
	}
	require.Zero(t, up.calls(), "nothing went up")

	// The Messages API's bad input is counted the same.
	_, err := converse(m.api.URL, key, "bad").c.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 16, Messages: []sdk.MessageParam{userText("hello")}},
		option.WithRequestBody("application/json", []byte(`{"model":"`+model+`","messages":{}}`)))
	var anthropicErr *sdk.Error
	require.ErrorAs(t, err, &anthropicErr)
	require.Equal(t, http.StatusBadRequest, anthropicErr.StatusCode)
	require.Contains(t, anthropicErr.RawJSON(), `"type":"invalid_request_error"`)
	proxyCount(t, m, "invalid", int64(len(bad)+1))

	for _, api := range openaiAPIs {
		cv := api.converse(m.api.URL, key, "bad-"+api.name)
		got, err := cv.round(ctx, "hello")
		require.NoError(t, err)
		require.Equal(t, "noted", got)
		sess := waitApplied(t, m.store, "bad-"+api.name, 1)
		require.EqualValues(t, 2, sess.MessageCount)
	}
	proxyCount(t, m, "managed", 2)
}

// sessionTexts are a tenant's stored messages' first texts, of the
// session and every thread of it, each thread's in order.
func sessionTexts(t *testing.T, st *store.Store, tenant, session string) []string {
	t.Helper()
	return queryTexts(t, st, `SELECT coalesce(content->0->>'text', '') FROM messages
		WHERE tenant_id = $1 AND (session_id = $2 OR session_id LIKE $2 || '--%') ORDER BY session_id, position`, tenant, session)
}

// awaitTexts waits until a tenant's session holds n messages and answers
// their first texts (sessionTexts).
func awaitTexts(t *testing.T, st *store.Store, tenant, session string, n int) []string {
	t.Helper()
	var texts []string
	require.Eventually(t, func() bool { texts = sessionTexts(t, st, tenant, session); return len(texts) >= n },
		30*time.Second, 20*time.Millisecond, "%s's session %s never held %d messages", tenant, session, n)
	return texts
}

// TestTheOpenAIDoorKeepsTenantsApart: two tenants send rounds under the same
// session id by the Responses API and by the Messages API, each its own
// words by both. Each tenant's upstreams get only its own requests, with
// the key Mnemos holds for it; each tenant's session holds only its own
// messages, and the two APIs' conversations of one session are threads of
// their own even where they hold the same messages (the Messages API's
// first request is not taken for a retry of the Responses API's). A tenant
// without an OpenAI upstream gets 503 no_upstream while the others' go on,
// and a key Mnemos does not know gets 401 in OpenAI's shape.
func TestTheOpenAIDoorKeepsTenantsApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	say := func(who string) *scripted.Upstream {
		return scripted.Start(t, scripted.Config{Script: func(r *scripted.Request) (scripted.Reply, error) {
			users := r.Messages("user")
			return scripted.Say(scripted.Text(who + " noted " + users[len(users)-1].Text)), nil
		}})
	}
	acmeOpenAI, globexOpenAI := say("acme's openai"), say("globex's openai")
	shared := upstream.Start(t, upstream.Config{Script: echo})
	globexAnthropic := upstream.Start(t, upstream.Config{Script: echo})
	m := startMnemos(t, shared.URL, key)
	const globexKey, initechKey = "mnm_proxy_globex_key", "mnm_proxy_initech_key"
	for name, k := range map[string]string{"globex": globexKey, "initech": initechKey} {
		require.NoError(t, m.store.EnsureTenant(ctx, name, name))
		require.NoError(t, m.store.AddAPIKey(ctx, name, "test", k))
	}
	require.NoError(t, m.store.SetTenantUpstream(ctx, tenant, store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(acmeOpenAI.URL, "/v1"), Key: "sk-acme-openai"}))
	require.NoError(t, m.store.SetTenantUpstream(ctx, "globex", store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(globexOpenAI.URL, "/v1"), Key: "sk-globex-openai"}))
	require.NoError(t, m.store.SetTenantUpstream(ctx, "globex", store.ProviderAnthropic, store.Upstream{URL: globexAnthropic.URL, Key: "sk-globex-anthropic"}))

	type client struct {
		tenant, openaiSays string
		openai             openaiConversation
		messages           *conversation
	}
	clients := []client{
		{tenant: tenant, openaiSays: "acme's openai noted ", openai: openaiAPIs[0].converse(m.api.URL, key, "same"), messages: converse(m.api.URL, key, "same")},
		{tenant: "globex", openaiSays: "globex's openai noted ", openai: openaiAPIs[0].converse(m.api.URL, globexKey, "same"), messages: converse(m.api.URL, globexKey, "same")},
	}
	for _, round := range []string{"first", "second"} {
		for _, c := range clients {
			text := c.tenant + "'s " + round
			got, err := c.openai.round(ctx, text)
			require.NoError(t, err)
			require.Equal(t, c.openaiSays+text, got)
			msg, err := c.messages.round(t, text)
			require.NoError(t, err)
			require.Equal(t, "noted", msg.Content[0].Text)
		}
	}

	// Each upstream got its own tenant's requests, with its own key.
	for _, u := range []struct {
		calls      []scripted.Call
		who, token string
	}{{acmeOpenAI.Calls(), tenant, "Bearer sk-acme-openai"}, {globexOpenAI.Calls(), "globex", "Bearer sk-globex-openai"}} {
		require.Len(t, u.calls, 2)
		for _, call := range u.calls {
			require.Equal(t, u.token, call.Header.Get("Authorization"))
			for _, it := range call.Request.Items {
				require.True(t, strings.HasPrefix(it.Text, u.who+"'s "), "%s's upstream got %q", u.who, it.Text)
			}
		}
	}
	for _, u := range []struct {
		up         *upstream.Upstream
		who, token string
	}{{shared, tenant, upstreamKey}, {globexAnthropic, "globex", "sk-globex-anthropic"}} {
		require.Len(t, u.up.Messages(), 2)
		for _, call := range u.up.Messages() {
			require.Equal(t, u.token, call.Header.Get("X-Api-Key"))
			require.Empty(t, call.Header.Get("Authorization"))
			for _, msg := range call.Request.Messages {
				if msg.Role == "user" {
					require.True(t, strings.HasPrefix(msg.Text(), u.who+"'s "), "%s's upstream got %q", u.who, msg.Text())
				}
			}
		}
	}

	// Each tenant's session holds its own rounds, and only those: the
	// Responses API's conversation is its main thread, the Messages API's
	// another agent's.
	for _, c := range clients {
		require.Equal(t, []string{
			c.tenant + "'s first", c.openaiSays + c.tenant + "'s first", c.tenant + "'s second", c.openaiSays + c.tenant + "'s second",
			c.tenant + "'s first", "noted", c.tenant + "'s second", "noted",
		}, awaitTexts(t, m.store, c.tenant, "same", 8))
	}
	proxyCount(t, m, "new_agent", 2)
	proxyCount(t, m, "managed", 6)
	require.Zero(t, m.metrics.Sum("mnemos.proxy.requests", "outcome", "retry"))
	require.Zero(t, m.metrics.Sum("mnemos.proxy.requests", "outcome", "branched"))

	// initech has no OpenAI upstream, and acme's is not lent to it.
	_, err := openaiAPIs[0].converse(m.api.URL, initechKey, "same").round(ctx, "initech's first by responses")
	apiErr := openaiError(t, err, http.StatusServiceUnavailable)
	require.Equal(t, "no_upstream", apiErr.Code)
	_, err = openaiAPIs[1].converse(m.api.URL, initechKey, "same").round(ctx, "initech's first by chat")
	require.Equal(t, "no_upstream", openaiError(t, err, http.StatusServiceUnavailable).Code)
	msg, err := converse(m.api.URL, initechKey, "same").round(t, "initech's first by messages")
	require.NoError(t, err, "initech's Messages API goes on")
	require.Equal(t, "noted", msg.Content[0].Text)
	got, err := clients[0].openai.round(ctx, "acme's third by responses")
	require.NoError(t, err, "acme's goes on")
	require.Equal(t, "acme's openai noted acme's third by responses", got)
	require.Len(t, globexOpenAI.Calls(), 2)

	// A key Mnemos does not know.
	for _, api := range openaiAPIs {
		_, err = api.converse(m.api.URL, "mnm_nobody", "same").round(ctx, "who am I?")
		apiErr = openaiError(t, err, http.StatusUnauthorized)
		require.Equal(t, "invalid_request_error", apiErr.Type)
	}
	require.Len(t, acmeOpenAI.Calls(), 3)
	require.Len(t, globexOpenAI.Calls(), 2)

	// The Anthropic SDK's view of the same: its shape there.
	bad := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(m.api.URL), option.WithAPIKey("mnm_nobody"), option.WithMaxRetries(0))
	_, err = bad.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 16, Messages: []sdk.MessageParam{userText("who am I?")}})
	var anthropicErr *sdk.Error
	require.ErrorAs(t, err, &anthropicErr)
	require.Equal(t, http.StatusUnauthorized, anthropicErr.StatusCode)
}
