package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api"
	scripted "github.com/mnemos-ai/mnemos/internal/testkit/llmtest/responses"
	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// sentRound is a round as the ledger is to price it: the upstream's usage
// and body, and the client's body.
type sentRound struct {
	usage        llm.Usage
	sent, client []byte
}

// expectedCost prices rounds of one thread as the ledger is to: each
// round's usage at the model's list price, and its straight run as
// llmledger.StraightUsage reckons it from the bodies, each round after the
// first continuing the thread within the cache's lifetime. It answers the
// sums through and straight, in nano-dollars.
func expectedCost(t *testing.T, model string, caches bool, rounds []sentRound) (through, straight int64) {
	t.Helper()
	price, ok := llm.DefaultPrices().Lookup(model)
	require.True(t, ok, "the list prices know %s", model)
	var prev store.StraightPrefix
	at := time.Now()
	for i, r := range rounds {
		round := llmledger.Round{
			Usage: r.usage, Changed: !bytes.Equal(r.sent, r.client), SentBytes: int64(len(r.sent)), ClientBytes: int64(len(r.client)),
			Continues: i > 0, Caches: caches, At: at,
		}
		s := llmledger.StraightUsage(round, prev)
		prev = store.StraightPrefix{Tokens: s.InputTokens + s.CacheReadTokens + s.CacheWriteTokens, At: at}
		through += int64(price.Cost(r.usage))
		straight += int64(price.Cost(s))
	}
	return through, straight
}

// sessionUsage waits until GET /v1/sessions/{id}/usage has priced rounds.
func sessionUsage(t *testing.T, m *mnemos, apiKey, session string, rounds int64) api.SessionUsage {
	t.Helper()
	return awaitJSON(t, m.api.URL+"/v1/sessions/"+session+"/usage", apiKey, func(u api.SessionUsage) bool { return u.Rounds >= rounds })
}

// proxyTask is the proxy task's row of GET /v1/usage.
func proxyTask(t *testing.T, m *mnemos, apiKey string) api.UsageRow {
	t.Helper()
	var u api.TenantUsage
	getJSON(t, m.api.URL+"/v1/usage", apiKey, &u)
	for _, r := range u.Tasks {
		if r.Task == store.TaskProxy {
			require.NotNil(t, r.Proxy)
			return r
		}
	}
	t.Fatalf("GET /v1/usage has no proxy task: %+v", u.Tasks)
	return api.UsageRow{}
}

// overBudget spends acme's daily budget of money (a budget of one
// nano-dollar, below what its rounds cost) and waits until the usage
// route, which reads the settings the proxy reads, says it is spent.
func overBudget(t *testing.T, m *mnemos) {
	t.Helper()
	require.NoError(t, m.store.SetTenantSettings(context.Background(), tenant, []byte(`{"llm": {"daily_budget_usd": 0.000000001}}`)))
	awaitJSON(t, m.api.URL+"/v1/usage", key, func(u api.TenantUsage) bool { return u.Budget.Exhausted })
}

// addGlobex adds a second tenant to Mnemos, with its own key.
func addGlobex(t *testing.T, m *mnemos) string {
	t.Helper()
	const globexKey = "mnm_proxy_test_globex"
	require.NoError(t, m.store.EnsureTenant(context.Background(), "globex", "Globex"))
	require.NoError(t, m.store.AddAPIKey(context.Background(), "globex", "test", globexKey))
	return globexKey
}

