package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConfigOfTracingReplicasAndGauges(t *testing.T) {
	t.Parallel()
	cfg, err := configFromEnv("all", env(nil))
	require.NoError(t, err)
	require.False(t, cfg.Trace.Enabled(), "no tracing unless configured")
	require.Equal(t, "mnemos", cfg.Trace.ServiceName)
	require.Equal(t, 1, cfg.StreamReplicas)
	require.Equal(t, 15*time.Second, cfg.GaugeInterval)
	require.Contains(t, cfg.LogValue().String(), "tracing=off")

	cfg, err = configFromEnv("extractor", env(map[string]string{
		"MNEMOS_NATS_URL":             "nats://nats:4222",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
		"MNEMOS_STREAM_REPLICAS":      "3",
		"MNEMOS_GAUGE_INTERVAL":       "1m",
	}))
	require.NoError(t, err)
	require.True(t, cfg.Trace.Enabled())
	require.Equal(t, "http://collector:4318/v1/traces", cfg.Trace.Endpoint)
	require.Equal(t, "mnemos-extractor", cfg.Trace.ServiceName)
	require.Equal(t, 3, cfg.StreamReplicas)
	require.Equal(t, time.Minute, cfg.GaugeInterval)

	_, err = configFromEnv("all", env(map[string]string{
		"MNEMOS_STREAM_REPLICAS": "7",
		"MNEMOS_GAUGE_INTERVAL":  "often",
		"OTEL_TRACES_SAMPLER":    "sometimes",
	}))
	require.ErrorContains(t, err, "MNEMOS_STREAM_REPLICAS")
	require.ErrorContains(t, err, "MNEMOS_GAUGE_INTERVAL")
	require.ErrorContains(t, err, "OTEL_TRACES_SAMPLER")
}
