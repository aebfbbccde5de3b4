package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/llmledger"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Ledger prices the agent's rounds and holds its tenant's budget of money
// (llmledger.Ledger).
type Ledger interface {
	AllowAgent(ctx context.Context, tenant string) error
	RecordRound(ctx context.Context, r llmledger.Round) (llmledger.Priced, error)
}

// overBudget answers a request of a tenant whose daily budget of money is
// spent (Ledger.AllowAgent) with the door's error, before anything of it
// goes up, and reports whether it did. When the ledger cannot tell, the
// request goes up: the proxy fails open, as it does when it cannot manage.
func (h *Handler) overBudget(w http.ResponseWriter, r *http.Request, tenant string, d *door) bool {
	if h.cfg.Ledger == nil {
		return false
	}
	ctx := r.Context()
	err := h.cfg.Ledger.AllowAgent(ctx, tenant)
	if err == nil {
		return false
	}
	if !errors.Is(err, llm.ErrBudgetExhausted) {
		h.Log.Warn(d.name+" proxy: the budget could not be read; the request goes up", "tenant", tenant, "err", err)
		return false
	}
	h.countProxy(ctx, proxyOverBudget)
	// The budget holds until the next UTC day: no retry helps. The
	// official SDKs read this header before their retry rules.
	w.Header().Set("X-Should-Retry", "false")
	d.dialect.WriteError(w, d.budgetError(err))
	return true
}

// budgetError is the door's error for a spent budget: the Messages API's
// billing_error (402), which Anthropic answers when an organization's spend
// limit is reached and its clients do not retry; OpenAI's
// insufficient_quota (429), its answer to a spent quota, which the Codex
// CLI stops on rather than retries.
func (d *door) budgetError(err error) *httpapi.Error {
	msg := fmt.Sprintf("Mnemos refused the request: %v; the budget starts again at 00:00 UTC", err)
	if d.openai() {
		return &httpapi.Error{Status: http.StatusTooManyRequests, Code: "insufficient_quota", Message: msg}
	}
	return &httpapi.Error{Status: http.StatusPaymentRequired, Code: "billing_error", Message: msg}
}

// priceUnrecorded prices an answered round that is not recorded to its
// thread (no session, a resend, fail-open, the client's own compaction
// call), off the handler as a recorded round is.
func (h *Handler) priceUnrecorded(bg context.Context, tenant string, req *messagesRequest, sent []byte, rep reply, answered time.Time) {
	if h.cfg.Ledger == nil {
		return
	}
	key := fmt.Sprintf("%s\x00price\x00%p", tenant, req)
	if req.place != nil {
		key = tenant + "\x00" + req.place.thread.ThreadID // after the thread's records
	}
	h.records.run(key, func() { h.priceRound(bg, tenant, req, sent, rep, answered, false) })
}

// priceRound records an answered round in the ledger (Ledger.RecordRound):
// its usage at the tenant's prices, and what the client's own request would
// have cost sent straight. continues says the round continued its thread.
// The costs are counted in mnemos.proxy.cost by door and kind (through,
// straight). A round the ledger could not record is logged: the client
// has its answer.
func (h *Handler) priceRound(bg context.Context, tenant string, req *messagesRequest, sent []byte, rep reply, answered time.Time, continues bool) {
	if h.cfg.Ledger == nil {
		return
	}
	round := llmledger.Round{
		Tenant: tenant, Provider: string(req.door.provider), Model: req.model,
		Usage: llm.Usage{
			InputTokens: rep.Usage.InputTokens, OutputTokens: rep.Usage.OutputTokens,
			CacheReadTokens: rep.Usage.CacheReadInputTokens, CacheWriteTokens: rep.Usage.CacheCreationInputTokens,
		},
		Changed: !bytes.Equal(sent, req.clientBody), SentBytes: int64(len(sent)), ClientBytes: int64(len(req.clientBody)),
		Continues: continues, Caches: req.door.openai() || bytes.Contains(req.clientBody, []byte(`"cache_control"`)),
		At: answered,
	}
	if req.place != nil {
		round.Session = req.place.thread.ThreadID
	}
	p, err := h.cfg.Ledger.RecordRound(bg, round)
	if err != nil {
		h.Log.Error(req.door.name+" proxy: the round was not priced", "tenant", tenant, "session", req.session, "err", err)
		h.metrics.unpriced.Add(bg, 1, metric.WithAttributes(attribute.String("door", req.door.name)))
		return
	}
	door := attribute.String("door", req.door.name)
	h.metrics.cost.Add(bg, int64(p.Through), metric.WithAttributes(door, attribute.String("kind", "through")))
	h.metrics.cost.Add(bg, int64(p.Straight), metric.WithAttributes(door, attribute.String("kind", "straight")))
}