// TestTheMessagesDoorsRoundsArePricedThroughAndStraight: an agent on the
// official Anthropic SDK reads a large file through the proxy, which
// offloads it, so that its later requests go up smaller than the client
// sent them. Every round is priced at the list price from the upstream's
// usage, beside its straight run as the ledger reckons it from the two
// bodies, and the session's figure, the usage route's proxy task and the
// metric agree; the session saved money. Then acme's money budget is
// spent: its agent's next round is refused with the Messages API's
// billing_error, not retried by the SDK and never sent up, while globex's
// rounds go on.
func TestTheMessagesDoorsRoundsArePricedThroughAndStraight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	up := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens, Script: func(r *upstream.Request) (upstream.Reply, error) {
		if strings.Contains(r.Last().Text(), "read it") {
			return upstream.Say(upstream.ToolUse("Read", map[string]string{"path": "ledger.go"})), nil
		}
		return upstream.Final("Done."), nil
	}})
	m := startMnemos(t, up.URL, key)
	sent := &sentBodies{}
	client := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(m.api.URL), option.WithAPIKey(key),
		option.WithMaxRetries(0), option.WithHeader("X-Mnemos-Session", "priced"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			if err := sent.keep(r); err != nil {
				return nil, err
			}
			return next(r)
		}))
	system := []sdk.TextBlockParam{{Text: agentSystem(), CacheControl: sdk.NewCacheControlEphemeralParam()}}
	var msgs []sdk.MessageParam
	// The breakpoint on the last block of the last message only, as agents
	// place it.
	ask := func(block sdk.ContentBlockParamUnion) *sdk.Message {
		t.Helper()
		for i := range msgs {
			for j := range msgs[i].Content {
				if b := msgs[i].Content[j].OfText; b != nil {
					b.CacheControl = sdk.CacheControlEphemeralParam{}
				}
				if b := msgs[i].Content[j].OfToolResult; b != nil {
					b.CacheControl = sdk.CacheControlEphemeralParam{}
				}
			}
		}
		msgs = append(msgs, sdk.NewUserMessage(block))
		answer, err := client.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 1024, System: system, Messages: msgs})
		require.NoError(t, err)
		msgs = append(msgs, answer.ToParam())
		return answer
	}
	text := func(s string) sdk.ContentBlockParamUnion {
		return sdk.ContentBlockParamUnion{OfText: &sdk.TextBlockParam{Text: s, CacheControl: sdk.NewCacheControlEphemeralParam()}}
	}
	call := ask(text("Open ledger.go and read it whole."))
	require.Equal(t, "tool_use", string(call.StopReason))
	var file strings.Builder
	for i := 0; file.Len() < 80_000; i++ {
		fmt.Fprintf(&file, "%05d\tfunc price%d(u Usage) USD { return rate%d * USD(u.Input+%d) }\n", i, i, i%13, i)
	}
	result := sdk.NewToolResultBlock(call.Content[0].ID, file.String(), false)
	result.OfToolResult.CacheControl = sdk.NewCacheControlEphemeralParam()
	ask(result)
	// The file is offloaded when its round is applied: the next requests
	// go up with its preview in its place.
	waitApplied(t, m.store, "priced", 2)
	ask(text("What does price7 add?"))
	ask(text("And price8?"))

	calls, clientBodies := up.Messages(), sent.all()
	require.Len(t, calls, 4)
	require.Len(t, clientBodies, 4)
	rounds := make([]sentRound, len(calls))
	for i, c := range calls {
		rounds[i] = sentRound{sent: c.Body, client: clientBodies[i], usage: llm.Usage{
			InputTokens: c.Usage.InputTokens, CacheReadTokens: c.Usage.CacheReadInputTokens,
			CacheWriteTokens: c.Usage.CacheCreationInputTokens, OutputTokens: c.Usage.OutputTokens,
		}}
	}
	require.Less(t, len(calls[3].Body), len(clientBodies[3])-60_000, "the file went up as its preview")
	through, straight := expectedCost(t, model, true, rounds)

	proxyCount(t, m, "managed", 3)
	u := sessionUsage(t, m, key, "priced", 4)
	require.Equal(t, int64(4), u.Rounds)
	require.Equal(t, through, u.CostNanoUSD, "through: the upstream's usage at the list price")
	require.Equal(t, straight, u.StraightCostNanoUSD, "straight: the client's bodies, as the ledger reckons them")
	require.Equal(t, straight-through, u.SavingsNanoUSD)
	require.Equal(t, llm.USD(u.SavingsNanoUSD).String(), u.SavingsUSD)
	require.Positive(t, u.SavingsNanoUSD, "offloading the file saved more than it cost")
	t.Logf("session priced: through $%s, straight $%s, saved $%s", u.CostUSD, u.StraightCostUSD, u.SavingsUSD)

	row := proxyTask(t, m, key)
	require.Equal(t, int64(4), row.Calls)
	require.Equal(t, api.ProxyAmounts{Rounds: 4, CostUSD: u.CostUSD, CostNanoUSD: through, StraightCostUSD: u.StraightCostUSD,
		StraightCostNanoUSD: straight, SavingsUSD: u.SavingsUSD, SavingsNanoUSD: straight - through}, row.Proxy.ProxyAmounts)
	require.Equal(t, through, m.metrics.SumAll("mnemos.proxy.cost", "door", "messages", "kind", "through"))
	require.Equal(t, straight, m.metrics.SumAll("mnemos.proxy.cost", "door", "messages", "kind", "straight"))

	// acme's budget spent: the next round is refused before it goes up,
	// with the Messages API's error, once, though the SDK may retry.
	overBudget(t, m)
	retrying := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(m.api.URL), option.WithAPIKey(key),
		option.WithMaxRetries(2), option.WithHeader("X-Mnemos-Session", "priced"))
	msgs = append(msgs, userText("And price9?"))
	_, err := retrying.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 1024, System: system, Messages: msgs})
	var apiErr *sdk.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusPaymentRequired, apiErr.StatusCode)
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(apiErr.RawJSON()), &body))
	require.Equal(t, "error", body.Type)
	require.Equal(t, "billing_error", body.Error.Type)
	require.Contains(t, body.Error.Message, "(llm.daily_budget_usd): budget exhausted")
	proxyCount(t, m, "over_budget", 1)
	require.Len(t, up.Messages(), 4, "the refused round never went up")

	// globex's agent is not acme's budget.
	globex := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(m.api.URL), option.WithAPIKey(addGlobex(t, m)),
		option.WithMaxRetries(0), option.WithHeader("X-Mnemos-Session", "priced"))
	got, err := globex.Messages.New(ctx, sdk.MessageNewParams{Model: model, MaxTokens: 1024, System: system, Messages: []sdk.MessageParam{userText("Hello.")}})
	require.NoError(t, err)
	require.Equal(t, "Done.", got.Content[0].Text)
	require.Len(t, up.Messages(), 5)
	proxyCount(t, m, "over_budget", 1)
}

