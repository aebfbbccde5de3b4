package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/faults"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/providers"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/telemetry"
	"github.com/mnemos-ai/mnemos/services/gateway/proxy"
)

// Targets a process can run.
const (
	TargetAll     = "all"
	TargetGateway = "gateway"
	// TargetProxy is the model proxy: it scales with concurrent upstream
	// streams, the gateway with requests and events.
	TargetProxy           = "proxy"
	TargetTokenAccounting = "token-accounting"
	TargetCompactor       = "compactor"
	TargetSessionMemory   = "session-memory"
	TargetExtractor       = "extractor"
	TargetDreamer         = "dreamer"
	// TargetRecall is the recall prefetch: memories chosen for each new
	// user message as its turn is accounted.
	TargetRecall = "recall"
	// TargetEmbedder keeps the vectors of messages and memories, where an
	// embeddings endpoint is configured (MNEMOS_EMBED_BASE_URL).
	TargetEmbedder = "embedder"
)

// localDatabaseURL is where Postgres is looked for when none is configured:
// the local server's administrator migrates, and the services connect to the
// same database as store.AppRole.
const localDatabaseURL = "postgres://postgres@127.0.0.1:5432/mnemos?sslmode=disable"

// defaultDevAPIKey is the development tenant's key when none is configured.
const defaultDevAPIKey = "mnemos-dev-key" //nolint:gosec // a development key, printed at start-up on purpose

