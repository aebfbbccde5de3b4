package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/faults"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llm/anthropic"
	"github.com/mnemos-ai/mnemos/pkg/retain"
	"github.com/mnemos-ai/mnemos/pkg/search"
	"github.com/mnemos-ai/mnemos/pkg/telemetry"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/compactor"
	"github.com/mnemos-ai/mnemos/services/console"
	"github.com/mnemos-ai/mnemos/services/dreamer"
	"github.com/mnemos-ai/mnemos/services/embedder"
	"github.com/mnemos-ai/mnemos/services/extractor"
	"github.com/mnemos-ai/mnemos/services/gateway"
	"github.com/mnemos-ai/mnemos/services/recallprefetch"
	"github.com/mnemos-ai/mnemos/services/sessionmemory"
	"github.com/mnemos-ai/mnemos/services/tokenaccounting"
)

// configVar is one environment variable of the configuration: a row of
// configTable, of `mnemos config` and of docs/configuration.md.
type configVar struct {
	env string
	// alias is a second name, read before env: MNEMOS_ANTHROPIC_API_KEY
	// before the provider's own ANTHROPIC_API_KEY.
	alias string
	// def is the default as text, parsed like a value. defDoc describes the
	// default in the documentation instead (markdown), when it is not one
	// literal value: it depends on other variables, or "" means none.
	def, defDoc string
	// field parses the value into the Config and shows what it became. Its
	// parse is nil for a variable another program reads (the Go runtime,
	// the OTLP exporter), listed to be documented and shown.
	field
	// check runs once every variable is parsed, unless this one's parse
	// failed: rules across variables, and values read from several.
	check func(c *Config) error
	// doc is what it means (markdown).
	doc string
	// secret values are masked wherever they are shown.
	secret bool
	// targets are the targets it concerns; nil: every target. Every
	// variable concerns -target=all, which runs them all.
	targets []string
}

// field is how a variable becomes part of the Config.
type field struct {
	parse func(c *Config, v string) error
	show  func(c *Config) string // nil: the text as read
}

// lookup is the variable's value and the name it was read from, else its
// default and "".
func (v *configVar) lookup(getenv func(string) string) (raw, from string) {
	for _, name := range []string{v.alias, v.env} {
		if name == "" {
			continue
		}
		if x := getenv(name); x != "" {
			return x, name
		}
	}
	return v.def, ""
}

