package gateway

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

// eventLimit is the largest turn event the gateway reads: its own limit, or
// the bus's max payload when smaller.
func (g *Gateway) eventLimit() int64 {
	limit := int64(g.cfg.MaxEventBytes)
	if mp := g.bus.MaxPayload(); mp > 0 && mp < limit {
		limit = mp
	}
	return limit
}

// renderAdmission admits the render of a session's context by its stored
// size (reserve): a refusal, or an error when the session cannot be sized.
// A heavy render's ctx carries the pacer it renders by (Config.HeavyWork,
// HeavyRest).
func (g *Gateway) renderAdmission(ctx context.Context, tenant, id string) (_ context.Context, release func(), f *httpapi.Error, err error) {
	var size store.ContextSize
	err = g.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		size, err = tx.ContextSize(ctx, id)
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	cost := renderCost(size)
	release, f = g.admission.Reserve(ctx, cost, fmt.Sprintf("the context of session %s (%d messages, %d KiB stored)", id, size.Messages, size.Bytes>>10))
	if f != nil {
		return nil, nil, f, nil
	}
	if g.admission.IsHeavy(cost) && g.cfg.HeavyRest > 0 {
		ctx = cpu.WithPacer(ctx, cpu.NewPacer(g.cfg.HeavyWork, g.cfg.HeavyRest))
	}
	return ctx, release, nil, nil
}

// renderCost estimates what rendering a context of size holds at its peak.
func renderCost(size store.ContextSize) int64 {
	return renderBase + size.Messages*renderPerMessage + size.Bytes*renderPerByte
}

// observeInflight reports the bytes in flight on a gauge.
func (g *Gateway) observeInflight(m metric.Meter) error {
	_, err := m.Int64ObservableGauge("mnemos.gateway.inflight_bytes",
		metric.WithDescription("Bytes the gateway's requests in flight expect to hold, against MNEMOS_MAX_INFLIGHT_BYTES."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(g.admission.Inflight())
			return nil
		}))
	if err != nil {
		return err
	}
	return g.observeContextCache(m)
}

// observeContextCache reports the context cache's reads, by whether the
// session was cached, the messages it fetched, and the bytes it holds.
func (g *Gateway) observeContextCache(m metric.Meter) error {
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
		st := g.contexts.Stats()
		o.ObserveInt64(reads, st.Hits, metric.WithAttributes(attribute.String("result", "hit")))
		o.ObserveInt64(reads, st.Misses, metric.WithAttributes(attribute.String("result", "miss")))
		o.ObserveInt64(fetched, st.Fetched)
		o.ObserveInt64(held, st.Bytes)
		return nil
	}, reads, fetched, held)
	return err
}