// Config is every setting of a serving process, read once from the
// environment in main. Each field has a default.
type Config struct {
	Target string

	HTTPAddr string // MNEMOS_HTTP_ADDR: the API, /healthz and /readyz
	// AdminAddr (MNEMOS_ADMIN_ADDR) is the operator listener: /metrics,
	// /debug/pprof/, /healthz and /readyz. Apart from the API port, so
	// the tenants' clients never see it.
	AdminAddr string

	// DatabaseURL is the services' role (MNEMOS_DATABASE_URL): one that
	// owns no table and does not bypass row-level security. Empty: the
	// migration URL with store.AppRole as its user.
	DatabaseURL string
	// MigrateDatabaseURL is the schema's owner (MNEMOS_MIGRATE_DATABASE_URL),
	// for migrations. Empty: the local server, when DatabaseURL is empty too.
	MigrateDatabaseURL string
	DatabaseMaxConns   int32 // MNEMOS_DATABASE_MAX_CONNS
	// Migrate (MNEMOS_MIGRATE) runs the migrations at start: by default in
	// -target=all when the owner's URL is known.
	Migrate bool

	NATSURL      string // MNEMOS_NATS_URL; empty in all mode: embedded
	NATSStoreDir string // MNEMOS_NATS_STORE_DIR, for the embedded server
	NATSSync     string // MNEMOS_NATS_SYNC: "always" or a duration, for the embedded server
	// NATSListen (MNEMOS_NATS_LISTEN) opens a loopback port on the embedded
	// server, guarded by credentials generated at start and never shown.
	// Empty: no port, the services connect in-process.
	NATSListen     string
	Namespace      string // MNEMOS_NAMESPACE: subject and stream prefix
	StreamReplicas int    // MNEMOS_STREAM_REPLICAS: copies of each stream on a NATS cluster (3 for R3)
	// NATSDuplicateWindow (MNEMOS_NATS_DUPLICATE_WINDOW) is how long the
	// streams remember message ids.
	NATSDuplicateWindow time.Duration
	// NATSAuthCallout (MNEMOS_NATS_AUTH_CALLOUT) is the seed of the
	// account key that signs the answers to NATS's authorization requests
	// (services/natsauth): tenants' publishers connect with their API
	// keys. Empty: off. NATSAuthAccount (MNEMOS_NATS_AUTH_ACCOUNT) is the
	// account they are placed in.
	NATSAuthCallout string
	NATSAuthAccount string
	// NATSSystemURL (MNEMOS_NATS_SYSTEM_URL) is a user of the system
	// account of the server at NATSURL: the auth callout closes a revoked
	// key's connections through it. Empty: it closes none there.
	NATSSystemURL string

	DevTenant string // MNEMOS_DEV_TENANT
	DevAPIKey string // MNEMOS_DEV_API_KEY; "off": no development tenant

	// ConsoleSecret (MNEMOS_CONSOLE_SECRET) signs the console's cookies;
	// "" makes one at start.
	ConsoleSecret string

	MaxEventBytes int           // MNEMOS_MAX_EVENT_BYTES
	GapTimeout    time.Duration // MNEMOS_GAP_TIMEOUT

	// How each consuming target consumes: MNEMOS_<TARGET>_WORKERS and
	// MNEMOS_<TARGET>_MAX_DELIVER (the accountant's workers: MNEMOS_WORKERS).
	TokenAccounting     Consumer
	AccountingBatch     int // MNEMOS_TOKEN_ACCOUNTING_BATCH
	AccountingLanes     int // MNEMOS_TOKEN_ACCOUNTING_LANES
	AccountingHeldBytes int // MNEMOS_TOKEN_ACCOUNTING_HELD_BYTES
	Compactor           Consumer
	SessionMemory       Consumer
	Extractor           Consumer
	Recall              Consumer
	Dreamer             Consumer
	Embedder            Consumer
	// MaxInflightBytes (MNEMOS_MAX_INFLIGHT_BYTES) is the gateway's budget
	// of bytes its requests in flight may hold.
	MaxInflightBytes int64
	// ContextCacheBytes (MNEMOS_CONTEXT_CACHE_BYTES) bounds the gateway's
	// cache of decoded messages.
	ContextCacheBytes int64
	// Upstream (MNEMOS_UPSTREAM_ANTHROPIC_URL, _KEY) is where the
	// gateway's Messages API proxy sends requests.
	Upstream proxy.Upstream
	// UpstreamOpenAI (MNEMOS_UPSTREAM_OPENAI_URL, _KEY) is where the
	// OpenAI routes send requests.
	UpstreamOpenAI proxy.Upstream

	LogLevel  slog.Level // MNEMOS_LOG_LEVEL
	LogFormat string     // MNEMOS_LOG_FORMAT: text or json

	// GaugeInterval is how often the gauges read from Postgres and
	// JetStream are refreshed: sessions by state, outbox backlog, consumer
	// pending. MNEMOS_GAUGE_INTERVAL.
	GaugeInterval time.Duration

	// RetentionInterval (MNEMOS_RETENTION_INTERVAL) is how often the
	// gateway sweeps what the tenants' retention settings say is due.
	RetentionInterval time.Duration

	// Tracing, from the OpenTelemetry SDK's standard variables
	// (OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_ENDPOINT, …; see
	// telemetry.ReadTraceConfig). Off unless configured.
	Trace telemetry.TraceConfig

	// The model provider: MNEMOS_LLM_PROVIDER (anthropic, openai or
	// builtin; empty chooses by the keys set), ANTHROPIC_API_KEY,
	// MNEMOS_ANTHROPIC_BASE_URL, OPENAI_API_KEY, MNEMOS_OPENAI_BASE_URL,
	// MNEMOS_LLM_MODEL (default model), MNEMOS_LLM_MODEL_<TASK> (per task:
	// COMPACTION, NOTES, EXTRACTION, RECALL, DREAMING), MNEMOS_LLM_TIMEOUT.
	LLM providers.Config
	// LLMPrices (MNEMOS_LLM_PRICES over llm.DefaultPrices) price every
	// model call, beneath each tenant's own prices.
	LLMPrices llm.Prices

	// Embed is the embeddings endpoint (MNEMOS_EMBED_BASE_URL, _API_KEY,
	// _MODEL, _DIMENSIONS, _TIMEOUT): off unless its base URL is set.
	Embed embed.Config
	// EmbedCacheMB (MNEMOS_EMBED_CACHE_MB) is how many MiB of message
	// vectors a searching process keeps in memory.
	EmbedCacheMB int

	ContextWait time.Duration // MNEMOS_CONTEXT_WAIT: a blocked context request waits this long for its compaction
	// CompactionLease (MNEMOS_COMPACTION_LEASE) is how long a compaction's
	// claim lasts without renewal, and how long its request waits
	// unacknowledged before it is delivered again.
	CompactionLease time.Duration
	// SessionMemoryLease (MNEMOS_SESSION_MEMORY_LEASE) and ExtractorLease
	// (MNEMOS_EXTRACTOR_LEASE) are the same for a session's notes update
	// and for an extraction run of a memory scope.
	SessionMemoryLease time.Duration
	ExtractorLease     time.Duration

	// Limits are every tenant's limits unless its settings say otherwise:
	// MNEMOS_LIMIT_EVENTS_PER_SECOND, MNEMOS_LIMIT_EVENTS_BURST,
	// MNEMOS_LIMIT_ACTIVE_SESSIONS, MNEMOS_LIMIT_ACTIVE_MINUTES (0: no limit).
	Limits limits.Config

	// Test hooks of the fault-injection tests (pkg/faults), off unless set:
	// MNEMOS_FAULT_CRASH_AFTER_COMMIT=<consumer>:<n> exits the process right
	// after the n-th message the consumer handled (committed), before its
	// acknowledgement; MNEMOS_FAULT_CRASH_AFTER_PUBLISH=outbox-relay:<n>
	// right after the n-th batch the outbox relay published, before its rows
	// are deleted.
	CrashAfterCommit  faults.Points
	CrashAfterPublish faults.Points

	// vars are the variables of configTable as read (the value, else the
	// default), for the checks that read several together: Trace is made
	// of the OTEL_* variables by telemetry.ReadTraceConfig.
	vars map[string]string
}