// configTable is every environment variable a serving process reads, in
// the order they are read and documented. Add a variable here, and nowhere
// else: `make docs` writes its row of docs/configuration.md.
var configTable = []configVar{
	// Listeners
	{env: "MNEMOS_HTTP_ADDR", def: ":8080", field: text(func(c *Config) *string { return &c.HTTPAddr }),
		doc: "HTTP listen address (API in `all`/`gateway`; health on every target)"},
	{env: "MNEMOS_ADMIN_ADDR", def: defaultAdminAddr, field: hostPort(func(c *Config) *string { return &c.AdminAddr }, "127.0.0.1:9464"), check: adminOwnPort,
		doc: "operator listener: `/metrics`, `/debug/pprof/`, `/healthz`, `/readyz` (`:9464` in compose and Helm, reached by Prometheus, never published)"},

	// Postgres
	{env: "MNEMOS_DATABASE_URL", defDoc: "the migration URL with the user `mnemos_app`", secret: true, field: text(func(c *Config) *string { return &c.DatabaseURL }),
		doc: "Postgres as the services' role: `mnemos_app`, or a login role that is a member of it; never the owner of the tables, a superuser or a role with `BYPASSRLS` (the services refuse to start)"},
	{env: "MNEMOS_MIGRATE_DATABASE_URL", defDoc: "local `postgres://postgres@127.0.0.1:5432/mnemos` when `MNEMOS_DATABASE_URL` is not set either", secret: true,
		field: text(func(c *Config) *string { return &c.MigrateDatabaseURL }),
		doc:   "Postgres as the schema's owner, for `mnemos migrate` and `MNEMOS_MIGRATE`"},
	{env: "MNEMOS_DATABASE_MAX_CONNS", def: "20", field: positive(func(c *Config) *int32 { return &c.DatabaseMaxConns }),
		doc: "pool size"},
	{env: "MNEMOS_MIGRATE", defDoc: "`true` for `all` when the owner's URL is known (set, or the local default), else `false`", field: migrateField, check: migrateNeedsOwner,
		doc: "run migrations at start (`mnemos migrate` does it alone); `true` needs the owner's URL"},

	// NATS
	{env: "MNEMOS_NATS_URL", defDoc: "embedded (only in `all`)", secret: true, field: text(func(c *Config) *string { return &c.NATSURL }), check: natsURLRequired,
		doc: "NATS with JetStream; required for single targets; a user and password go in the URL (`nats://mnemos:PASSWORD@nats:4222`)"},
	{env: "MNEMOS_NATS_STORE_DIR", def: ".mnemos/nats", field: text(func(c *Config) *string { return &c.NATSStoreDir }), targets: []string{TargetAll},
		doc: "embedded JetStream storage: each database's store in a directory of its own under it, `pg-<system identifier>-<database oid>` (see [operations](operations.md#running-on-one-machine)); empty: a temporary store, removed at shutdown"},
	{env: "MNEMOS_NATS_SYNC", defDoc: "empty: the server's default, every 2 minutes", field: text(func(c *Config) *string { return &c.NATSSync }), check: natsSyncValid, targets: []string{TargetAll},
		doc: "how the embedded JetStream fsyncs its files: `always` (after every write: an acknowledged turn survives the machine's crash, at a cost in ingest) or an interval such as `10s`"},
	{env: "MNEMOS_NATS_LISTEN", defDoc: "empty: in-process only", field: text(func(c *Config) *string { return &c.NATSListen }), check: natsListenLoopback, targets: []string{TargetAll},
		doc: "a loopback `host:port` where the embedded server also listens, with a user and password generated at start and never shown"},
	{env: "MNEMOS_NATS_AUTH_CALLOUT", defDoc: "empty: off", secret: true, field: text(func(c *Config) *string { return &c.NATSAuthCallout }), check: natsAuthCalloutValid,
		doc: "the seed (`SA…`) of an account nkey: the process answers NATS's authorization requests (auth callout) signed with it, letting a tenant's publishers in with an API key holding `ingest` as the password; the embedded server needs `MNEMOS_NATS_LISTEN`, an external one the account's public key as `auth_callout.issuer` (see [tenant isolation](tenant-isolation.md))"},
	{env: "MNEMOS_NATS_AUTH_ACCOUNT", def: "$G", field: text(func(c *Config) *string { return &c.NATSAuthAccount }),
		doc: "with `MNEMOS_NATS_AUTH_CALLOUT`, the NATS account the publishers it lets in are placed in: the one that holds the Mnemos streams (`$G` on a server without accounts)"},
	{env: "MNEMOS_NATS_SYSTEM_URL", defDoc: "empty: none", secret: true, field: text(func(c *Config) *string { return &c.NATSSystemURL }), check: natsSystemURLValid,
		doc: "with `MNEMOS_NATS_AUTH_CALLOUT` and `MNEMOS_NATS_URL`, a user of that server's system account (`nats://sys:PASSWORD@nats:4222`): the connections of a key revoked are closed through it, on every server of the cluster; without it they stay until they reconnect"},
	{env: "MNEMOS_NAMESPACE", defDoc: "empty", field: text(func(c *Config) *string { return &c.Namespace }),
		doc: "prefix for every subject and stream (several installs on one NATS)"},
	{env: "MNEMOS_STREAM_REPLICAS", def: "1", field: positive(func(c *Config) *int { return &c.StreamReplicas }), check: replicasAtMost5,
		doc: "copies of each stream on a NATS cluster; `3` (R3) survives the loss of a server"},
	{env: "MNEMOS_NATS_DUPLICATE_WINDOW", def: durationText(bus.DefaultDuplicateWindow), field: duration(func(c *Config) *time.Duration { return &c.NATSDuplicateWindow }, 100*time.Millisecond, "2m"),
		doc: "how long the streams remember message ids (a publish repeated within it is dropped)"},

	// The development tenant
	{env: "MNEMOS_DEV_TENANT", def: "dev", field: text(func(c *Config) *string { return &c.DevTenant }), targets: []string{TargetAll},
		doc: "development tenant created in `all` mode"},
	{env: "MNEMOS_DEV_API_KEY", def: defaultDevAPIKey, secret: true, field: devKeyField, targets: []string{TargetAll},
		doc: "its API key; `off` creates none"},

	// Ingest and the accountant
	{env: "MNEMOS_MAX_EVENT_BYTES", def: strconv.Itoa(turn.DefaultMaxEventBytes), field: positive(func(c *Config) *int { return &c.MaxEventBytes }), targets: []string{TargetGateway, TargetTokenAccounting},
		doc: "largest turn event (also bounded by the NATS server's max payload)"},
	{env: "MNEMOS_MAX_INFLIGHT_BYTES", def: strconv.FormatInt(gateway.DefaultMaxInflightBytes, 10), field: positive(func(c *Config) *int64 { return &c.MaxInflightBytes }), targets: []string{TargetGateway, TargetProxy},
		doc: "the gateway's budget of bytes its requests in flight may hold; past it, 503 `overloaded` ([API](api.md))"},
	{env: "MNEMOS_CONTEXT_CACHE_BYTES", def: strconv.FormatInt(gateway.DefaultConfig().ContextCacheBytes, 10), field: positive(func(c *Config) *int64 { return &c.ContextCacheBytes }), targets: []string{TargetGateway, TargetProxy},
		doc: "bytes of decoded messages the gateway keeps between context reads, so a session read again fetches only what was stored since (the least recently read session is dropped first)"},
	{env: "MNEMOS_UPSTREAM_ANTHROPIC_URL", defDoc: "none (POST /v1/messages answers 503)", field: text(func(c *Config) *string { return &c.Upstream.URL }), targets: []string{TargetProxy},
		doc: "the Anthropic-compatible base URL the Messages API proxy (`POST /v1/messages`) forwards to, e.g. `https://api.anthropic.com`"},
	{env: "MNEMOS_UPSTREAM_ANTHROPIC_KEY", defDoc: "none", secret: true, field: text(func(c *Config) *string { return &c.Upstream.Key }), targets: []string{TargetProxy},
		doc: "the key the Messages API proxy sends upstream (`x-api-key`); clients authenticate to Mnemos with their Mnemos key"},
	{env: "MNEMOS_UPSTREAM_OPENAI_URL", defDoc: "none", field: text(func(c *Config) *string { return &c.UpstreamOpenAI.URL }), targets: []string{TargetProxy},
		doc: "the OpenAI-compatible base URL the OpenAI routes (`POST /v1/responses`, `/v1/chat/completions`, `GET /v1/models`) forward to, e.g. `https://api.openai.com`, or a vLLM, Ollama or LiteLLM server ([OpenAI API](openai-api.md))"},
	{env: "MNEMOS_UPSTREAM_OPENAI_KEY", defDoc: "none", secret: true, field: text(func(c *Config) *string { return &c.UpstreamOpenAI.Key }), targets: []string{TargetProxy},
		doc: "the key the OpenAI routes send upstream (`Authorization: Bearer`); clients authenticate to Mnemos with their Mnemos key"},
	{env: "MNEMOS_CONSOLE_SECRET", defDoc: "random at start (a restart signs everybody out)", secret: true, field: text(func(c *Config) *string { return &c.ConsoleSecret }), targets: []string{TargetGateway},
		check: consoleSecretLength,
		doc:   "signs the [console](console.md)'s session cookies and CSRF tokens, at least 32 bytes; give every gateway replica the same one so a browser may reach any"},
	{env: "MNEMOS_CONTEXT_WAIT", def: "30s", field: duration(func(c *Config) *time.Duration { return &c.ContextWait }, 0, "30s"), targets: []string{TargetGateway, TargetProxy},
		doc: "how long a context request waits for the compaction its session is due (at or above auto-compact, or at the blocking limit); `?compaction_wait_ms=` overrides it per request"},
	{env: "MNEMOS_GAP_TIMEOUT", def: "30s", field: duration(func(c *Config) *time.Duration { return &c.GapTimeout }, time.Nanosecond, "30s"), targets: []string{TargetTokenAccounting},
		doc: "how long an early event waits for a missing seq; the events of a crashed accountant come back after the ack wait, also 30 s, so a longer gap timeout (a few minutes) keeps a busy install from giving up on them"},

	// Leases of the model-driven services
	{env: "MNEMOS_COMPACTION_LEASE", def: durationText(compactor.DefaultConfig().Lease), field: lease(func(c *Config) *time.Duration { return &c.CompactionLease }), targets: []string{TargetCompactor},
		doc: "how long a compaction's claim lasts without renewal, and how long its request waits unacknowledged before it is delivered again"},
	{env: "MNEMOS_SESSION_MEMORY_LEASE", def: durationText(sessionmemory.DefaultConfig().Lease), field: lease(func(c *Config) *time.Duration { return &c.SessionMemoryLease }), targets: []string{TargetSessionMemory},
		doc: "the same for a session's notes update and the `turn.accounted` it runs for"},
	{env: "MNEMOS_EXTRACTOR_LEASE", def: durationText(extractor.DefaultConfig().Lease), field: lease(func(c *Config) *time.Duration { return &c.ExtractorLease }), targets: []string{TargetExtractor},
		doc: "the same for an extraction run of a memory scope and the `turn.accounted` it runs for"},

	// How each consuming target consumes
	{env: "MNEMOS_WORKERS", def: strconv.Itoa(tokenaccounting.DefaultConfig().Workers), field: workers(func(c *Config) *Consumer { return &c.TokenAccounting }), targets: []string{TargetTokenAccounting},
		doc: "turn events handled concurrently by the accountant, each held until its batch commits; a tenant's batch holds at most this many"},
	{env: "MNEMOS_TOKEN_ACCOUNTING_HELD_BYTES", def: strconv.Itoa(tokenaccounting.DefaultConfig().HeldBytes), field: positive(func(c *Config) *int { return &c.AccountingHeldBytes }), targets: []string{TargetTokenAccounting},
		doc: "most bytes of turn events the accountant's workers hold at once, and fetch from NATS at once: many workers for small turns, few for the largest (raised to NATS's largest message when below it)"},
	{env: "MNEMOS_TOKEN_ACCOUNTING_BATCH", def: strconv.Itoa(tokenaccounting.DefaultConfig().Batch), field: positive(func(c *Config) *int { return &c.AccountingBatch }), targets: []string{TargetTokenAccounting},
		doc: "most turn events of one tenant applied in one transaction: those that arrive while the tenant's transaction before is under way go together in the next (1: each on its own; see [token accounting](token-accounting.md#group-commit))"},
	{env: "MNEMOS_TOKEN_ACCOUNTING_LANES", def: strconv.Itoa(tokenaccounting.DefaultConfig().Lanes), field: positive(func(c *Config) *int { return &c.AccountingLanes }), targets: []string{TargetTokenAccounting},
		doc: "transactions of one tenant's batches under way at once, each over its own sessions (1: one at a time; see [token accounting](token-accounting.md#group-commit))"},
	{env: "MNEMOS_TOKEN_ACCOUNTING_MAX_DELIVER", def: strconv.Itoa(tokenaccounting.DefaultConfig().MaxDeliver), field: maxDeliver(func(c *Config) *Consumer { return &c.TokenAccounting }), targets: []string{TargetTokenAccounting},
		doc: "deliveries of a turn event whose accounting keeps failing, before it is dead-lettered"},
	{env: "MNEMOS_COMPACTOR_WORKERS", def: strconv.Itoa(compactor.DefaultConfig().Workers), field: workers(func(c *Config) *Consumer { return &c.Compactor }), targets: []string{TargetCompactor},
		doc: "compactions run at once (one per session at a time)"},
	{env: "MNEMOS_COMPACTOR_MAX_DELIVER", def: strconv.Itoa(compactor.DefaultConfig().MaxDeliver), field: maxDeliver(func(c *Config) *Consumer { return &c.Compactor }), targets: []string{TargetCompactor},
		doc: "deliveries of a compaction request that keeps failing, before it is dead-lettered"},
	{env: "MNEMOS_SESSION_MEMORY_WORKERS", def: strconv.Itoa(sessionmemory.DefaultConfig().Workers), field: workers(func(c *Config) *Consumer { return &c.SessionMemory }), targets: []string{TargetSessionMemory},
		doc: "`turn.accounted` events the session-notes service handles at once"},
	{env: "MNEMOS_SESSION_MEMORY_MAX_DELIVER", def: strconv.Itoa(sessionmemory.DefaultConfig().MaxDeliver), field: maxDeliver(func(c *Config) *Consumer { return &c.SessionMemory }), targets: []string{TargetSessionMemory},
		doc: "deliveries of a `turn.accounted` whose notes update keeps failing, before it is dead-lettered"},
	{env: "MNEMOS_EXTRACTOR_WORKERS", def: strconv.Itoa(extractor.DefaultConfig().Workers), field: workers(func(c *Config) *Consumer { return &c.Extractor }), targets: []string{TargetExtractor},
		doc: "`turn.accounted` events the extractor handles at once"},
	{env: "MNEMOS_EXTRACTOR_MAX_DELIVER", def: strconv.Itoa(extractor.DefaultConfig().MaxDeliver), field: maxDeliver(func(c *Config) *Consumer { return &c.Extractor }), targets: []string{TargetExtractor},
		doc: "deliveries of a `turn.accounted` whose extraction keeps failing, before it is dead-lettered"},
	{env: "MNEMOS_RECALL_WORKERS", def: strconv.Itoa(recallprefetch.DefaultConfig().Workers), field: workers(func(c *Config) *Consumer { return &c.Recall }), targets: []string{TargetRecall},
		doc: "`turn.accounted` events the recall prefetch handles at once"},
	{env: "MNEMOS_RECALL_MAX_DELIVER", def: strconv.Itoa(recallprefetch.DefaultConfig().MaxDeliver), field: maxDeliver(func(c *Config) *Consumer { return &c.Recall }), targets: []string{TargetRecall},
		doc: "deliveries of a `turn.accounted` whose prefetch keeps failing, before it is dead-lettered"},
	{env: "MNEMOS_DREAMER_WORKERS", def: strconv.Itoa(dreamer.DefaultConfig().Workers), field: workers(func(c *Config) *Consumer { return &c.Dreamer }), targets: []string{TargetDreamer},
		doc: "scheduled dreams this process runs at once"},
	{env: "MNEMOS_DREAMER_MAX_DELIVER", def: strconv.Itoa(dreamer.DefaultConfig().MaxDeliver), field: maxDeliver(func(c *Config) *Consumer { return &c.Dreamer }), targets: []string{TargetDreamer},
		doc: "deliveries of a `dream.requested` that keeps failing, before it is dead-lettered"},
	{env: "MNEMOS_EMBEDDER_WORKERS", def: strconv.Itoa(embedder.DefaultConfig().Workers), field: workers(func(c *Config) *Consumer { return &c.Embedder }), targets: []string{TargetEmbedder},
		doc: "events the embedder handles at once, on each of its consumers (`turn.accounted`, `memory.saved`, `dream.completed`)"},
	{env: "MNEMOS_EMBEDDER_MAX_DELIVER", def: strconv.Itoa(embedder.DefaultConfig().MaxDeliver), field: maxDeliver(func(c *Config) *Consumer { return &c.Embedder }), targets: []string{TargetEmbedder},
		doc: "deliveries of an event whose embedding keeps failing (the endpoint down), before it is dead-lettered; the session's next turn embeds what it missed"},

	// Every tenant's limits
	{env: "MNEMOS_LIMIT_EVENTS_PER_SECOND", def: number(limits.DefaultConfig().EventsPerSecond), field: limit(func(c *Config) *float64 { return &c.Limits.EventsPerSecond }), check: limitsWork, targets: limitTargets,
		doc: "every tenant's turn-event rate unless its settings say otherwise; `0`: no limit ([Limits](#limits))"},
	{env: "MNEMOS_LIMIT_EVENTS_BURST", def: strconv.Itoa(limits.DefaultConfig().EventsBurst), field: limit(func(c *Config) *int { return &c.Limits.EventsBurst }), targets: limitTargets,
		doc: "the turn events a tenant may send at once after a quiet spell; `0`: no limit"},
	{env: "MNEMOS_LIMIT_ACTIVE_SESSIONS", def: strconv.Itoa(limits.DefaultConfig().ActiveSessions), field: limit(func(c *Config) *int { return &c.Limits.ActiveSessions }), targets: limitTargets,
		doc: "every tenant's cap on sessions active at once; `0`: no cap"},
	{env: "MNEMOS_LIMIT_ACTIVE_MINUTES", def: strconv.Itoa(limits.DefaultConfig().ActiveMinutes), field: limit(func(c *Config) *int { return &c.Limits.ActiveMinutes }), targets: limitTargets,
		doc: "how long a session stays active after its last turn"},

	// The model provider
	{env: "MNEMOS_LLM_PROVIDER", defDoc: "chosen by the keys", field: providerField, check: providerHasKey, targets: modelTargets(),
		doc: "`anthropic`, `openai` or `builtin`; empty: anthropic when an Anthropic key is set, else openai when an OpenAI key or base URL is set, else builtin"},
	{env: "ANTHROPIC_API_KEY", alias: "MNEMOS_ANTHROPIC_API_KEY", defDoc: "none", secret: true, field: text(func(c *Config) *string { return &c.LLM.Anthropic.APIKey }), targets: modelTargets(),
		doc: "the Anthropic provider (official SDK; the system prompt is marked for prompt caching; a JSON answer is a forced call of an `answer` tool, or, on Claude Sonnet 5.5 and Opus 5.5, which refuse a forced tool, the tool offered and asked for in words; background calls of proxied sessions fork the agent's request: [messages-api.md](messages-api.md#background-calls-read-the-agents-prompt-cache))"},
	{env: "MNEMOS_ANTHROPIC_BASE_URL", defDoc: "the API's", field: text(func(c *Config) *string { return &c.LLM.Anthropic.BaseURL }), targets: modelTargets(),
		doc: "another Anthropic endpoint"},
	{env: "OPENAI_API_KEY", alias: "MNEMOS_OPENAI_API_KEY", defDoc: "none", secret: true, field: text(func(c *Config) *string { return &c.LLM.OpenAI.APIKey }), targets: modelTargets(),
		doc: "an OpenAI-compatible server (official SDK, Chat Completions): OpenAI, or vLLM / Ollama / llama.cpp at their `/v1` URL, where the key may be empty"},
	{env: "MNEMOS_OPENAI_BASE_URL", defDoc: "OpenAI's", field: text(func(c *Config) *string { return &c.LLM.OpenAI.BaseURL }), targets: modelTargets(),
		doc: "the OpenAI-compatible server's `/v1` URL"},
	{env: "MNEMOS_LLM_MODEL", defDoc: "the provider's default", field: llmModelField, targets: modelTargets(),
		doc: "the model"},
	{env: "MNEMOS_LLM_MODEL_COMPACTION", defDoc: "`MNEMOS_LLM_MODEL`", field: taskModel(llm.TaskCompaction), targets: []string{TargetCompactor},
		doc: "the model of compaction summaries"},
	{env: "MNEMOS_LLM_MODEL_NOTES", defDoc: "`MNEMOS_LLM_MODEL`", field: taskModel(llm.TaskNotes), targets: []string{TargetSessionMemory},
		doc: "the model of session notes"},
	{env: "MNEMOS_LLM_MODEL_EXTRACTION", defDoc: "`MNEMOS_LLM_MODEL`", field: taskModel(llm.TaskExtraction), targets: []string{TargetExtractor},
		doc: "the model of memory extraction"},
	{env: "MNEMOS_LLM_MODEL_RECALL", defDoc: "`MNEMOS_LLM_MODEL`", field: taskModel(llm.TaskRecall), targets: []string{TargetGateway, TargetRecall},
		doc: "the model that chooses memories to recall"},
	{env: "MNEMOS_LLM_MODEL_DREAMING", defDoc: "`MNEMOS_LLM_MODEL`", field: taskModel(llm.TaskDreaming), targets: []string{TargetDreamer},
		doc: "the model of dreams (consolidation)"},
	{env: "MNEMOS_LLM_TIMEOUT", def: durationText(anthropic.DefaultTimeout), field: llmTimeoutField, targets: modelTargets(),
		doc: "one model call"},
	{env: "MNEMOS_LLM_PRICES", defDoc: "the list prices (`llm.DefaultPrices`)", field: llmPricesField, targets: append(modelTargets(), TargetProxy),
		doc: "prices of models over the list prices, as JSON: `{\"<model or family>\": {\"input\": 3, \"output\": 15, \"cache_write\": 3.75, \"cache_read\": 0.3}}` in dollars per million tokens, every kind named; a tenant's `llm.prices` win over them (see [token accounting](token-accounting.md#money))"},

	// Embeddings
	{env: "MNEMOS_EMBED_BASE_URL", defDoc: "none: embeddings off, search lexical only", field: embedURLField, targets: embedTargets,
		doc: "an OpenAI-compatible embeddings endpoint's `/v1` URL (OpenAI, or vLLM / Ollama / llama.cpp / LiteLLM): the `embedder` target stores vectors of messages and memories (without one it idles), `-target=all` runs it, and search fuses its vector ranking with the lexical one (see [memory](memory.md#embeddings))"},
	{env: "MNEMOS_EMBED_API_KEY", defDoc: "none", secret: true, field: text(func(c *Config) *string { return &c.Embed.APIKey }), targets: embedTargets,
		doc: "the endpoint's key (`Authorization: Bearer`); a local server may need none"},
	{env: "MNEMOS_EMBED_MODEL", def: embed.DefaultModel, field: text(func(c *Config) *string { return &c.Embed.Model }), targets: embedTargets,
		doc: "the embedding model; vectors of another model are not compared, and messages are embedded again under a new one as their sessions go on"},
	{env: "MNEMOS_EMBED_DIMENSIONS", defDoc: "the model's", field: embedDimensionsField, targets: embedTargets,
		doc: "the length of the vectors asked for (`dimensions`, which the text-embedding-3 models honour); shorter vectors are cheaper to store and to rank"},
	{env: "MNEMOS_EMBED_TIMEOUT", def: durationText(embed.DefaultTimeout), field: duration(func(c *Config) *time.Duration { return &c.Embed.Timeout }, time.Nanosecond, "30s"), targets: embedTargets,
		doc: "one embeddings request; a search whose query is not embedded in time answers lexically"},
	{env: "MNEMOS_EMBED_CACHE_MB", def: strconv.Itoa(search.DefaultVectorCacheBytes >> 20), field: positive(func(c *Config) *int { return &c.EmbedCacheMB }), targets: []string{TargetGateway},
		doc: "MiB of message vectors a process that searches keeps in memory between searches, least recently searched sessions out first; a session's vectors are read from Postgres again only when they changed (see [memory](memory.md#embeddings))"},

	// Logs, gauges, the runtime
	{env: "MNEMOS_LOG_LEVEL", def: "info", field: logLevelField,
		doc: "`debug`, `info`, `warn` or `error`"},
	{env: "MNEMOS_LOG_FORMAT", def: "text", field: oneOf(func(c *Config) *string { return &c.LogFormat }, "text", "json"),
		doc: "`text`, or `json` for machines"},
	{env: "MNEMOS_GAUGE_INTERVAL", def: "15s", field: duration(func(c *Config) *time.Duration { return &c.GaugeInterval }, time.Nanosecond, "15s"),
		doc: "how often the gauges read from Postgres and JetStream are refreshed (sessions by state, outbox backlog, consumer pending)"},
	{env: "MNEMOS_RETENTION_INTERVAL", def: durationText(retain.DefaultConfig().Interval), field: duration(func(c *Config) *time.Duration { return &c.RetentionInterval }, time.Second, "5m"), targets: []string{TargetGateway},
		doc: "how often the gateway sweeps what the tenants' retention settings say is due: idle sessions, old tool results and memory revisions (see [Retention](tenants.md#retention))"},
	{env: "GOMEMLIMIT", defDoc: "90% of the container's memory limit (cgroup v2 `memory.max` or v1 `memory.limit_in_bytes`), logged at start",
		doc: "the Go runtime's soft memory limit; set it to override"},
	{env: "GOGC", def: strconv.Itoa(defaultGCPercent),
		doc: "the garbage collector's target: a large request allocates fast, and collections at the runtime's default of 100 take a core's share from every other tenant's requests; `GOMEMLIMIT` bounds the heap all the same"},

	// Tracing: OpenTelemetry's own variables, read together by telemetry.ReadTraceConfig.
	{env: "OTEL_TRACES_EXPORTER", defDoc: "off", field: asRead, check: readTrace,
		doc: "`otlp`, `console` (spans on stderr) or `none`. Tracing is off unless this names an exporter or an OTLP endpoint is set"},
	{env: "OTEL_EXPORTER_OTLP_ENDPOINT", defDoc: "none", field: asRead,
		doc: "where spans go: a base URL (`/v1/traces` is added for HTTP); setting it turns tracing on"},
	{env: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", defDoc: "none", field: asRead,
		doc: "the traces URL as is, instead of the base URL"},
	{env: "OTEL_EXPORTER_OTLP_PROTOCOL", def: telemetry.ProtocolHTTPProtobuf, field: asRead,
		doc: "or `grpc`"},
	{env: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", defDoc: "`OTEL_EXPORTER_OTLP_PROTOCOL`", field: asRead,
		doc: "the same, for traces only"},
	{env: "OTEL_EXPORTER_OTLP_HEADERS", defDoc: "none", secret: true,
		doc: "read by the OTLP exporter itself, as the OpenTelemetry specification says, like `_CERTIFICATE`, `_TIMEOUT`, `_COMPRESSION` and their `_TRACES_` forms"},
	{env: "OTEL_SERVICE_NAME", defDoc: "`mnemos` for `all`, else `mnemos-<target>`", field: serviceNameField,
		doc: "the service in traces"},
	{env: "OTEL_RESOURCE_ATTRIBUTES", defDoc: "none", field: asRead,
		doc: "more resource attributes, e.g. `deployment.environment.name=prod`"},
	{env: "OTEL_TRACES_SAMPLER", def: "parentbased_always_on", field: asRead,
		doc: "`always_on`, `always_off`, `traceidratio`, `parentbased_*`"},
	{env: "OTEL_TRACES_SAMPLER_ARG", defDoc: "`1`", field: asRead,
		doc: "the sampler's ratio"},
	{env: "OTEL_SDK_DISABLED", def: "false", field: asRead,
		doc: "`true` turns tracing off whatever else is set"},

	// Test hooks of the fault-injection tests (pkg/faults)
	{env: "MNEMOS_FAULT_CRASH_AFTER_COMMIT", defDoc: "off", field: faultPoints(func(c *Config) *faults.Points { return &c.CrashAfterCommit }),
		doc: "tests only: `<consumer>:<n>` exits the process right after the n-th message the consumer handled (committed), before its acknowledgement"},
	{env: "MNEMOS_FAULT_CRASH_AFTER_PUBLISH", defDoc: "off", field: faultPoints(func(c *Config) *faults.Points { return &c.CrashAfterPublish }),
		doc: "tests only: `outbox-relay:<n>` exits right after the n-th batch the outbox relay published, before its rows are deleted"},
}

