// Package tokenaccounting is the token-accounting service (see docs/token-accounting.md). It
// consumes turn.completed events, stores each session's messages exactly
// once and in seq order, keeps the session's token count, offloads oversized
// tool results, and announces threshold changes, compaction requests and
// accounted turns through the outbox.
package tokenaccounting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Config of the token-accounting target.
type Config struct {
	// MaxEventBytes bounds one encoded turn event.
	MaxEventBytes int
	// GapTimeout is how long an event waits for a missing predecessor before
	// the accountant gives up on the missing seqs and moves on.
	GapTimeout time.Duration
	// Workers handle events concurrently (different sessions in parallel).
	// A handler holds its event until the event's batch commits, so
	// Workers is also the most events a tenant's batches can choose from.
	Workers int
	// HeldBytes bounds the bytes of the events the workers hold at once
	// (bus.ConsumerSpec.MaxBytes): many workers for many small turns, and
	// only a few of the largest.
	HeldBytes int
	// Batch is the most turn events of one tenant applied in one
	// transaction (group commit, see batch.go); 1 applies each on its own.
	// A batch holds at most the events in hand at once, Workers.
	Batch int
	// Lanes is how many of one tenant's batches may be under way at once,
	// each over its own sessions (see batch.go).
	Lanes int
	// MaxDeliver bounds redeliveries of an event that keeps failing.
	MaxDeliver int
	// SessionsCountInterval is how often the sessions are counted by
	// threshold state for the mnemos.sessions gauge.
	SessionsCountInterval time.Duration
	// SessionLockWait is how long an event waits for its session while
	// another transaction holds it; past that it is retried later with a
	// pause (bus.Transient) and holds no connection meanwhile.
	SessionLockWait time.Duration
	// Heavy, when set, are the process's slots for CPU-heavy work, shared
	// with the gateway: an event of at least HeavyBytes is decoded and
	// applied holding one, so one tenant's large turns leave a core for the
	// others' requests.
	Heavy      cpu.Heavy
	HeavyBytes int
	// A heavy event's rows are written paced (cpu.Pacer): the writes
	// rest HeavyRest after each HeavyWork, so the Postgres backend applying
	// them leaves the machine's cores to other tenants' requests; HeavyRest
	// 0 paces nothing.
	HeavyWork, HeavyRest time.Duration
	// Limits admits the events published straight to NATS against their
	// tenant's limits (the gateway admits its own); nil admits everything.
	Limits *limits.Limiter
}

// DefaultConfig holds the documented defaults.
func DefaultConfig() Config {
	return Config{
		MaxEventBytes: turn.DefaultMaxEventBytes,
		GapTimeout:    30 * time.Second,
		Workers:       512,
		HeldBytes:     64 << 20,
		Batch:         64,
		Lanes:         2,
		MaxDeliver:    8,

		SessionLockWait: 200 * time.Millisecond,
		HeavyBytes:      4 << 20,
		HeavyWork:       2 * time.Millisecond,
		HeavyRest:       10 * time.Millisecond,

		SessionsCountInterval: 15 * time.Second,
	}
}

// Service is the accountant.
type Service struct {
	cfg      Config
	settings *tenantcfg.Cache
	store    *store.Store
	bus      *bus.Bus
	log      *slog.Logger
	now      func() time.Time
	metrics  serviceMetrics
	meter    metric.Meter
	sessions sessionsGauge
	batches  batches
}

// New builds the service; settings gives each tenant's thresholds. meter may be nil.
func New(cfg Config, st *store.Store, b *bus.Bus, settings *tenantcfg.Cache, log *slog.Logger, meter metric.Meter) (*Service, error) {
	meter = defaults.Meter(meter)
	m, err := newMetrics(meter)
	if err != nil {
		return nil, fmt.Errorf("tokenaccounting.New: %w", err)
	}
	defaults.Fill(&cfg, DefaultConfig())
	return &Service{cfg: cfg, settings: settings, store: st, bus: b, log: log, now: time.Now, metrics: m, meter: meter}, nil
}

