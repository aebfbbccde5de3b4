package tokenaccounting

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/tokens"
)

// states are the threshold states the sessions gauge always reports, zero
// included, so a dashboard's series exist from the start.
var states = []tokens.State{tokens.StateOK, tokens.StateWarning, tokens.StateError, tokens.StateAutoCompact, tokens.StateBlocking}

// sessionsGauge reports mnemos.sessions{state} from a count the accountant
// refreshes every Config.SessionsCountInterval: one grouped count of the
// sessions table per period, whatever the scrape rate.
type sessionsGauge struct {
	latest atomic.Pointer[map[string]int64]
}

// register makes the gauge observe the latest count until the returned
// registration is unregistered.
func (g *sessionsGauge) register(m metric.Meter) (metric.Registration, error) {
	gauge, err := m.Int64ObservableGauge("mnemos.sessions",
		metric.WithDescription("Sessions by threshold state (ok, warning, error, autocompact, blocking), counted across tenants every period. Every accountant instance reports the same numbers."))
	if err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		counts := g.latest.Load()
		if counts == nil {
			return nil // not counted yet
		}
		for _, st := range states {
			o.ObserveInt64(gauge, (*counts)[string(st)], metric.WithAttributes(attribute.String("state", string(st))))
		}
		return nil
	}, gauge)
}

// CountSessions refreshes the sessions gauge.
func (s *Service) CountSessions(ctx context.Context) error {
	counts, err := s.store.SessionsByState(ctx)
	if err != nil {
		return fmt.Errorf("tokenaccounting.CountSessions: %w", err)
	}
	s.sessions.latest.Store(&counts)
	return nil
}

// countSessionsEvery refreshes the gauge now and every period until ctx ends.
func (s *Service) countSessionsEvery(ctx context.Context, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		if err := s.CountSessions(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("counting sessions by state failed; next period retries", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