// TestTheResponsesDoorsRoundsArePricedThroughAndStraight: an agent on the
// official OpenAI SDK runs three rounds of the Responses API, which the
// scripted upstream caches as OpenAI does. Each round is priced at the
// list price from the upstream's usage (its cached tokens read at the
// cache price), beside its straight run; then acme's money budget is spent
// and its next round is refused with OpenAI's insufficient_quota, not
// retried by the SDK, and so is a round by Chat Completions, while
// globex's rounds go on.
func TestTheResponsesDoorsRoundsArePricedThroughAndStraight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const gpt = "gpt-5"
	up := scripted.Start(t, scripted.Config{Script: func(*scripted.Request) (scripted.Reply, error) {
		return scripted.Say(scripted.Text("Done.")), nil
	}})
	m := startMnemos(t, "http://127.0.0.1:1", key)
	require.NoError(t, m.store.SetTenantUpstream(ctx, tenant, store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(up.URL, "/v1"), Key: "sk-acme-openai"}))
	sent := &sentBodies{}
	client := openai.NewClient(oaioption.WithBaseURL(m.api.URL+"/v1"), oaioption.WithAPIKey(key), oaioption.WithMaxRetries(0),
		oaioption.WithHeader("X-Mnemos-Session", "priced-openai"), oaioption.WithMiddleware(sent.middleware))
	instructions := openai.String(agentSystem())
	var input responses.ResponseInputParam
	round := func(c openai.Client, text string) (*responses.Response, error) {
		input = append(input, responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser))
		got, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: gpt, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input},
			Instructions: instructions, Store: openai.Bool(false)})
		if err == nil {
			input = append(input, responses.ResponseInputItemParamOfMessage(got.OutputText(), responses.EasyInputMessageRoleAssistant))
		}
		return got, err
	}
	for i, ask := range []string{"Which file prices a round?", "And which budgets it?", "Thanks; anything else?"} {
		_, err := round(client, ask)
		require.NoError(t, err)
		waitApplied(t, m.store, "priced-openai", int64(i+1))
	}

	calls, clientBodies := up.Calls(), sent.all()
	require.Len(t, calls, 3)
	require.Len(t, clientBodies, 3)
	rounds := make([]sentRound, len(calls))
	for i, c := range calls {
		rounds[i] = sentRound{sent: c.Body, client: clientBodies[i], usage: llm.Usage{
			InputTokens: c.Usage.Input - c.Usage.Cached, CacheReadTokens: c.Usage.Cached, OutputTokens: c.Usage.Output,
		}}
	}
	require.Positive(t, rounds[2].usage.CacheReadTokens, "the upstream read the instructions from its cache")
	through, straight := expectedCost(t, gpt, true, rounds)

	u := sessionUsage(t, m, key, "priced-openai", 3)
	require.Equal(t, through, u.CostNanoUSD, "through: the upstream's usage at the list price")
	require.Equal(t, straight, u.StraightCostNanoUSD)
	require.Equal(t, straight-through, u.SavingsNanoUSD)
	require.Equal(t, []api.ThreadUsage{{Thread: "priced-openai", ProxyAmounts: u.ProxyAmounts, LastRoundAt: u.LastRoundAt}}, u.Threads)
	row := proxyTask(t, m, key)
	require.Equal(t, through, row.Proxy.CostNanoUSD)
	require.Equal(t, straight, row.Proxy.StraightCostNanoUSD)
	require.Equal(t, through, m.metrics.SumAll("mnemos.proxy.cost", "door", "responses", "kind", "through"))

	overBudget(t, m)
	retrying := openai.NewClient(oaioption.WithBaseURL(m.api.URL+"/v1"), oaioption.WithAPIKey(key), oaioption.WithMaxRetries(2),
		oaioption.WithHeader("X-Mnemos-Session", "priced-openai"))
	_, err := round(retrying, "One more?")
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusTooManyRequests, apiErr.StatusCode)
	require.Equal(t, "insufficient_quota", apiErr.Code)
	require.Equal(t, "insufficient_quota", apiErr.Type)
	require.Contains(t, apiErr.Message, "(llm.daily_budget_usd): budget exhausted")
	proxyCount(t, m, "over_budget", 1)
	// Chat Completions, the other OpenAI door, refuses alike.
	_, err = openaiAPIs[1].converse(m.api.URL, key, "priced-chat").round(ctx, "One more, by chat?")
	chatErr := openaiError(t, err, http.StatusTooManyRequests)
	require.Equal(t, "insufficient_quota", chatErr.Code)
	require.Equal(t, "insufficient_quota", chatErr.Type)
	proxyCount(t, m, "over_budget", 2)
	require.Len(t, up.Calls(), 3, "the refused rounds never went up")

	globexKey := addGlobex(t, m)
	require.NoError(t, m.store.SetTenantUpstream(ctx, "globex", store.ProviderOpenAI, store.Upstream{URL: strings.TrimSuffix(up.URL, "/v1"), Key: "sk-globex-openai"}))
	globex := openai.NewClient(oaioption.WithBaseURL(m.api.URL+"/v1"), oaioption.WithAPIKey(globexKey), oaioption.WithMaxRetries(0),
		oaioption.WithHeader("X-Mnemos-Session", "priced-openai"))
	input = nil
	got, err := round(globex, "Hello.")
	require.NoError(t, err)
	require.Equal(t, "Done.", got.OutputText())
	require.Len(t, up.Calls(), 4)
}
