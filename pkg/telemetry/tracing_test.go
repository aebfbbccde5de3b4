package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/mnemos-ai/mnemos/pkg/telemetry"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestReadTraceConfig(t *testing.T) {
	t.Parallel()
	cfg, errs := telemetry.ReadTraceConfig(env(nil), "mnemos-gateway")
	require.Empty(t, errs)
	require.False(t, cfg.Enabled(), "off unless configured")
	require.Equal(t, "off", cfg.String())

	cfg, errs = telemetry.ReadTraceConfig(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318/"}), "mnemos-gateway")
	require.Empty(t, errs)
	require.True(t, cfg.Enabled(), "an endpoint turns it on")
	require.Equal(t, telemetry.ExporterOTLP, cfg.Exporter)
	require.Equal(t, "http://jaeger:4318/v1/traces", cfg.Endpoint, "the signal path added to the base URL")
	require.Equal(t, "mnemos-gateway", cfg.ServiceName)

	cfg, errs = telemetry.ReadTraceConfig(env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":        "http://jaeger:4318",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector:443/custom",
		"OTEL_SERVICE_NAME":                  "mine",
		"OTEL_RESOURCE_ATTRIBUTES":           "service.name=ignored,deployment.environment.name=prod%20eu",
		"OTEL_TRACES_SAMPLER":                "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":            "0.25",
	}), "x")
	require.Empty(t, errs)
	require.Equal(t, "https://collector:443/custom", cfg.Endpoint, "the per-signal endpoint is used as is")
	require.Equal(t, "mine", cfg.ServiceName, "OTEL_SERVICE_NAME wins over the resource attributes")
	require.Equal(t, []attribute.KeyValue{attribute.String("deployment.environment.name", "prod eu")}, cfg.Attributes)
	require.Equal(t, "parentbased_traceidratio(0.25)", cfg.SamplerName)

	cfg, errs = telemetry.ReadTraceConfig(env(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4317"}), "x")
	require.Empty(t, errs)
	require.Equal(t, "http://jaeger:4317", cfg.Endpoint, "gRPC takes the base URL")

	cfg, errs = telemetry.ReadTraceConfig(env(map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}), "x")
	require.Empty(t, errs)
	require.False(t, cfg.Enabled(), "OTEL_SDK_DISABLED wins")

	_, errs = telemetry.ReadTraceConfig(env(map[string]string{
		"OTEL_TRACES_EXPORTER":        "zipkin",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
		"OTEL_TRACES_SAMPLER":         "traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "2",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "jaeger:4318",
		"OTEL_RESOURCE_ATTRIBUTES":    "novalue",
	}), "x")
	require.Len(t, errs, 5, "%q", errs)
}

func TestNewTracingOffStillCarriesContext(t *testing.T) {
	t.Parallel()
	tr, err := telemetry.NewTracing(context.Background(), telemetry.TraceConfig{Exporter: telemetry.ExporterNone})
	require.NoError(t, err)
	_, isNoop := tr.Provider().(noop.TracerProvider)
	require.True(t, isNoop)
	require.NoError(t, tr.Shutdown(context.Background()))

	var out bytes.Buffer
	tr, err = telemetry.NewTracing(context.Background(), telemetry.TraceConfig{Exporter: telemetry.ExporterConsole, ServiceName: "svc", Console: &out})
	require.NoError(t, err)
	_, span := tr.Provider().Tracer("t").Start(context.Background(), "hello")
	span.End()
	require.NoError(t, tr.Shutdown(context.Background()))
	require.Contains(t, out.String(), `"Name":"hello"`)
}

func TestLogHandlerAddsTraceIDs(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	log := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&out, nil))).With("service", "x")
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "op")
	log.InfoContext(ctx, "inside")
	log.Info("outside")
	span.End()

	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	var inside, outside map[string]any
	require.NoError(t, json.Unmarshal(lines[0], &inside))
	require.NoError(t, json.Unmarshal(lines[1], &outside))
	require.Equal(t, span.SpanContext().TraceID().String(), inside["trace_id"])
	require.Equal(t, span.SpanContext().SpanID().String(), inside["span_id"])
	require.Equal(t, "x", inside["service"])
	require.NotContains(t, outside, "trace_id")
}

func TestHTTPHandlerNamesServerSpansByRoute(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	metrics, err := telemetry.NewMetrics("test")
	require.NoError(t, err)
	mux := http.NewServeMux()
	var inHandler trace.SpanContext
	mux.HandleFunc("GET /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		inHandler = trace.SpanContextFromContext(r.Context())
		w.WriteHeader(http.StatusTeapot)
	})
	mux.HandleFunc("GET /healthz", func(http.ResponseWriter, *http.Request) {})
	srv := httptest.NewServer(telemetry.HTTPHandler(mux, tp, metrics.MeterProvider()))
	defer srv.Close()

	// The caller's trace continues in the server span.
	ctx, caller := tp.Tracer("client").Start(context.Background(), "caller")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/sessions/s-1", nil)
	require.NoError(t, err)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	caller.End()
	resp, err = http.Get(srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()

	var server sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		require.NotEqual(t, "GET /healthz", s.Name(), "probes are not traced")
		if s.SpanKind() == trace.SpanKindServer {
			server = s
		}
	}
	require.NotNil(t, server)
	require.Equal(t, "GET /v1/sessions/{id}", server.Name())
	require.Equal(t, caller.SpanContext().SpanID(), server.Parent().SpanID())
	require.Equal(t, server.SpanContext(), inHandler, "the handler runs inside the server span")
	require.Contains(t, server.Attributes(), attribute.String("http.route", "/v1/sessions/{id}"))
	require.Contains(t, server.Attributes(), attribute.Int("http.response.status_code", http.StatusTeapot))

	// And it is counted by route.
	rr := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Regexp(t, `http_server_request_duration_seconds_count\{[^}]*http_route="/v1/sessions/\{id\}"[^}]*\} 1`, rr.Body.String())
}

// receiver is an OTLP/gRPC trace service that keeps the span names it gets.
type receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (r *receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.names = append(r.names, s.GetName())
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func TestNewTracingExportsOverOTLPgRPC(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	rec := &receiver{}
	coltracepb.RegisterTraceServiceServer(srv, rec)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)

	cfg, errs := telemetry.ReadTraceConfig(env(map[string]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + ln.Addr().String(),
	}), "mnemos-test")
	require.Empty(t, errs)
	tr, err := telemetry.NewTracing(context.Background(), cfg)
	require.NoError(t, err)
	_, span := tr.Provider().Tracer("t").Start(context.Background(), "exported over grpc")
	span.End()
	require.NoError(t, tr.Shutdown(context.Background()), "shutdown flushes the batch")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, []string{"exported over grpc"}, rec.names)
}