// embedTargets are the targets that embed: the embedder, and the gateway,
// which embeds search queries.
var embedTargets = []string{TargetGateway, TargetEmbedder}

// limitTargets are the targets that admit turn events against the limits.
var limitTargets = []string{TargetGateway, TargetTokenAccounting}

// modelTargets are the targets that call a model.
func modelTargets() []string {
	var out []string
	for _, t := range targetTable {
		if t.needsModel {
			out = append(out, t.name)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Fields

func text(get func(c *Config) *string) field {
	return field{
		parse: func(c *Config, v string) error { *get(c) = v; return nil },
		show:  func(c *Config) string { return *get(c) },
	}
}

// asRead keeps the text for a check that reads several variables together
// (Config.vars holds every variable as read).
var asRead = field{parse: func(*Config, string) error { return nil }}

// serviceNameField shows the service name tracing uses.
var serviceNameField = field{parse: asRead.parse, show: func(c *Config) string { return c.Trace.ServiceName }}

// providerField shows the provider the keys chose when none is named.
var providerField = func() field {
	f := oneOf(func(c *Config) *string { return &c.LLM.Provider }, "", "anthropic", "openai", "builtin")
	f.show = func(c *Config) string { return c.LLM.Kind() }
	return f
}()

func oneOf(get func(c *Config) *string, allowed ...string) field {
	words := slices.DeleteFunc(slices.Clone(allowed), func(w string) bool { return w == "" })
	return field{
		parse: func(c *Config, v string) error {
			if !slices.Contains(allowed, v) {
				return fmt.Errorf("want %s", orList(words))
			}
			*get(c) = v
			return nil
		},
		show: func(c *Config) string { return *get(c) },
	}
}

func hostPort(get func(c *Config) *string, example string) field {
	return field{
		parse: func(c *Config, v string) error {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("want host:port, such as %s", example)
			}
			*get(c) = v
			return nil
		},
		show: func(c *Config) string { return *get(c) },
	}
}

func positive[T int | int32 | int64](get func(c *Config) *T) field {
	return field{
		parse: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 || int64(T(n)) != n {
				return errors.New("want a positive integer")
			}
			*get(c) = T(n)
			return nil
		},
		show: func(c *Config) string { return strconv.FormatInt(int64(*get(c)), 10) },
	}
}

// limit is a number of which 0 means no limit.
func limit[T int | float64](get func(c *Config) *T) field {
	return field{
		parse: func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
				return errors.New("want 0 (no limit) or a positive number")
			}
			*get(c) = T(f)
			return nil
		},
		show: func(c *Config) string { return number(float64(*get(c))) },
	}
}

