package main

import (
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/llm/openai"
	"github.com/mnemos-ai/mnemos/pkg/telemetry"
)

// TestConfigTableDefaults: with nothing set, the table gives the defaults
// the configuration has always had.
func TestConfigTableDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := configFromEnv(TargetAll, env(nil))
	require.NoError(t, err)
	require.Equal(t, ":8080", cfg.HTTPAddr)
	require.Equal(t, "127.0.0.1:9464", cfg.AdminAddr)
	require.Empty(t, cfg.DatabaseURL)
	require.Empty(t, cfg.MigrateDatabaseURL)
	require.EqualValues(t, 20, cfg.DatabaseMaxConns)
	require.True(t, cfg.Migrate)
	require.Empty(t, cfg.NATSURL)
	require.Equal(t, ".mnemos/nats", cfg.NATSStoreDir)
	require.Empty(t, cfg.NATSListen)
	require.Empty(t, cfg.Namespace)
	require.Equal(t, 1, cfg.StreamReplicas)
	require.Equal(t, 2*time.Minute, cfg.NATSDuplicateWindow)
	require.Equal(t, "dev", cfg.DevTenant)
	require.Equal(t, defaultDevAPIKey, cfg.DevAPIKey)
	require.Equal(t, 8<<20, cfg.MaxEventBytes)
	require.EqualValues(t, 256<<20, cfg.MaxInflightBytes)
	require.Equal(t, 512, cfg.TokenAccounting.Workers)
	require.Equal(t, 64, cfg.AccountingBatch)
	require.Equal(t, 2, cfg.AccountingLanes)
	require.Equal(t, 64<<20, cfg.AccountingHeldBytes)
	require.Equal(t, 30*time.Second, cfg.GapTimeout)
	require.Equal(t, slog.LevelInfo, cfg.LogLevel)
	require.Equal(t, "text", cfg.LogFormat)
	require.Equal(t, 15*time.Second, cfg.GaugeInterval)
	require.Equal(t, 30*time.Second, cfg.ContextWait)
	require.Equal(t, 2*time.Minute, cfg.CompactionLease)
	require.Equal(t, 2*time.Minute, cfg.SessionMemoryLease)
	require.Equal(t, 2*time.Minute, cfg.ExtractorLease)
	require.Equal(t, limits.DefaultConfig(), cfg.Limits)
	require.Empty(t, cfg.CrashAfterCommit)
	require.Empty(t, cfg.CrashAfterPublish)
	require.Equal(t, "builtin", cfg.LLM.Kind())
	require.Equal(t, anthropic.DefaultTimeout, cfg.LLM.Anthropic.Timeout)
	require.Equal(t, openai.DefaultTimeout, cfg.LLM.OpenAI.Timeout, "the table's one timeout default is both providers' own")
	require.Equal(t, telemetry.ProtocolHTTPProtobuf, cfg.Trace.Protocol)
	require.Equal(t, "parentbased_always_on", cfg.Trace.SamplerName)
	require.False(t, cfg.Trace.Enabled())
}

// TestConfigTableRows: every row is documented, named once, and its
// default (when it has a literal one) is accepted by its own parser.
func TestConfigTableRows(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, v := range configTable {
		require.NotEmpty(t, v.doc, v.env)
		require.True(t, v.def != "" || v.defDoc != "", "%s: a default, or words for it", v.env)
		for _, name := range []string{v.env, v.alias} {
			if name != "" {
				require.False(t, seen[name], "%s is in the table twice", name)
				seen[name] = true
			}
		}
		for _, target := range v.targets {
			require.Contains(t, targetNames(), target, v.env)
		}
		if v.parse != nil && v.def != "" {
			c := baseConfig(TargetAll)
			require.NoError(t, v.parse(&c, v.def), "%s: its default %q", v.env, v.def)
		}
	}
	for _, task := range llm.Tasks {
		require.True(t, seen["MNEMOS_LLM_MODEL_"+strings.ToUpper(string(task))], "task %s has its model variable", task)
	}
	// telemetry.ReadTraceConfig reads what the table read for it: a
	// variable it asks for that the table lacks would always be empty.
	_, _ = telemetry.ReadTraceConfig(func(name string) string {
		require.True(t, seen[name], "telemetry.ReadTraceConfig reads %s, which configTable does not list", name)
		return ""
	}, "mnemos")
}

