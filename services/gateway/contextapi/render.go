package contextapi

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/services/gateway/httpapi"
)

// Factors of the estimates, measured on the renders and turns of the
// hostile suite (tests/hostile).
const (
	// renderPerByte and renderPerMessage: a context holds each stored
	// message as read, decoded, rendered and encoded; many tiny messages
	// cost their structures more than their bytes.
	renderPerByte    = 4
	renderPerMessage = 1536
	// renderBase covers what every render holds whatever the session: the
	// memory section, the recall candidates, the encoder's buffers.
	renderBase = 256 << 10
)

// renderAdmission admits the render of a session's context by its stored
// size (reserve): a refusal, or an error when the session cannot be sized.
// A heavy render gets the pacer it renders by (Config.HeavyWork,
// HeavyRest); any other, nil.
func (h *Handler) renderAdmission(ctx context.Context, tenant, id string) (pacer *cpu.Pacer, release func(), f *httpapi.Error, err error) {
	var size store.ContextSize
	err = h.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		size, err = tx.ContextSize(ctx, id)
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	cost := renderCost(size)
	release, f = h.admission.Reserve(ctx, cost, fmt.Sprintf("the context of session %s (%d messages, %d KiB stored)", id, size.Messages, size.Bytes>>10))
	if f != nil {
		return nil, nil, f, nil
	}
	if h.admission.IsHeavy(cost) && h.cfg.HeavyRest > 0 {
		pacer = cpu.NewPacer(h.cfg.HeavyWork, h.cfg.HeavyRest)
	}
	return pacer, release, nil, nil
}

// renderCost estimates what rendering a context of size holds at its peak.
func renderCost(size store.ContextSize) int64 {
	return renderBase + size.Messages*renderPerMessage + size.Bytes*renderPerByte
}

// observeContextCache reports the context cache's reads, by whether the
// session was cached, the messages it fetched, and the bytes it holds.
func (h *Handler) observeContextCache(m metric.Meter) error {
	reads, err := m.Int64ObservableCounter("mnemos.gateway.context_cache.reads",
		metric.WithDescription("Context reads by whether the session's messages were cached (result=hit) or read whole (result=miss)."))
	if err != nil {
		return err
	}
	fetched, err := m.Int64ObservableCounter("mnemos.gateway.context_cache.fetched_messages",
		metric.WithDescription("Messages context reads fetched from Postgres; a cached session fetches only those stored since."))
	if err != nil {
		return err
	}
	held, err := m.Int64ObservableGauge("mnemos.gateway.context_cache.bytes",
		metric.WithDescription("Bytes the context cache holds, against ContextCacheBytes (MNEMOS_CONTEXT_CACHE_BYTES)."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := h.contexts.Stats()
		o.ObserveInt64(reads, st.Hits, metric.WithAttributes(attribute.String("result", "hit")))
		o.ObserveInt64(reads, st.Misses, metric.WithAttributes(attribute.String("result", "miss")))
		o.ObserveInt64(fetched, st.Fetched)
		o.ObserveInt64(held, st.Bytes)
		return nil
	}, reads, fetched, held)
	return err
}
