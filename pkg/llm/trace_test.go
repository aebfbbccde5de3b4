package llm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

type refuse struct{}

func (refuse) Allow(context.Context, string) error { return llm.ErrBudgetExhausted }

// attrs maps a span's attributes by key.
func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestGuardTracesEveryCall calls the real Anthropic client against a local
// server through the guard and reads the spans: the GenAI conventions'
// attributes, usage with cache reads and writes, retries as events, and the
// error type of failures.
func TestGuardTracesEveryCall(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	usage := llm.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 900, CacheWriteTokens: 50}
	calls := 0
	srv := llmtest.NewAnthropicServer(t, func(r llmtest.Request) llmtest.Reply {
		calls++
		switch {
		case r.System == "refuse":
			return llmtest.BadRequest()
		case calls == 1:
			return llmtest.RateLimited()
		}
		return llmtest.Reply{Text: "summary", Usage: usage, Model: "claude-test-20261101"}
	})
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-test", BaseURL: srv.URL, Model: "claude-test"})
	require.NoError(t, err)
	var s sleeps
	g := llm.Guard(p, llm.GuardOptions{TracerProvider: tp, Sleep: s.sleep})

	ctx, parent := tp.Tracer("test").Start(context.Background(), "compaction")
	request := llm.Request{Tenant: "acme", Task: llm.TaskCompaction, System: "summarize", MaxTokens: 1000,
		Messages: []llm.Message{{Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: "hello"}}}}}
	_, err = g.Complete(ctx, request)
	require.NoError(t, err)
	request.System = "refuse"
	_, err = g.Complete(ctx, request)
	require.Equal(t, llm.KindRequest, llm.KindOf(err))
	parent.End()

	spans := rec.Ended()
	require.Len(t, spans, 3)
	okSpan, failed := spans[0], spans[1]
	require.Equal(t, "chat claude-test", okSpan.Name(), "named by the model the task uses")
	require.Equal(t, trace.SpanKindClient, okSpan.SpanKind())
	require.Equal(t, parent.SpanContext().SpanID(), okSpan.Parent().SpanID())
	a := attrs(okSpan)
	require.Equal(t, "chat", a["gen_ai.operation.name"].AsString())
	require.Equal(t, "anthropic", a["gen_ai.provider.name"].AsString())
	require.Equal(t, "anthropic", a["gen_ai.system"].AsString())
	require.Equal(t, "claude-test", a["gen_ai.request.model"].AsString())
	require.Equal(t, "claude-test-20261101", a["gen_ai.response.model"].AsString())
	require.Equal(t, int64(1000), a["gen_ai.request.max_tokens"].AsInt64())
	require.Equal(t, int64(100+900+50), a["gen_ai.usage.input_tokens"].AsInt64(), "input counts cached tokens too")
	require.Equal(t, int64(20), a["gen_ai.usage.output_tokens"].AsInt64())
	require.Equal(t, int64(900), a["gen_ai.usage.cache_read.input_tokens"].AsInt64())
	require.Equal(t, int64(50), a["gen_ai.usage.cache_creation.input_tokens"].AsInt64())
	require.Equal(t, "compaction", a["mnemos.llm.task"].AsString())
	require.Equal(t, int64(2), a["mnemos.llm.attempts"].AsInt64())
	require.Equal(t, codes.Unset, okSpan.Status().Code)
	require.Len(t, okSpan.Events(), 1, "the rate-limited attempt")
	require.Contains(t, okSpan.Events()[0].Attributes, attribute.String("error.type", "rate_limited"))

	require.Equal(t, codes.Error, failed.Status().Code)
	require.Equal(t, "bad_request", attrs(failed)["error.type"].AsString())

	// A refusal of the budget is traced too, and the provider is not called.
	before := calls
	budgeted := llm.Guard(p, llm.GuardOptions{TracerProvider: tp, Budget: refuse{}})
	_, err = budgeted.Complete(context.Background(), request)
	require.True(t, errors.Is(err, llm.ErrBudgetExhausted))
	require.Equal(t, before, calls)
	last := rec.Ended()[len(rec.Ended())-1]
	require.Equal(t, "budget_exhausted", attrs(last)["error.type"].AsString())
	require.Equal(t, codes.Error, last.Status().Code)
}