// Run consumes turn events until ctx ends, then drains in-flight work.
func (s *Service) Run(ctx context.Context) error {
	reg, err := s.sessions.register(s.meter)
	if err != nil {
		return fmt.Errorf("tokenaccounting.Run: sessions gauge: %w", err)
	}
	defer reg.Unregister() //nolint:errcheck // only fails on a provider already shut down
	s.log.Info("token-accounting consuming", "subject", bus.KindTurnCompleted+".>", "workers", s.cfg.Workers)
	return s.bus.Serve(ctx, bus.Service{
		Name: "token-accounting",
		Consumers: []bus.Consumer{{
			Spec: bus.ConsumerSpec{
				Stream:        bus.StreamTurns,
				Durable:       "token-accounting",
				FilterSubject: bus.KindTurnCompleted + ".>",
				Workers:       s.cfg.Workers,
				MaxBytes:      s.cfg.HeldBytes,
				MaxDeliver:    s.cfg.MaxDeliver,
				// Postgres, not the event, or another transaction holding
				// the session (a redelivery still being applied, say):
				// pause and try again, holding no connection, spending none
				// of the event's deliveries.
				Classify: bus.TransientIf(func(err error) bool {
					return store.IsUnavailable(err) || errors.Is(err, store.ErrSessionBusy)
				}),
			},
			Handler: s.Handle,
		}},
		Loops: []func(context.Context){
			func(ctx context.Context) { s.countSessionsEvery(ctx, s.cfg.SessionsCountInterval) },
			s.sweepGapsEvery,
		},
		Drain: 30 * time.Second,
	})
}

// sweepGapsEvery runs SweepGaps four times per gap timeout until ctx ends.
func (s *Service) sweepGapsEvery(ctx context.Context) {
	sweep := time.NewTicker(max(s.cfg.GapTimeout/4, 100*time.Millisecond))
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			if err := s.SweepGaps(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("gap sweep failed; next tick retries", "err", err)
			}
		}
	}
}

// Handle is the bus handler for one turn.completed message.
func (s *Service) Handle(ctx context.Context, m bus.Message) error {
	if len(m.Data) >= s.cfg.HeavyBytes {
		release, err := s.cfg.Heavy.Hold(ctx, 10*time.Second, m.InProgress)
		if err != nil {
			return err
		}
		defer release()
		// Decoding and applying a large event takes a core for a while:
		// it gets what the process's other work leaves.
		var pacer *cpu.Pacer
		if s.cfg.HeavyRest > 0 {
			pacer = cpu.NewPacer(s.cfg.HeavyWork, s.cfg.HeavyRest)
		}
		cpu.Background(func() { err = s.handle(ctx, m, pacer) })
		return err
	}
	return s.handle(ctx, m, nil)
}

// handle decodes, admits and applies one turn.completed message. A heavy
// event, with a pacer, is applied on its own, its messages written at the
// pacer's pace.
func (s *Service) handle(ctx context.Context, m bus.Message, pacer *cpu.Pacer) error {
	_, tenant, session, err := s.bus.ParseSubject(m.Subject)
	if err != nil {
		s.metrics.rejected(ctx, "bad_subject")
		return bus.Permanent(fmt.Errorf("subject %q: %w", m.Subject, err))
	}
	ev, err := turn.Decode(m.Data, turn.DecodeOptions{MaxBytes: s.cfg.MaxEventBytes, Tenant: tenant, Session: session})
	if err != nil {
		ie, _ := turn.AsInputError(err)
		if ie != nil {
			s.metrics.rejected(ctx, string(ie.Reason))
			if ie.Reason == turn.ReasonTooLarge {
				s.cfg.Limits.Record(ctx, limits.LimitEventBytes)
			}
		}
		return bus.Permanent(err)
	}
	if err := s.admit(ctx, m, ev); err != nil {
		return err
	}
	if s.cfg.Batch > 1 && pacer == nil {
		err = s.applyBatched(ctx, ev, len(m.Data))
	} else {
		err = s.apply(ctx, ev, len(m.Data), pacer)
	}
	if ie, ok := turn.AsInputError(err); ok {
		s.metrics.rejected(ctx, string(ie.Reason))
		return bus.Permanent(ie) // the dead letter's reason starts with the code, as the decoder's do
	}
	return err
}