// duration is a duration of at least least (more than 0 for time.Nanosecond).
func duration(get func(c *Config) *time.Duration, least time.Duration, example string) field {
	want := "want a duration such as " + example
	if least > time.Nanosecond {
		want = fmt.Sprintf("want a duration of at least %s, such as %s", durationText(least), example)
	}
	return field{
		parse: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < least {
				return errors.New(want)
			}
			*get(c) = d
			return nil
		},
		show: func(c *Config) string { return durationText(*get(c)) },
	}
}

func workers(get func(c *Config) *Consumer) field {
	return positive(func(c *Config) *int { return &get(c).Workers })
}

func maxDeliver(get func(c *Config) *Consumer) field {
	return positive(func(c *Config) *int { return &get(c).MaxDeliver })
}

// lease is how long a claim lasts without renewal: at least a second.
func lease(get func(c *Config) *time.Duration) field { return duration(get, time.Second, "2m") }

func faultPoints(get func(c *Config) *faults.Points) field {
	return field{
		parse: func(c *Config, v string) error {
			p, err := faults.Parse(v)
			*get(c) = p
			return err
		},
		show: func(c *Config) string {
			var parts []string
			for _, point := range sortedKeys(*get(c)) {
				parts = append(parts, point+":"+strconv.Itoa((*get(c))[point]))
			}
			return strings.Join(parts, ",")
		},
	}
}

