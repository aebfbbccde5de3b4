package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
)

// client is the official SDK pointed at up, without retries.
func client(up *upstream.Upstream) *sdk.Client {
	c := sdk.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(up.URL),
		option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(0))
	return &c
}

// params is a call with a long system prompt marked for the cache and a
// question after it.
func params(question string) sdk.MessageNewParams {
	rules := strings.Repeat("Answer briefly, name the file you read, and say when you are unsure. ", 120)
	return sdk.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 512,
		System:    []sdk.TextBlockParam{{Text: rules, CacheControl: sdk.NewCacheControlEphemeralParam()}},
		Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(question))},
	}
}

func TestSDKNonStreamingReadsTheCachedPrefix(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens,
		Script: func(r *upstream.Request) (upstream.Reply, error) {
			return upstream.Final("You asked: " + r.Last().Text()), nil
		}})
	c := client(up)
	ctx := context.Background()

	first, err := c.Messages.New(ctx, params("What time is it?"))
	require.NoError(t, err)
	require.Equal(t, "You asked: What time is it?", first.Content[0].Text)
	require.Equal(t, sdk.StopReasonEndTurn, first.StopReason)
	require.Zero(t, first.Usage.CacheReadInputTokens, "nothing was cached before")
	require.Greater(t, first.Usage.CacheCreationInputTokens, int64(upstream.SonnetMinCacheTokens), "the system prompt is written")

	second, err := c.Messages.New(ctx, params("What time is it?"))
	require.NoError(t, err)
	require.Equal(t, first.Usage.CacheCreationInputTokens, second.Usage.CacheReadInputTokens, "the same prefix is read back")
	require.Zero(t, second.Usage.CacheCreationInputTokens)
	require.Equal(t, first.Usage.InputTokens, second.Usage.InputTokens, "the question after the breakpoint is plain input")

	calls := up.Messages()
	require.Len(t, calls, 2)
	require.Equal(t, second.Usage.CacheReadInputTokens, calls[1].Usage.CacheReadInputTokens, "the record holds what was answered")
	require.True(t, calls[0].Request.SystemCacheControl())
	require.Equal(t, "sk-ant-test", calls[0].Header.Get("X-Api-Key"))
	total := up.Usage()
	require.InDelta(t, float64(second.Usage.CacheReadInputTokens)/float64(total.InputSide()), upstream.ReadShare(total), 1e-9)
}

func TestSDKStreamingTextAndToolUse(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{MinCacheTokens: upstream.SonnetMinCacheTokens,
		Script: func(*upstream.Request) (upstream.Reply, error) {
			return upstream.Say(
				upstream.Thinking("Only sent when thinking is on."),
				upstream.Text("Let me read it."),
				upstream.ToolUse("Read", map[string]any{"file_path": "/work/notes.md", "limit": 40}),
			), nil
		}})
	c := client(up)
	ctx := context.Background()

	var usages []sdk.Usage
	for range 2 {
		stream := c.Messages.NewStreaming(ctx, params("Read my notes."))
		var msg sdk.Message
		var events []string
		for stream.Next() {
			ev := stream.Current()
			events = append(events, ev.Type)
			require.NoError(t, msg.Accumulate(ev))
		}
		require.NoError(t, stream.Err())
		require.NoError(t, stream.Close())
		require.Equal(t, []string{"message_start", // the SDK drops the ping
			"content_block_start", "content_block_delta", "content_block_stop",
			"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
			"message_delta", "message_stop"}, events, "thinking is left out of a call without it")
		require.Len(t, msg.Content, 2)
		require.Equal(t, "Let me read it.", msg.Content[0].Text)
		require.Equal(t, "Read", msg.Content[1].Name)
		require.True(t, strings.HasPrefix(msg.Content[1].ID, "toolu_01"))
		var input map[string]any
		require.NoError(t, json.Unmarshal(msg.Content[1].Input, &input))
		require.Equal(t, map[string]any{"file_path": "/work/notes.md", "limit": float64(40)}, input)
		require.Equal(t, sdk.StopReasonToolUse, msg.StopReason)
		usages = append(usages, msg.Usage)
	}
	require.Zero(t, usages[0].CacheReadInputTokens)
	require.Positive(t, usages[0].CacheCreationInputTokens)
	require.Equal(t, usages[0].CacheCreationInputTokens, usages[1].CacheReadInputTokens, "the second stream reads the first one's prefix")
	require.Zero(t, usages[1].CacheCreationInputTokens)
	require.Positive(t, usages[1].OutputTokens)

	calls := up.Messages()
	require.Len(t, calls, 2)
	require.True(t, calls[0].Request.Stream)
	require.Equal(t, usages[1].OutputTokens, calls[1].Usage.OutputTokens)
}

