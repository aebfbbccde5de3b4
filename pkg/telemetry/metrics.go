// Package telemetry sets up a process's OpenTelemetry metrics and serves
// them for Prometheus to scrape.
package telemetry

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Metrics is the process's meter provider and its Prometheus endpoint.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	handler  http.Handler
}

// NewMetrics builds a meter provider whose instruments are served by
// Handler, labelled with the service name and the target.
func NewMetrics(target string) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("telemetry.NewMetrics: %w", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName("mnemos"),
		semconv.ServiceInstanceID(target),
	)
	// Durations in seconds get buckets from a millisecond to five minutes (the
	// SDK's default buckets are made for milliseconds).
	seconds := sdkmetric.NewView(
		sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram, Unit: "s"},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: SecondsBuckets}},
	)
	return &Metrics{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res), sdkmetric.WithView(seconds)),
		handler:  promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
	}, nil
}

// SecondsBuckets are the bucket boundaries of every histogram in seconds.
var SecondsBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// MeterProvider is the provider itself, for instrumentation libraries that
// make their own meters (otelhttp).
func (m *Metrics) MeterProvider() metric.MeterProvider { return m.provider }

// Meter returns a meter for one component.
func (m *Metrics) Meter(name string) metric.Meter { return m.provider.Meter(name) }

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Shutdown flushes and stops the provider.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }
