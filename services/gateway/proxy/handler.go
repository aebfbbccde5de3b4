// Package proxy is the model proxy: the Messages API, POST /v1/messages and
// /v1/messages/count_tokens, wire-compatible with Anthropic's, and OpenAI's
// Responses and Chat Completions (door.go), so an agent gets Mnemos by
// changing its base URL. A request that names a session (door.sessionOf)
// is managed on the way up — what the session's compaction replaced, the previews of
// offloaded results, micro-compaction and recall, as GET /context renders
// them, then the messages the client added since — and its round is
// published on the way back as a turn event with the upstream's usage, so
// accounting, notes, extraction and compaction run as for any turn. A
// request without a session goes through as sent. When Postgres or NATS
// fails, the request goes through unmanaged (fail-open) and is counted.
package proxy

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/immutable"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/ttlcache"
	"github.com/mnemos-ai/mnemos/services/gateway/contextapi"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Config of the proxy.
type Config struct {
	// Upstream serves the tenants that have none of their own;
	// UpstreamClient sends requests to it (it must not time out a long
	// stream); MaxMessagesBytes bounds a request's body.
	Upstream       Upstream
	UpstreamClient *http.Client
	// UpstreamOpenAI serves the OpenAI routes of the tenants that have no
	// OpenAI upstream of their own.
	UpstreamOpenAI   Upstream
	MaxMessagesBytes int64
	// ContextWait bounds how long a managed request waits for the
	// compaction it asks for before its call.
	ContextWait time.Duration
	// UpstreamCacheTTL is how long a tenant's upstream is kept before it is
	// read again.
	UpstreamCacheTTL time.Duration
	// Ledger, when set, prices every answered round and refuses the rounds
	// of a tenant whose daily budget of money is spent (ledger.go).
	Ledger Ledger
}

// Contexts renders the sessions the proxy manages (contextapi.Handler).
type Contexts interface {
	Render(ctx context.Context, tenant, session string, set tenantcfg.Settings, ahead contextapi.Ahead, gate *contextapi.Gate) (contextapi.Rendered, contextapi.Encoded, error)
	CompactBeforeCall(ctx context.Context, tenant, session string, wait time.Duration, instructions string) (store.Compaction, error)
}

// Handler serves the proxy's routes.
type Handler struct {
	httpapi.Base
	cfg       Config
	store     *store.Store
	settings  *tenantcfg.Cache
	admission *httpapi.Admission
	contexts  Contexts
	metrics   proxyMetrics
	upstreams *ttlcache.Cache[Upstream] // provider and tenant → the tenant's upstream
	// canons and unchanged are the proxy's verdicts on client messages
	// (messages_digest.go): the canonical digest of each that decodes
	// (threads.go), and whether a rendering is the client's message.
	canons    *memo[digest]
	unchanged *verdicts
	// itemKeys are the OriginalKeys of OpenAI clients' items, by their
	// digests (openaiInput.originalsOf).
	itemKeys *memo[string]
	// tips are where each conversation's last recorded round left its
	// thread, by the chained digest of its first message (threads.go).
	tips *memo[threadTip]
	// prefixCounts are the exact sizes of system prompts and tools an
	// upstream counted for exact preflights (preflight_exact.go), which a
	// prefix's hash names for good.
	prefixCounts *immutable.Cache[int64]
	// prefixTokens are the sizes of OpenAI requests' prefixes, counted
	// by the model's tokenizer (openaiPrefix), by their hash.
	prefixTokens *immutable.Cache[int64]
	// records runs the round records after their answers (rounds.go).
	records roundRecords
}

// prefixCountsMax bounds the exact prefix sizes kept.
const prefixCountsMax = 100_000

// New serves the proxy over st, rendering managed sessions with contexts.
func New(cfg Config, base httpapi.Base, admission *httpapi.Admission, st *store.Store, settings *tenantcfg.Cache, contexts Contexts, meter metric.Meter) (*Handler, error) {
	m, err := newMetrics(meter)
	if err != nil {
		return nil, fmt.Errorf("proxy.New: %w", err)
	}
	return &Handler{
		Base: base, cfg: cfg, store: st, settings: settings, admission: admission, contexts: contexts, metrics: m,
		upstreams: ttlcache.New[Upstream](cfg.UpstreamCacheTTL, 10_000).StaleOnError(tenantcfg.StaleFor),
		canons:    newMemo[digest](verdictLimit), unchanged: newVerdicts(verdictLimit), tips: newMemo[threadTip](tipsLimit),
		itemKeys:     newMemo[string](verdictLimit),
		prefixCounts: immutable.New[int64](prefixCountsMax), prefixTokens: immutable.New[int64](prefixCountsMax),
	}, nil
}

// Register adds the proxy's routes to mux, each answered in its API's
// dialect: the Messages API's, and OpenAI's Responses, Chat Completions
// and model list.
func (h *Handler) Register(mux httpapi.Mux) {
	mux.Handle("POST /v1/messages", h.Keys.Auth(httpapi.Anthropic, httpapi.AgentKey, store.ScopeProxy, h.proxied(messagesDoor)))
	mux.Handle("POST /v1/responses", h.Keys.Auth(httpapi.OpenAI, httpapi.AgentKey, store.ScopeProxy, h.proxied(responsesDoor)))
	mux.Handle("POST /v1/chat/completions", h.Keys.Auth(httpapi.OpenAI, httpapi.AgentKey, store.ScopeProxy, h.proxied(chatDoor)))
	mux.Handle("POST /v1/messages/count_tokens", h.Keys.Auth(httpapi.Anthropic, httpapi.AgentKey, store.ScopeProxy, h.countTokens))
	mux.Handle("GET /v1/models", h.Keys.Auth(httpapi.OpenAI, httpapi.AgentKey, store.ScopeProxy, h.listModels))
}

type proxyMetrics struct {
	proxyRequests  metric.Int64Counter
	cost           metric.Int64Counter
	unpriced       metric.Int64Counter
	exactCounts    metric.Int64Counter
	preflightExact metric.Int64Counter
}

func newMetrics(m metric.Meter) (proxyMetrics, error) {
	var pm proxyMetrics
	var err error
	if pm.proxyRequests, err = m.Int64Counter("mnemos.proxy.requests", metric.WithDescription("Proxied requests (Messages and OpenAI doors), by outcome: managed, passthrough (no session), unmanaged (fail-open), refused (not fail-open), new_agent, branched, client_compacted, client_compaction (the client's own summarization call), retry, upstream_error, client_gone, unrecorded, invalid (refused for its body or session id), over_budget (the tenant's daily budget of money is spent).")); err != nil {
		return pm, err
	}
	if pm.cost, err = m.Int64Counter("mnemos.proxy.cost", metric.WithUnit("{nanodollar}"), metric.WithDescription("What the agent's proxied rounds cost by the tenants' prices, in nano-dollars (10^-9 USD), by door and kind: through (as sent up through Mnemos) or straight (the client's own request, as docs/proxy-cost.md estimates it).")); err != nil {
		return pm, err
	}
	if pm.unpriced, err = m.Int64Counter("mnemos.proxy.unpriced", metric.WithDescription("Answered proxied rounds the ledger could not record, by door.")); err != nil {
		return pm, err
	}
	if pm.exactCounts, err = m.Int64Counter("mnemos.proxy.exact_counts", metric.WithDescription("count_tokens calls the proxy made near the auto-compact threshold (proxy.exact_count_within_percent), by outcome: over or under the estimate, failed (the estimate decided).")); err != nil {
		return pm, err
	}
	if pm.preflightExact, err = m.Int64Counter("mnemos.preflight.exact_counts", metric.WithDescription("Preflights whose estimated part the tenant's upstream counted (proxy.preflight_exact_percent), by outcome: over or under the estimate, failed (the estimate was answered).")); err != nil {
		return pm, err
	}
	return pm, nil
}
