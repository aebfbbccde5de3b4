// Package contextapi serves a session's context and what shapes it: the
// rendered context and its edits, compactions, pre-flight counts and
// recall. The model proxy renders the sessions it manages through it.
package contextapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/immutable"
	"github.com/mnemos-ai/mnemos/pkg/memory/recall"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Config of the context routes.
type Config struct {
	// ContextWait bounds how long a context request waits for the compaction
	// in flight when the session is at its blocking limit (?wait= overrides).
	ContextWait time.Duration
	// PollInterval is how often a waiting request looks again.
	PollInterval time.Duration
	// LLMProvider names the provider compactions use, shown in answers.
	LLMProvider string
	// Now is the clock micro-compaction's idle rule reads (time.Now when nil).
	Now func() time.Time
	// MaxPreflightBytes bounds a preflight's body.
	MaxPreflightBytes int64
	// A heavy context render is paced (cpu.Pacer): it rests HeavyRest
	// after each HeavyWork of reading and rendering; HeavyRest 0 paces nothing.
	HeavyWork, HeavyRest time.Duration
	// ContextCacheBytes bounds the decoded messages kept between context
	// reads (sessionctx.Cache); negative keeps none.
	ContextCacheBytes int64
}

// ExactCounter counts the estimated part of a preflight exactly, with the
// tenant's upstream (the model proxy does); ok false leaves the estimate.
type ExactCounter interface {
	ExactPreflight(ctx context.Context, r *http.Request, tenant, model string, f accounting.Forecast, prefix *turn.RequestPrefix) (n int64, ok bool)
}

// Handler serves the context routes and renders contexts for the proxy.
type Handler struct {
	httpapi.Base
	cfg       Config
	store     *store.Store
	settings  *tenantcfg.Cache
	admission *httpapi.Admission
	metrics   contextMetrics
	recall    *recall.Recaller // nil: POST recall answers 503
	exact     ExactCounter     // nil: preflights are estimated

	contexts *sessionctx.Cache
	// sections and decisions are what context reads decided for good
	// (decisions.go): frozen memory sections by session and compaction,
	// recall's decisions by session and message.
	sections  *immutable.Cache[[]string]
	decisions *immutable.Cache[store.RecallPrefetch]
}

// New serves st's sessions' contexts under admission.
func New(cfg Config, base httpapi.Base, admission *httpapi.Admission, st *store.Store, settings *tenantcfg.Cache, meter metric.Meter) (*Handler, error) {
	m, err := newMetrics(meter)
	if err != nil {
		return nil, fmt.Errorf("contextapi.New: %w", err)
	}
	h := &Handler{
		Base: base, cfg: cfg, store: st, settings: settings, admission: admission, metrics: m,
		contexts: sessionctx.NewCache(cfg.ContextCacheBytes),
		sections: immutable.New[[]string](immutablesMax), decisions: immutable.New[store.RecallPrefetch](immutablesMax),
	}
	if err := h.observeContextCache(meter); err != nil {
		return nil, fmt.Errorf("contextapi.New: %w", err)
	}
	return h, nil
}

// UseRecall serves POST /v1/sessions/{id}/recall with r. Without it the
// route answers 503: the process has no selector.
func (h *Handler) UseRecall(r *recall.Recaller) { h.recall = r }

// UseExactCounts counts preflights exactly with c where the tenant asks for it.
func (h *Handler) UseExactCounts(c ExactCounter) { h.exact = c }

// Register adds the context routes to mux; the expensive ones are admitted
// (httpapi.Admission) before any body is read.
func (h *Handler) Register(mux httpapi.Mux) {
	expensive := func(scope string, next httpapi.Handler) http.Handler {
		return h.Auth(scope, h.admission.Expensive(httpapi.Mnemos, next))
	}
	preflightBody := func() int64 { return h.cfg.MaxPreflightBytes }
	mux.Handle("POST /v1/sessions/{id}/preflight", expensive(store.ScopeRead, h.admission.WithBody(httpapi.Mnemos, preflightBody, h.preflight)))
	mux.Handle("GET /v1/sessions/{id}/context", expensive(store.ScopeRead, h.getContext))
	mux.Handle("POST /v1/sessions/{id}/context", expensive(store.ScopeRead, h.postContext))
	mux.Handle("POST /v1/sessions/{id}/compact", expensive(store.ScopeIngest, h.postCompact))
	mux.Handle("GET /v1/sessions/{id}/compactions", h.Auth(store.ScopeRead, h.listCompactions))
	mux.Handle("GET /v1/compactions/{id}", h.Auth(store.ScopeRead, h.getCompaction))
	mux.Handle("POST /v1/sessions/{id}/recall", expensive(store.ScopeRead, h.postRecall))
}

type contextMetrics struct {
	contextBlocked    metric.Int64Counter
	microCleared      metric.Int64Counter
	microSaved        metric.Int64Counter
	cacheBreaks       metric.Int64Counter
	manualCompactions metric.Int64Counter
	edits             metric.Int64Counter
	editsSaved        metric.Int64Counter
}

func newMetrics(m metric.Meter) (contextMetrics, error) {
	var cm contextMetrics
	var err error
	if cm.contextBlocked, err = m.Int64Counter("mnemos.context.blocked", metric.WithDescription("Context requests refused because the session stayed at its blocking limit.")); err != nil {
		return cm, err
	}
	if cm.microCleared, err = m.Int64Counter("mnemos.microcompact.cleared", metric.WithDescription("Tool results cleared by micro-compaction.")); err != nil {
		return cm, err
	}
	if cm.microSaved, err = m.Int64Counter("mnemos.microcompact.tokens_saved", metric.WithDescription("Tokens micro-compaction took out of contexts.")); err != nil {
		return cm, err
	}
	if cm.cacheBreaks, err = m.Int64Counter("mnemos.context.cache_breaks", metric.WithDescription("Contexts that no longer start with the previous one, by kind: expected when a compaction or micro-compaction explains it, else unexpected.")); err != nil {
		return cm, err
	}
	if cm.manualCompactions, err = m.Int64Counter("mnemos.compactions.manual_requested", metric.WithDescription("Manual compactions requested through the API.")); err != nil {
		return cm, err
	}
	if cm.edits, err = m.Int64Counter("mnemos.context.edits", metric.WithDescription("What context-management edits cut, by kind: tool_result, tool_input, thinking (assistant messages).")); err != nil {
		return cm, err
	}
	if cm.editsSaved, err = m.Int64Counter("mnemos.context.edits.tokens_saved", metric.WithDescription("Tokens context-management edits took out of contexts.")); err != nil {
		return cm, err
	}
	return cm, nil
}
