package telemetry

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// untraced are the paths probes and scrapers call every few seconds: no
// spans, no request metrics.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// HTTPHandler wraps a ServeMux so that every request it routes is a server
// span named by its route pattern ("POST /v1/turns"), continuing the W3C
// trace context of the request's headers, and is counted in
// http.server.request.duration by route and status. Health checks and
// metric scrapes are left out.
func HTTPHandler(mux *http.ServeMux, tp trace.TracerProvider, mp metric.MeterProvider) http.Handler {
	// The span starts before the mux routes the request; once it has, the
	// route is known (the mux sets Request.Pattern) and otelhttp renames
	// the span after it. This inner handler adds the route attribute.
	routed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		if route := routeOf(r.Pattern); route != "" {
			trace.SpanFromContext(r.Context()).SetAttributes(semconv.HTTPRoute(route))
		}
	})
	return otelhttp.NewHandler(routed, "http",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithMeterProvider(mp),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithFilter(func(r *http.Request) bool { return !untraced[r.URL.Path] }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			switch {
			case r.Pattern == "":
				return r.Method // not routed (yet)
			case r.Pattern[0] == '/':
				return r.Method + " " + r.Pattern // a pattern for any method
			}
			return r.Pattern
		}),
	)
}

// routeOf is the path part of a ServeMux pattern ("POST /v1/turns" → "/v1/turns").
func routeOf(pattern string) string {
	for i := range len(pattern) {
		if pattern[i] == '/' {
			return pattern[i:]
		}
	}
	return ""
}
