// Package telemetrytest reads what a component counted, for tests.
package telemetrytest

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Reader collects the instruments of a meter on demand.
type Reader struct {
	t      testing.TB
	reader *sdkmetric.ManualReader
	meter  metric.Meter
}

// New returns a meter whose measurements the Reader can collect.
func New(t testing.TB) *Reader {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return &Reader{t: t, reader: r, meter: mp.Meter("test")}
}

// Meter is the meter to hand to the component under test.
func (r *Reader) Meter() metric.Meter { return r.meter }

// collect returns the instruments named name, across meters.
func (r *Reader) collect(name string) []metricdata.Metrics {
	r.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		r.t.Fatalf("telemetrytest: collect: %v", err)
	}
	var out []metricdata.Metrics
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				out = append(out, m)
			}
		}
	}
	return out
}

// Sum returns the total of an integer counter over the data points whose
// attributes include key=value (every point when key is empty).
func (r *Reader) Sum(name, key, value string) int64 {
	r.t.Helper()
	if key == "" {
		return r.SumAll(name)
	}
	return r.SumAll(name, key, value)
}

// SumAll returns the total of an integer counter over the data points whose
// attributes include every pair of kv (key, value, key, value, …); every
// point when kv is empty.
func (r *Reader) SumAll(name string, kv ...string) int64 {
	r.t.Helper()
	if len(kv)%2 != 0 {
		r.t.Fatalf("telemetrytest: SumAll(%s): want key, value pairs, got %q", name, kv)
	}
	var total int64
	for _, m := range r.collect(name) {
		sum, ok := m.Data.(metricdata.Sum[int64])
		if !ok {
			r.t.Fatalf("telemetrytest: %s is not an integer sum", name)
		}
		for _, dp := range sum.DataPoints {
			all := true
			for i := 0; i < len(kv); i += 2 {
				all = all && matches(dp.Attributes, kv[i], kv[i+1])
			}
			if all {
				total += dp.Value
			}
		}
	}
	return total
}

// Gauge returns the value of an integer gauge's data point whose attributes
// include key=value (the first point when key is empty), and whether there
// is one.
func (r *Reader) Gauge(name, key, value string) (int64, bool) {
	r.t.Helper()
	for _, m := range r.collect(name) {
		g, ok := m.Data.(metricdata.Gauge[int64])
		if !ok {
			r.t.Fatalf("telemetrytest: %s is not an integer gauge", name)
		}
		for _, dp := range g.DataPoints {
			if key == "" || matches(dp.Attributes, key, value) {
				return dp.Value, true
			}
		}
	}
	return 0, false
}

// Histogram returns the count and sum of a histogram's data points whose
// attributes include key=value (every point when key is empty).
func (r *Reader) Histogram(name, key, value string) (count uint64, sum float64) {
	r.t.Helper()
	for _, m := range r.collect(name) {
		switch h := m.Data.(type) {
		case metricdata.Histogram[float64]:
			for _, dp := range h.DataPoints {
				if key == "" || matches(dp.Attributes, key, value) {
					count += dp.Count
					sum += dp.Sum
				}
			}
		case metricdata.Histogram[int64]:
			for _, dp := range h.DataPoints {
				if key == "" || matches(dp.Attributes, key, value) {
					count += dp.Count
					sum += float64(dp.Sum)
				}
			}
		default:
			r.t.Fatalf("telemetrytest: %s is not a histogram", name)
		}
	}
	return count, sum
}

func matches(set attribute.Set, key, value string) bool {
	v, ok := set.Value(attribute.Key(key))
	return ok && v.AsString() == value
}