var migrateField = field{
	parse: func(c *Config, v string) error {
		if v == "" {
			c.Migrate = c.Target == TargetAll && ownerKnown(c)
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return errors.New("want true or false")
		}
		c.Migrate = b
		return nil
	},
	show: func(c *Config) string { return strconv.FormatBool(c.Migrate) },
}

// devKeyOff as MNEMOS_DEV_API_KEY creates no development tenant.
const devKeyOff = "off"

var devKeyField = field{
	parse: func(c *Config, v string) error {
		if v == devKeyOff {
			v = "" // no development tenant
		}
		c.DevAPIKey = v
		return nil
	},
	show: func(c *Config) string { return cmp.Or(c.DevAPIKey, devKeyOff) },
}

// embedURLField reads the endpoint's base URL: empty, or an absolute URL.
var embedURLField = field{
	parse: func(c *Config, v string) error {
		if v != "" {
			if u, err := url.Parse(v); err != nil || u.Scheme == "" || u.Host == "" {
				return errors.New("want an absolute URL such as https://api.openai.com/v1")
			}
		}
		c.Embed.BaseURL = v
		return nil
	},
	show: func(c *Config) string { return c.Embed.BaseURL },
}

// embedDimensionsField reads a positive length; empty takes the model's.
var embedDimensionsField = field{
	parse: func(c *Config, v string) error {
		if v == "" {
			c.Embed.Dimensions = 0
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 16384 {
			return errors.New("want a positive integer up to 16384, or nothing for the model's")
		}
		c.Embed.Dimensions = n
		return nil
	},
	show: func(c *Config) string {
		if c.Embed.Dimensions == 0 {
			return ""
		}
		return strconv.Itoa(c.Embed.Dimensions)
	},
}

var logLevelField = field{
	parse: func(c *Config, v string) error {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return errors.New("want debug, info, warn or error")
		}
		return nil
	},
	show: func(c *Config) string { return strings.ToLower(c.LogLevel.String()) },
}