// TestConfigTableReadsTracingThroughIt: an OTEL_* variable set reaches
// the tracing configuration through the table.
func TestConfigTableReadsTracingThroughIt(t *testing.T) {
	t.Parallel()
	cfg, err := configFromEnv(TargetAll, env(map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/custom",
		"OTEL_SERVICE_NAME":                  "mine",
		"OTEL_TRACES_SAMPLER":                "traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":            "0.25",
	}))
	require.NoError(t, err)
	require.True(t, cfg.Trace.Enabled())
	require.Equal(t, "http://collector:4318/custom", cfg.Trace.Endpoint)
	require.Equal(t, "mine", cfg.Trace.ServiceName)
	require.Equal(t, "traceidratio(0.25)", cfg.Trace.SamplerName)

	cfg, err = configFromEnv(TargetAll, env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}))
	require.NoError(t, err)
	require.False(t, cfg.Trace.Enabled(), "OTEL_SDK_DISABLED wins")
}

// consumerVars are the variables of every consuming target's workers and
// deliveries.
var consumerVars = []string{
	"MNEMOS_WORKERS", "MNEMOS_TOKEN_ACCOUNTING_MAX_DELIVER",
	"MNEMOS_COMPACTOR_WORKERS", "MNEMOS_COMPACTOR_MAX_DELIVER",
	"MNEMOS_SESSION_MEMORY_WORKERS", "MNEMOS_SESSION_MEMORY_MAX_DELIVER",
	"MNEMOS_EXTRACTOR_WORKERS", "MNEMOS_EXTRACTOR_MAX_DELIVER",
	"MNEMOS_RECALL_WORKERS", "MNEMOS_RECALL_MAX_DELIVER",
	"MNEMOS_DREAMER_WORKERS", "MNEMOS_DREAMER_MAX_DELIVER",
	"MNEMOS_EMBEDDER_WORKERS", "MNEMOS_EMBEDDER_MAX_DELIVER",
}

// TestConsumingTargetsTakeWorkersAndMaxDeliver: every target that
// consumes a stream reads its workers and its deliveries from the
// environment and hands them to its service.
func TestConsumingTargetsTakeWorkersAndMaxDeliver(t *testing.T) {
	t.Parallel()
	vars := map[string]string{}
	for i, name := range consumerVars {
		require.True(t, configNames()[name], "%s is read by the configuration", name)
		vars[name] = strconv.Itoa(i + 2)
	}
	cfg, err := configFromEnv(TargetAll, env(vars))
	require.NoError(t, err)
	want := func(name string) int { n, _ := strconv.Atoi(vars[name]); return n }
	ta, co, sm, ex, re, dr := tokenAccountingConfig(cfg), compactorConfig(cfg), sessionMemoryConfig(cfg), extractorConfig(cfg), recallConfig(cfg), dreamerConfig(cfg)
	em := embedderConfig(cfg)
	for name, got := range map[string]int{
		"MNEMOS_WORKERS": ta.Workers, "MNEMOS_TOKEN_ACCOUNTING_MAX_DELIVER": ta.MaxDeliver,
		"MNEMOS_COMPACTOR_WORKERS": co.Workers, "MNEMOS_COMPACTOR_MAX_DELIVER": co.MaxDeliver,
		"MNEMOS_SESSION_MEMORY_WORKERS": sm.Workers, "MNEMOS_SESSION_MEMORY_MAX_DELIVER": sm.MaxDeliver,
		"MNEMOS_EXTRACTOR_WORKERS": ex.Workers, "MNEMOS_EXTRACTOR_MAX_DELIVER": ex.MaxDeliver,
		"MNEMOS_RECALL_WORKERS": re.Workers, "MNEMOS_RECALL_MAX_DELIVER": re.MaxDeliver,
		"MNEMOS_DREAMER_WORKERS": dr.Workers, "MNEMOS_DREAMER_MAX_DELIVER": dr.MaxDeliver,
		"MNEMOS_EMBEDDER_WORKERS": em.Workers, "MNEMOS_EMBEDDER_MAX_DELIVER": em.MaxDeliver,
	} {
		require.Equal(t, want(name), got, "%s reaches its service", name)
	}
	cfg, err = configFromEnv(TargetAll, env(map[string]string{"MNEMOS_TOKEN_ACCOUNTING_BATCH": "7"}))
	require.NoError(t, err)
	require.Equal(t, 7, tokenAccountingConfig(cfg).Batch, "MNEMOS_TOKEN_ACCOUNTING_BATCH reaches the accountant")

	_, err = configFromEnv(TargetAll, env(map[string]string{"MNEMOS_DREAMER_MAX_DELIVER": "0", "MNEMOS_RECALL_WORKERS": "many"}))
	require.ErrorContains(t, err, `MNEMOS_DREAMER_MAX_DELIVER="0": want a positive integer`)
	require.ErrorContains(t, err, `MNEMOS_RECALL_WORKERS="many": want a positive integer`)
}