func TestSDKThinkingIsStreamedWhenAskedFor(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Say(upstream.Thinking("The notes are short."), upstream.Text("They are short.")), nil
	}})
	p := params("Are my notes long?")
	p.MaxTokens = 4096
	p.Thinking = sdk.ThinkingConfigParamOfEnabled(1024)
	stream := client(up).Messages.NewStreaming(context.Background(), p)
	var msg sdk.Message
	for stream.Next() {
		require.NoError(t, msg.Accumulate(stream.Current()))
	}
	require.NoError(t, stream.Err())
	require.Len(t, msg.Content, 2)
	require.Equal(t, "thinking", msg.Content[0].Type)
	require.Equal(t, "The notes are short.", msg.Content[0].Thinking)
	require.NotEmpty(t, msg.Content[0].Signature)
}

func TestSDKScriptedFailures(t *testing.T) {
	t.Parallel()
	replies := []upstream.Reply{upstream.RateLimited(2 * time.Second), upstream.Overloaded(time.Second), upstream.ServerError()}
	n := 0
	up := upstream.Start(t, upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) {
		r := replies[n%len(replies)]
		n++
		return r, nil
	}})
	c := client(up)
	for _, want := range []struct {
		status     int
		typ, retry string
	}{{http.StatusTooManyRequests, "rate_limit_error", "2"}, {529, "overloaded_error", "1"}, {http.StatusInternalServerError, "api_error", ""}} {
		_, err := c.Messages.New(context.Background(), params("Hello?"))
		var apiErr *sdk.Error
		require.ErrorAs(t, err, &apiErr)
		require.Equal(t, want.status, apiErr.StatusCode)
		require.Equal(t, want.retry, apiErr.Response.Header.Get("Retry-After"))
		require.Contains(t, apiErr.RawJSON(), `"type":"`+want.typ+`"`)
	}
	for _, c := range up.Messages() {
		require.Zero(t, c.Usage, "a refused call uses nothing")
	}
}

func TestPromptTooLongAndCountTokens(t *testing.T) {
	t.Parallel()
	scripted := 0
	up := upstream.Start(t, upstream.Config{ContextWindow: 2000, Script: func(*upstream.Request) (upstream.Reply, error) {
		scripted++
		return upstream.Final("ok"), nil
	}})
	c := client(up)
	ctx := context.Background()
	p := params("How long is this?")
	count, err := c.Messages.CountTokens(ctx, sdk.MessageCountTokensParams{
		Model: p.Model, Messages: p.Messages,
		System: sdk.MessageCountTokensParamsSystemUnion{OfTextBlockArray: p.System},
	})
	require.NoError(t, err)
	require.Greater(t, count.InputTokens, int64(2000))

	_, err = c.Messages.New(ctx, p)
	var apiErr *sdk.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Contains(t, apiErr.RawJSON(), "invalid_request_error")
	require.Contains(t, apiErr.RawJSON(), fmt.Sprintf("prompt is too long: %d tokens > 2000 maximum", count.InputTokens))
	require.Zero(t, scripted, "a refused prompt never reaches the model")

	p.System = nil
	_, err = c.Messages.New(ctx, p)
	require.NoError(t, err, "a short prompt fits")
	calls := up.Calls()
	require.Len(t, calls, 3)
	require.Equal(t, "/v1/messages/count_tokens", calls[0].Path)
	require.Equal(t, []int{200, 400, 200}, []int{calls[0].Status, calls[1].Status, calls[2].Status})
}

func TestScriptErrorIsRecorded(t *testing.T) {
	t.Parallel()
	up := upstream.Start(t, upstream.Config{Script: func(*upstream.Request) (upstream.Reply, error) {
		return upstream.Reply{}, errors.New("the script has no answer")
	}})
	_, err := client(up).Messages.New(context.Background(), params("Anything?"))
	var apiErr *sdk.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusInternalServerError, apiErr.StatusCode)
	calls := up.Calls()
	require.Len(t, calls, 1)
	require.EqualError(t, calls[0].Err, "the script has no answer")
}