var llmModelField = field{
	parse: func(c *Config, v string) error {
		c.LLM.Anthropic.Model, c.LLM.OpenAI.Model = v, v
		return nil
	},
	show: func(c *Config) string { return c.LLM.Anthropic.Model },
}

// taskModel is the model of one task; both providers share the map.
func taskModel(task llm.Task) field {
	return field{
		parse: func(c *Config, v string) error {
			if v != "" {
				c.LLM.Anthropic.Models[task] = v
			}
			return nil
		},
		show: func(c *Config) string { return c.LLM.Anthropic.Models[task] },
	}
}

var llmTimeoutField = func() field {
	f := duration(func(c *Config) *time.Duration { return &c.LLM.Anthropic.Timeout }, time.Nanosecond, "2m")
	parse := f.parse
	f.parse = func(c *Config, v string) error {
		err := parse(c, v)
		c.LLM.OpenAI.Timeout = c.LLM.Anthropic.Timeout
		return err
	}
	return f
}()

// llmPricesField reads MNEMOS_LLM_PRICES over the list prices.
var llmPricesField = field{
	parse: func(c *Config, v string) error {
		c.LLMPrices = llm.DefaultPrices()
		if strings.TrimSpace(v) == "" {
			return nil
		}
		var own llm.Prices
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&own); err != nil {
			return fmt.Errorf("want a JSON object of prices: %w", err)
		}
		if err := own.Validate(); err != nil {
			return err
		}
		c.LLMPrices = c.LLMPrices.With(own)
		return nil
	},
	show: func(c *Config) string {
		if c.vars["MNEMOS_LLM_PRICES"] == "" {
			return "the list prices"
		}
		return c.vars["MNEMOS_LLM_PRICES"]
	},
}

