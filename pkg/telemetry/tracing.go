package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span exporters of TraceConfig.Exporter.
const (
	ExporterNone    = "none"
	ExporterOTLP    = "otlp"
	ExporterConsole = "console"
)

// OTLP protocols of TraceConfig.Protocol.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// TraceConfig says whether and where a process sends its spans. main reads
// it from the standard OTEL_* variables (ReadTraceConfig); the exporters read
// what it leaves out (OTEL_EXPORTER_OTLP_HEADERS, _CERTIFICATE, _TIMEOUT,
// _COMPRESSION) from the environment themselves.
type TraceConfig struct {
	// Exporter is ExporterOTLP, ExporterConsole or ExporterNone (tracing off).
	Exporter string
	// Protocol is ProtocolHTTPProtobuf or ProtocolGRPC.
	Protocol string
	// Endpoint is the full URL spans are sent to (for http/protobuf, path
	// included); empty means the exporter's default (localhost:4318 or :4317).
	Endpoint string
	// ServiceName is the resource's service.name.
	ServiceName string
	// Attributes are further resource attributes (OTEL_RESOURCE_ATTRIBUTES).
	Attributes []attribute.KeyValue
	// Sampler decides which traces are recorded.
	Sampler sdktrace.Sampler
	// SamplerName is how the sampler was configured, for the log.
	SamplerName string
	// Console receives spans when Exporter is ExporterConsole (os.Stderr when nil).
	Console io.Writer
}

// Enabled reports whether spans are exported.
func (c TraceConfig) Enabled() bool { return c.Exporter != "" && c.Exporter != ExporterNone }

// String describes the configuration in one line, for the start-up log.
func (c TraceConfig) String() string {
	if !c.Enabled() {
		return "off"
	}
	where := c.Endpoint
	if c.Exporter == ExporterOTLP && where == "" {
		where = "(default endpoint)"
	}
	if c.Exporter == ExporterConsole {
		where = "stderr"
	}
	return fmt.Sprintf("%s %s %s service=%s sampler=%s", c.Exporter, c.Protocol, where, c.ServiceName, c.SamplerName)
}

// ReadTraceConfig reads the OpenTelemetry SDK's standard variables through
// getenv. Tracing is off unless OTEL_TRACES_EXPORTER names an exporter or an
// OTLP endpoint is set; OTEL_SDK_DISABLED=true turns it off whatever else is
// set. defaultService is the service.name when neither OTEL_SERVICE_NAME nor
// OTEL_RESOURCE_ATTRIBUTES names one.
//
// Variables: OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (otlp, console, none),
// OTEL_EXPORTER_OTLP_PROTOCOL and OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (grpc,
// http/protobuf), OTEL_EXPORTER_OTLP_ENDPOINT (a base URL: /v1/traces is
// added for http/protobuf) and OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as
// is), OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG.
func ReadTraceConfig(getenv func(string) string, defaultService string) (TraceConfig, []string) {
	var errs []string
	cfg := TraceConfig{Protocol: ProtocolHTTPProtobuf, ServiceName: defaultService}

	// Resource.
	attrs, err := parseResourceAttributes(getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		errs = append(errs, err.Error())
	}
	for _, kv := range attrs {
		if kv.Key == semconv.ServiceNameKey {
			cfg.ServiceName = kv.Value.AsString()
			continue
		}
		cfg.Attributes = append(cfg.Attributes, kv)
	}
	if v := getenv("OTEL_SERVICE_NAME"); v != "" {
		cfg.ServiceName = v
	}

	// Sampler.
	cfg.Sampler, cfg.SamplerName, err = parseSampler(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		errs = append(errs, err.Error())
	}

	// Protocol and endpoint.
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		switch v := getenv(name); v {
		case "":
		case ProtocolGRPC, ProtocolHTTPProtobuf:
			cfg.Protocol = v
		default:
			errs = append(errs, fmt.Sprintf("%s=%q: want grpc or http/protobuf", name, v))
		}
	}
	base, signal := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	for _, e := range [][2]string{{"OTEL_EXPORTER_OTLP_ENDPOINT", base}, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", signal}} {
		name, v := e[0], e[1]
		if u, err := url.Parse(v); v != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			errs = append(errs, fmt.Sprintf("%s=%q: want a URL such as http://collector:4318", name, v))
		}
	}
	switch {
	case signal != "":
		cfg.Endpoint = signal
	case base != "" && cfg.Protocol == ProtocolHTTPProtobuf:
		cfg.Endpoint = strings.TrimSuffix(base, "/") + "/v1/traces"
	case base != "":
		cfg.Endpoint = base
	}

	// Exporter: off unless asked for.
	switch v := getenv("OTEL_TRACES_EXPORTER"); v {
	case "":
		if cfg.Endpoint != "" {
			cfg.Exporter = ExporterOTLP
		}
	case ExporterOTLP, ExporterConsole, ExporterNone:
		cfg.Exporter = v
	default:
		errs = append(errs, fmt.Sprintf("OTEL_TRACES_EXPORTER=%q: want otlp, console or none", v))
	}
	if disabled, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); disabled {
		cfg.Exporter = ExporterNone
	}
	return cfg, errs
}