// Consumer is how a target consumes its stream: Workers handle messages at
// once (the dreamer's run scheduled dreams), and a message that keeps
// failing is dead-lettered after MaxDeliver deliveries.
type Consumer struct {
	Workers    int
	MaxDeliver int
}

// configFromEnv reads the environment through configTable; target comes
// from the flag.
func configFromEnv(target string, getenv func(string) string) (Config, error) {
	cfg, _, err := readConfig(target, getenv)
	return cfg, err
}

// reading is what one variable of configTable was read as.
type reading struct {
	*configVar
	raw  string // the variable's value, else its default
	from string // the name it was read from; "" when it is the default
	err  error  // the parser's refusal
}

// readConfig reads every variable of configTable, in its order: each is
// parsed (its value, else its default), then the checks across variables
// run. Every refusal is reported, not only the first.
func readConfig(target string, getenv func(string) string) (Config, []reading, error) {
	cfg := baseConfig(target)
	if !slices.Contains(targetNames(), target) {
		return cfg, nil, fmt.Errorf("unknown target %q; want one of %s", target, strings.Join(targetNames(), ", "))
	}
	var errs []string
	readings := make([]reading, len(configTable))
	for i := range configTable {
		r := reading{configVar: &configTable[i]}
		r.raw, r.from = r.lookup(getenv)
		cfg.vars[r.env] = r.raw
		if r.parse != nil {
			if r.err = r.parse(&cfg, r.raw); r.err != nil {
				errs = append(errs, fmt.Sprintf("%s=%q: %v", cmp.Or(r.from, r.env), r.raw, r.err))
			}
		}
		readings[i] = r
	}
	for _, r := range readings {
		if r.check == nil || r.err != nil {
			continue
		}
		if err := r.check(&cfg); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return cfg, readings, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return cfg, readings, nil
}

// baseConfig is what configTable's parsers fill: the target, and what
// no variable sets.
func baseConfig(target string) Config {
	cfg := Config{Target: target, Limits: limits.DefaultConfig(), vars: map[string]string{}}
	models := llm.Models{} // MNEMOS_LLM_MODEL_<TASK>, the same for every provider
	cfg.LLM.Anthropic.Models, cfg.LLM.OpenAI.Models = models, models
	return cfg
}

// LogValue logs the effective configuration once, secrets masked.
func (c Config) LogValue() slog.Value {
	db, owner := store.Redact(c.DatabaseURL), store.Redact(c.MigrateDatabaseURL)
	switch {
	case c.DatabaseURL == "" && c.MigrateDatabaseURL == "":
		db, owner = "(local, as "+store.AppRole+") "+localDatabaseURL, "(local) "+localDatabaseURL
	case c.DatabaseURL == "":
		db = "(the migration URL as " + store.AppRole + ")"
	}
	natsURL := redactURL(c.NATSURL)
	switch {
	case natsURL != "":
	case c.NATSListen != "":
		natsURL = "(embedded, in-process and on " + c.NATSListen + " with generated credentials)"
	default:
		natsURL = "(embedded, in-process)"
	}
	attrs := []slog.Attr{
		slog.String("target", c.Target),
		slog.String("http_addr", c.HTTPAddr),
		slog.String("admin_addr", c.AdminAddr),
		slog.String("database_url", db),
		slog.String("migrate_database_url", owner),
		slog.Bool("migrate", c.Migrate),
		slog.String("nats_url", natsURL),
		slog.String("nats_auth_callout", mask(c.NATSAuthCallout)),
		slog.String("nats_system_url", redactURL(c.NATSSystemURL)),
		slog.String("namespace", c.Namespace),
		slog.Int("stream_replicas", c.StreamReplicas),
		slog.Int("max_event_bytes", c.MaxEventBytes),
		slog.Int("workers", c.TokenAccounting.Workers),
		slog.Duration("gap_timeout", c.GapTimeout),
		slog.String("dev_api_key", mask(c.DevAPIKey)),
		slog.String("llm_provider", c.LLM.Kind()),
		slog.String("anthropic_api_key", maskOptional(c.LLM.Anthropic.APIKey)),
		slog.String("openai_api_key", maskOptional(c.LLM.OpenAI.APIKey)),
		slog.String("openai_base_url", c.LLM.OpenAI.BaseURL),
		slog.String("embed_base_url", c.Embed.BaseURL),
		slog.String("embed_model", c.Embed.Model),
		slog.Duration("context_wait", c.ContextWait),
		slog.Duration("gauge_interval", c.GaugeInterval),
		slog.Duration("retention_interval", c.RetentionInterval),
		slog.String("tracing", c.Trace.String()),
		slog.Duration("compaction_lease", c.CompactionLease),
		slog.Duration("session_memory_lease", c.SessionMemoryLease),
		slog.Duration("extractor_lease", c.ExtractorLease),
		slog.Any("limits", c.Limits),
		slog.Duration("nats_duplicate_window", c.NATSDuplicateWindow),
	}
	if len(c.CrashAfterCommit) > 0 || len(c.CrashAfterPublish) > 0 {
		attrs = append(attrs, slog.Any("fault_crash_after_commit", c.CrashAfterCommit), slog.Any("fault_crash_after_publish", c.CrashAfterPublish))
	}
	return slog.GroupValue(attrs...)
}

// defaultAdminAddr is where the operator listener is unless configured: on
// loopback, so a development machine shows its metrics to no one else. 9464
// is the port OpenTelemetry's Prometheus exporters use, and not the 9090 of
// a Prometheus running beside it.
const defaultAdminAddr = "127.0.0.1:9464"

// loopbackAddr checks that addr is host:port with a loopback host.
func loopbackAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port, such as 127.0.0.1:4222")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q: want a number up to 65535", port)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("host %q: want a loopback address (127.0.0.1, ::1 or localhost)", host)
	}
	return nil
}

// redactURL hides the passwords of a comma-separated list of URLs with
// credentials (nats://user:pw@host, postgres://user@host/db?password=pw).
func redactURL(raw string) string {
	if raw == "" {
		return ""
	}
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			parts[i] = "(unparsable URL)"
			continue
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		if q := u.Query(); q.Has("password") { // Postgres takes one there too
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// serviceName is a target's default service.name in traces: "mnemos" for
// the one-process install, "mnemos-<target>" for one service.
func serviceName(target string) string {
	if target == TargetAll {
		return "mnemos"
	}
	return "mnemos-" + target
}

func maskOptional(secret string) string {
	if secret == "" {
		return ""
	}
	return mask(secret)
}

func mask(secret string) string {
	if len(secret) <= 4 {
		return "****"
	}
	return secret[:4] + "****"
}

// newLogger logs to stderr; a line logged with a traced context carries its
// trace_id and span_id.
func newLogger(cfg Config) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, opts)
	if cfg.LogFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, opts)
	}
	return slog.New(telemetry.LogHandler(h))
}