// ---------------------------------------------------------------------------
// Checks across variables

func adminOwnPort(c *Config) error {
	if _, port, _ := net.SplitHostPort(c.AdminAddr); c.AdminAddr == c.HTTPAddr && port != "0" {
		return fmt.Errorf("MNEMOS_ADMIN_ADDR=%q is MNEMOS_HTTP_ADDR too: the operator listener needs a port of its own", c.AdminAddr)
	}
	return nil
}

// ownerKnown: the schema owner's URL is set, or is the local default.
func ownerKnown(c *Config) bool { return c.MigrateDatabaseURL != "" || c.DatabaseURL == "" }

func migrateNeedsOwner(c *Config) error {
	if c.Migrate && !ownerKnown(c) {
		return errors.New("MNEMOS_MIGRATE=true needs MNEMOS_MIGRATE_DATABASE_URL, the schema owner's URL (MNEMOS_DATABASE_URL is the services' role, which may not migrate)")
	}
	return nil
}

func natsURLRequired(c *Config) error {
	if c.NATSURL == "" && c.Target != TargetAll {
		return fmt.Errorf("MNEMOS_NATS_URL is required for -target=%s (only -target=all embeds NATS)", c.Target)
	}
	return nil
}

func natsListenLoopback(c *Config) error {
	switch {
	case c.NATSListen == "":
		return nil
	case c.NATSURL != "":
		return errors.New("MNEMOS_NATS_LISTEN opens a port on the embedded NATS server, which MNEMOS_NATS_URL replaces: set one or the other")
	}
	if err := loopbackAddr(c.NATSListen); err != nil {
		return fmt.Errorf("MNEMOS_NATS_LISTEN=%q: %w", c.NATSListen, err)
	}
	return nil
}