// parseSampler reads OTEL_TRACES_SAMPLER and its argument; the default is
// parentbased_always_on.
func parseSampler(name, arg string) (sdktrace.Sampler, string, error) {
	if name == "" {
		name = "parentbased_always_on"
	}
	ratio := 1.0
	if arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, name, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio between 0 and 1", arg)
		}
		ratio = r
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), name, nil
	case "always_off":
		return sdktrace.NeverSample(), name, nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), fmt.Sprintf("%s(%g)", name, ratio), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), name, nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), name, nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), fmt.Sprintf("%s(%g)", name, ratio), nil
	}
	return nil, name, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", name)
}

// parseResourceAttributes reads "key1=value1,key2=value2", values
// percent-encoded as the specification says.
func parseResourceAttributes(s string) ([]attribute.KeyValue, error) {
	var out []attribute.KeyValue
	for pair := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %q is not key=value", pair)
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %q: %w", pair, err)
		}
		out = append(out, attribute.String(k, value))
	}
	return out, nil
}

// Tracing is a process's tracer provider.
type Tracing struct {
	provider trace.TracerProvider
	shutdown func(context.Context) error
}

// NewTracing builds the tracer provider cfg describes. Tracing off gives a
// provider that records nothing but still carries incoming trace context
// along, so a trace started upstream continues downstream.
func NewTracing(ctx context.Context, cfg TraceConfig) (*Tracing, error) {
	if !cfg.Enabled() {
		return &Tracing{provider: noop.NewTracerProvider(), shutdown: func(context.Context) error { return nil }}, nil
	}
	exp, err := newSpanExporter(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("telemetry.NewTracing: %w", err)
	}
	tp := NewTracerProvider(cfg, sdktrace.WithBatcher(exp))
	return &Tracing{provider: tp, shutdown: tp.Shutdown}, nil
}

// NewTracerProvider builds an SDK tracer provider with cfg's resource and
// sampler and the given span processors (tests pass an in-memory one).
func NewTracerProvider(cfg TraceConfig, opts ...sdktrace.TracerProviderOption) *sdktrace.TracerProvider {
	sampler := cfg.Sampler
	if sampler == nil {
		sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	attrs := append([]attribute.KeyValue{semconv.ServiceName(cfg.ServiceName)}, cfg.Attributes...)
	if host, err := os.Hostname(); err == nil {
		attrs = append(attrs, semconv.ServiceInstanceID(host))
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, attrs...)
	return sdktrace.NewTracerProvider(append([]sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	}, opts...)...)
}

func newSpanExporter(ctx context.Context, cfg TraceConfig) (sdktrace.SpanExporter, error) {
	switch {
	case cfg.Exporter == ExporterConsole:
		w := cfg.Console
		if w == nil {
			w = os.Stderr
		}
		return stdouttrace.New(stdouttrace.WithWriter(w))
	case cfg.Exporter != ExporterOTLP:
		return nil, fmt.Errorf("unknown span exporter %q", cfg.Exporter)
	case cfg.Protocol == ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		return otlptracegrpc.New(ctx, opts...)
	case cfg.Protocol == ProtocolHTTPProtobuf:
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
		}
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, errors.New("unknown OTLP protocol " + cfg.Protocol)
}

// Provider is the tracer provider to pass to the components.
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Shutdown exports the spans still buffered and stops the provider.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.shutdown(ctx) }