// TestEmbeddingsAreOffUntilConfigured: -target=all runs the embedder only
// with an endpoint, which the embedder's and the gateway's configuration
// carry; a base URL that is not one is refused.
func TestEmbeddingsAreOffUntilConfigured(t *testing.T) {
	t.Parallel()
	names := func(ts []target) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.name)
		}
		return out
	}
	cfg, err := configFromEnv(TargetAll, env(nil))
	require.NoError(t, err)
	require.False(t, cfg.Embed.Enabled())
	require.NotContains(t, names(selectTargets(cfg)), TargetEmbedder)

	cfg, err = configFromEnv(TargetAll, env(map[string]string{
		"MNEMOS_EMBED_BASE_URL": "http://127.0.0.1:8091/v1", "MNEMOS_EMBED_MODEL": "scripted", "MNEMOS_EMBED_DIMENSIONS": "128", "MNEMOS_EMBED_API_KEY": "k",
	}))
	require.NoError(t, err)
	require.Contains(t, names(selectTargets(cfg)), TargetEmbedder)
	require.Equal(t, embed.Config{BaseURL: "http://127.0.0.1:8091/v1", Model: "scripted", Dimensions: 128, APIKey: "k", Timeout: embed.DefaultTimeout}, cfg.Embed)

	cfg, err = configFromEnv(TargetEmbedder, env(map[string]string{"MNEMOS_NATS_URL": "nats://127.0.0.1:4222"}))
	require.NoError(t, err, "the embedder target starts without an endpoint, and idles")
	require.Equal(t, []string{TargetEmbedder}, names(selectTargets(cfg)))

	_, err = configFromEnv(TargetAll, env(map[string]string{"MNEMOS_EMBED_BASE_URL": "localhost:8091", "MNEMOS_EMBED_DIMENSIONS": "0"}))
	require.ErrorContains(t, err, `MNEMOS_EMBED_BASE_URL="localhost:8091": want an absolute URL`)
	require.ErrorContains(t, err, `MNEMOS_EMBED_DIMENSIONS="0": want a positive integer`)
}

// configNames are the environment variables the configuration table reads.
func configNames() map[string]bool {
	out := map[string]bool{}
	for _, v := range configTable {
		out[v.env] = true
		if v.alias != "" {
			out[v.alias] = true
		}
	}
	return out
}

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

// servedTargets are the targets that run as their own process.
func servedTargets() []string {
	return slices.DeleteFunc(targetNames(), func(t string) bool { return t == TargetAll })
}

// TestConsoleSecretIsLongEnough: a console secret under 32 bytes is refused
// at start; one that long is taken.
func TestConsoleSecretIsLongEnough(t *testing.T) {
	t.Parallel()
	_, err := configFromEnv(TargetAll, env(map[string]string{"MNEMOS_CONSOLE_SECRET": "short"}))
	require.ErrorContains(t, err, "MNEMOS_CONSOLE_SECRET is 5 bytes; give at least 32")
	cfg, err := configFromEnv(TargetAll, env(map[string]string{"MNEMOS_CONSOLE_SECRET": strings.Repeat("s", 32)}))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("s", 32), cfg.ConsoleSecret)
}

// TestNATSSync: MNEMOS_NATS_SYNC takes always or an interval; anything
// else is refused at start, naming what it takes.
func TestNATSSync(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]struct {
		interval time.Duration
		always   bool
	}{"": {}, "always": {always: true}, "10s": {interval: 10 * time.Second}} {
		cfg, err := configFromEnv(TargetAll, env(map[string]string{"MNEMOS_NATS_SYNC": v}))
		require.NoError(t, err, v)
		interval, always, err := natsSync(cfg.NATSSync)
		require.NoError(t, err, v)
		require.Equal(t, want.interval, interval, v)
		require.Equal(t, want.always, always, v)
	}
	for _, bad := range []string{"sometimes", "1ms", "-5s"} {
		_, err := configFromEnv(TargetAll, env(map[string]string{"MNEMOS_NATS_SYNC": bad}))
		require.ErrorContains(t, err, "want always, or an interval", bad)
	}
}
