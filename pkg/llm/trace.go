package llm

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the tracer of this package.
const tracerName = "github.com/mnemos-ai/mnemos/pkg/llm"

// Attributes of an LLM span beyond the GenAI semantic conventions.
const (
	attrTask     = attribute.Key("mnemos.llm.task")
	attrTenant   = attribute.Key("mnemos.tenant")
	attrAttempts = attribute.Key("mnemos.llm.attempts")
)

// modelNamer is a provider that can tell which model a request goes to
// (the Anthropic and OpenAI providers can).
type modelNamer interface {
	Model(req Request) string
}

// requestModel is the model req is sent to, when the request or the
// provider says.
func (g *guarded) requestModel(req Request) string {
	if req.Model != "" {
		return req.Model
	}
	if n, ok := g.p.(modelNamer); ok {
		return n.Model(req)
	}
	return ""
}

// startSpan starts the client span of one guarded call, named as the GenAI
// conventions say ("chat <model>"); when the model asked for is unknown,
// the one that answered names it once the call ends.
func (g *guarded) startSpan(ctx context.Context, req Request) (context.Context, trace.Span) {
	name := "chat"
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(g.p.Name()),
		attribute.String("gen_ai.system", g.p.Name()), // the older name of gen_ai.provider.name
		attrTask.String(string(req.Task)),
		attrTenant.String(req.Tenant),
	}
	if model := g.requestModel(req); model != "" {
		name += " " + model
		attrs = append(attrs, semconv.GenAIRequestModel(model))
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(req.MaxTokens)))
	}
	return g.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan records how the call ended: usage (input tokens counting cached
// ones too, as the conventions ask, with the cache reads and writes apart),
// the model that answered, and the error type.
func (g *guarded) endSpan(span trace.Span, req Request, c Call, resp Response) {
	if !span.IsRecording() {
		return
	}
	if resp.Model != "" {
		span.SetAttributes(semconv.GenAIResponseModel(resp.Model))
	}
	if g.requestModel(req) == "" && c.Model != "" {
		span.SetName("chat " + c.Model)
	}
	u := c.Usage
	span.SetAttributes(
		semconv.GenAIUsageInputTokens(int(u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens)),
		semconv.GenAIUsageOutputTokens(int(u.OutputTokens)),
		semconv.GenAIUsageCacheReadInputTokens(int(u.CacheReadTokens)),
		semconv.GenAIUsageCacheCreationInputTokens(int(u.CacheWriteTokens)),
		attrAttempts.Int(c.Attempts),
	)
	if resp.StopReason != "" {
		span.SetAttributes(semconv.GenAIResponseFinishReasons(resp.StopReason))
	}
	if c.Err != nil {
		span.RecordError(c.Err)
		span.SetStatus(codes.Error, c.Err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(c.Err)))
	}
}

// errorType is the error.type of a failed call: its kind, else "_OTHER".
func errorType(err error) string {
	if k := KindOf(err); k != "" {
		return string(k)
	}
	return semconv.ErrorTypeOther.Value.AsString()
}