// admit counts an event published straight to NATS against its tenant's
// limits. One over a limit is refused: the runner dead-letters it with the
// reason (rate_limited, too_many_sessions) and the session is left as it was,
// so the event may be published again later (with a new Nats-Msg-Id). It is
// not held back instead: the stream and its consumer are shared by every
// tenant, and messages waiting for one tenant's rate would hold up all the
// others. The gateway admits its own events (they carry
// limits.HeaderAdmitted), and a redelivery was admitted at its first delivery.
func (s *Service) admit(ctx context.Context, m bus.Message, ev turn.Event) error {
	if s.cfg.Limits == nil || m.Header.Get(limits.HeaderAdmitted) != "" || m.NumDelivered > 1 {
		return nil
	}
	err := s.cfg.Limits.Admit(ctx, ev.TenantID, ev.SessionID)
	if ex, ok := limits.AsExceeded(err); ok {
		s.metrics.rejected(ctx, ex.Reason)
		return bus.Permanent(ex)
	}
	switch {
	case errors.Is(err, store.ErrUnknownTenant):
		s.metrics.rejected(ctx, string(turn.ReasonUnknownTenant))
		return bus.Permanent(turn.Refuse(turn.ReasonUnknownTenant, "tenant %q does not exist", ev.TenantID))
	case store.IsUnavailable(err):
		return bus.Transient(err)
	}
	return err
}

// SweepGaps moves sessions past seqs that have not arrived within the gap
// timeout, applying the events that waited behind them.
func (s *Service) SweepGaps(ctx context.Context) error {
	stalled, err := s.store.StalledSessions(ctx, s.now().Add(-s.cfg.GapTimeout))
	if err != nil {
		return err
	}
	for _, st := range stalled {
		set, err := s.settings.For(ctx, st.TenantID)
		if err != nil {
			return fmt.Errorf("tokenaccounting.SweepGaps %s: %w", st.TenantID, err)
		}
		applied := 0
		var effects []func()
		err = s.store.InTxWaiting(ctx, st.TenantID, s.cfg.SessionLockWait, func(tx *store.Tx) error {
			sess, err := tx.LockSession(ctx, st.SessionID, turn.MainAgent)
			if err != nil {
				return err
			}
			next, err := tx.NextPendingTurn(ctx, st.SessionID)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			d := s.newDecider(tx, set, map[string]sessionstate.Session{st.SessionID: sess})
			if next.Seq > sess.AppliedSeq+1 {
				// The missing seqs leave no rows: one that still arrives finds
				// its seq behind applied_seq with no turn and is refused as
				// late. The session keeps what it gave up, for the API.
				from, to := sess.AppliedSeq+1, next.Seq-1
				s.metrics.gapSkipped(ctx, to-from+1)
				s.log.Warn("gave up waiting for missing turns", "tenant", st.TenantID, "session", st.SessionID, "from_seq", from, "to_seq", to)
				sess.SkippedSeqs += to - from + 1
				sess.LastSkippedFrom, sess.LastSkippedTo = from, to
				sess.AppliedSeq = to
				d.save(sess)
			}
			// The events that waited are decided as a batch's are.
			if applied, err = d.applyWaiting(ctx, ctx, st.SessionID); err != nil {
				return err
			}
			effects = d.effects
			return d.commit(ctx, nil)
		})
		if errors.Is(err, errNothingPlanned) {
			err = nil
		}
		if errors.Is(err, store.ErrSessionBusy) {
			continue // being applied to now; the next sweep looks again
		}
		if err != nil {
			return fmt.Errorf("tokenaccounting.SweepGaps %s/%s: %w", st.TenantID, st.SessionID, err)
		}
		for _, f := range effects {
			f()
		}
		s.metrics.appliedAfterWaiting(ctx, applied)
	}
	return nil
}

func updateSessionInfo(sess *sessionstate.Session, ev turn.Event) {
	sess.AgentID = ev.Agent()
	if ev.Model != "" {
		sess.Model = ev.Model
	}
	if ev.ContextWindow > 0 {
		sess.ContextWindow = ev.ContextWindow
	}
	if ev.MaxOutputTokens > 0 {
		sess.MaxOutputTokens = ev.MaxOutputTokens
	}
	if len(ev.MemoryScope) > 0 {
		sess.MemoryScope = ev.MemoryScope
	}
}

// toolResultID names a stored tool result (accounting.ToolResultID).
func toolResultID(tenant, session, toolUseID string) string {
	return accounting.ToolResultID(tenant, session, toolUseID)
}