func natsAuthCalloutValid(c *Config) error {
	if c.NATSAuthCallout == "" {
		return nil
	}
	if _, err := natsAuthIssuer(c.NATSAuthCallout); err != nil {
		return fmt.Errorf("MNEMOS_NATS_AUTH_CALLOUT: %w", err)
	}
	if c.NATSURL == "" && c.NATSListen == "" {
		return errors.New("MNEMOS_NATS_AUTH_CALLOUT lets publishers into NATS, and the embedded server has no port for them: set MNEMOS_NATS_LISTEN")
	}
	return nil
}

func natsSystemURLValid(c *Config) error {
	if c.NATSSystemURL != "" && (c.NATSURL == "" || c.NATSAuthCallout == "") {
		return errors.New("MNEMOS_NATS_SYSTEM_URL closes connections for MNEMOS_NATS_AUTH_CALLOUT on the server of MNEMOS_NATS_URL: set both (the embedded server needs none)")
	}
	return nil
}

// natsAuthIssuer is the account key pair of seed.
func natsAuthIssuer(seed string) (nkeys.KeyPair, error) {
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		return nil, errors.New("not an nkey seed")
	}
	pub, err := kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicAccountKey(pub) {
		return nil, errors.New("want the seed of an account key (SA…), as `nsc generate nkey --account` prints")
	}
	return kp, nil
}

func replicasAtMost5(c *Config) error {
	if c.StreamReplicas > 5 {
		return fmt.Errorf("MNEMOS_STREAM_REPLICAS=%d: at most 5", c.StreamReplicas)
	}
	return nil
}

func limitsWork(c *Config) error {
	if err := c.Limits.Validate(); err != nil {
		return errors.New("MNEMOS_LIMIT_*: " + err.Error())
	}
	return nil
}

func providerHasKey(c *Config) error {
	if c.LLM.Provider == "anthropic" && c.LLM.Anthropic.APIKey == "" {
		return errors.New("MNEMOS_LLM_PROVIDER=anthropic needs ANTHROPIC_API_KEY")
	}
	return nil
}

// readTrace makes the tracing configuration of the OTEL_* variables.
func readTrace(c *Config) error {
	var errs []string
	c.Trace, errs = telemetry.ReadTraceConfig(func(name string) string { return c.vars[name] }, serviceName(c.Target))
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// ---------------------------------------------------------------------------
// Text

// durationText writes a duration the way people do: 2m, not 2m0s.
// natsSync reads MNEMOS_NATS_SYNC: always, an interval, or empty (the
// server's default).
func natsSync(v string) (interval time.Duration, always bool, err error) {
	switch v {
	case "":
		return 0, false, nil
	case "always":
		return 0, true, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Millisecond {
		return 0, false, fmt.Errorf("MNEMOS_NATS_SYNC=%q: want always, or an interval of at least 10ms such as 10s", v)
	}
	return d, false, nil
}

func natsSyncValid(c *Config) error {
	_, _, err := natsSync(c.NATSSync)
	return err
}

func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func number(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// orList writes "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// consoleSecretLength refuses a console secret too short to sign with.
func consoleSecretLength(c *Config) error {
	if n := len(c.ConsoleSecret); n > 0 && n < console.MinSecretBytes {
		return fmt.Errorf("MNEMOS_CONSOLE_SECRET is %d bytes; give at least %d (e.g. openssl rand -base64 32)", n, console.MinSecretBytes)
	}
	return nil
}
