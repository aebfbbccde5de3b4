package embed

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// Purposes of embedding calls, the values of their metrics' purpose.
const (
	// PurposeIndex: vectors of stored messages and memories (the embedder).
	PurposeIndex = "index"
	// PurposeQuery: the vector of a search's query.
	PurposeQuery = "query"
)

// Metered wraps e so that every call is counted: mnemos.embed.requests by
// purpose and outcome (ok or the error kind), mnemos.embed.texts by
// purpose, mnemos.embed.duration by purpose and outcome.
func Metered(e Embedder, meter metric.Meter, purpose string) (Embedder, error) {
	meter = defaults.Meter(meter)
	m := &metered{Embedder: e, purpose: attribute.String("purpose", purpose)}
	var err error
	if m.requests, err = meter.Int64Counter("mnemos.embed.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Embedding calls (each of one or more requests to the endpoint), by purpose (index or query) and outcome (ok or the error kind).")); err != nil {
		return nil, err
	}
	if m.texts, err = meter.Int64Counter("mnemos.embed.texts", metric.WithUnit("{text}"),
		metric.WithDescription("Texts sent to be embedded, by purpose (index or query).")); err != nil {
		return nil, err
	}
	if m.duration, err = meter.Float64Histogram("mnemos.embed.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of embedding calls, by purpose and outcome.")); err != nil {
		return nil, err
	}
	return m, nil
}

type metered struct {
	Embedder
	purpose  attribute.KeyValue
	requests metric.Int64Counter
	texts    metric.Int64Counter
	duration metric.Float64Histogram
}

func (m *metered) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	start := time.Now()
	vs, err := m.Embedder.Embed(ctx, texts)
	outcome := "ok"
	if err != nil {
		outcome = string(llm.KindOf(err))
		if outcome == "" {
			outcome = "error"
		}
	}
	attrs := metric.WithAttributes(m.purpose, attribute.String("outcome", outcome))
	m.requests.Add(ctx, 1, attrs)
	m.texts.Add(ctx, int64(len(texts)), metric.WithAttributes(m.purpose))
	m.duration.Record(ctx, time.Since(start).Seconds(), attrs)
	return vs, err
}
