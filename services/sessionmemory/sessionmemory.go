// Package sessionmemory is the session-memory service (see docs/compaction.md). On each
// turn.accounted it decides whether the session's rolling notes are due for
// an update (the gate: the first at 10,000 tokens, then after 5,000 more
// with 3 tool calls or a response without any) and runs it: the model, or
// the builtin writer, reads the current notes and the messages since the
// last one they cover and answers with edits, which are checked against the
// notes' fixed structure before they are stored. One update runs at a time
// per session, across every replica: a claim in Postgres with a lease, and
// requests that arrive meanwhile are coalesced into one trailing run. Each
// stored update is announced as session_memory.updated through the outbox.
// The compactor reads the notes as a ready-made summary.
package sessionmemory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	mnemosturn "github.com/mnemos-ai/mnemos/pkg/turn"
)

// Config of the session-memory target.
type Config struct {
	// Workers handle turn.accounted events concurrently.
	Workers int
	// Lease is how long an update's claim lasts without renewal; the worker
	// renews it while the update runs, so a crashed worker's claim runs out
	// and another replica takes the session over.
	Lease time.Duration
	// MaxDeliver bounds redeliveries of an event that keeps failing.
	MaxDeliver int
	// SweepEvery is how often the service looks for trailing runs left
	// behind by a worker that stopped.
	SweepEvery time.Duration
	// MaxInputTokens bounds the messages one update reads (the most recent
	// are kept).
	MaxInputTokens int64
}

// DefaultConfig holds the target's defaults.
func DefaultConfig() Config {
	return Config{
		Workers:        4,
		Lease:          2 * time.Minute,
		MaxDeliver:     8,
		SweepEvery:     30 * time.Second,
		MaxInputTokens: sessionnotes.DefaultMaxInputTokens,
	}
}

// Service is the session-memory service.
type Service struct {
	cfg      Config
	store    *store.Store
	bus      *bus.Bus
	settings *tenantcfg.Cache
	provider llm.Provider
	log      *slog.Logger
	now      func() time.Time
	metrics  serviceMetrics
}

// New builds the service. provider writes the notes (llm.TaskNotes); meter may be nil.
func New(cfg Config, st *store.Store, b *bus.Bus, settings *tenantcfg.Cache, provider llm.Provider, log *slog.Logger, meter metric.Meter) (*Service, error) {
	meter = defaults.Meter(meter)
	m, err := newMetrics(meter)
	if err != nil {
		return nil, fmt.Errorf("sessionmemory.New: %w", err)
	}
	defaults.Fill(&cfg, DefaultConfig())
	return &Service{cfg: cfg, store: st, bus: b, settings: settings, provider: provider, log: log, now: time.Now, metrics: m}, nil
}

// Run consumes turn.accounted events until ctx ends, then drains in-flight
// work. Meanwhile it sweeps for trailing runs whose claim ran out.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("session-memory consuming", "subject", bus.KindTurnAccounted+".>", "workers", s.cfg.Workers, "provider", s.provider.Name())
	return s.bus.Serve(ctx, bus.Service{
		Name: "session-memory",
		Consumers: []bus.Consumer{{
			Spec: bus.ConsumerSpec{
				Stream:        bus.StreamEvents,
				Durable:       "session-memory",
				FilterSubject: bus.KindTurnAccounted + ".>",
				Workers:       s.cfg.Workers,
				MaxDeliver:    s.cfg.MaxDeliver,
				AckWait:       s.cfg.Lease,
				Classify:      bus.TransientIf(store.IsUnavailable),
			},
			Handler: s.Handle,
		}},
		Loops: []func(context.Context){s.sweepLoop},
	})
}

// sweepLoop runs Sweep every SweepEvery until ctx ends.
func (s *Service) sweepLoop(ctx context.Context) {
	sweep := time.NewTicker(s.cfg.SweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweep.C:
			if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("notes sweep failed; the next tick retries", "err", err)
			}
		}
	}
}

// Handle is the bus handler for one turn.accounted message.
func (s *Service) Handle(ctx context.Context, m bus.Message) error {
	return events.Handler(s.bus, s.handle)(ctx, m)
}

func (s *Service) handle(ctx context.Context, m bus.Message, ev events.TurnAccounted) error {
	tenant, session := ev.Address()
	set, err := s.settings.For(ctx, tenant)
	if err != nil {
		return fmt.Errorf("sessionmemory: settings of %s: %w", tenant, err)
	}
	if !set.SessionMemory.Enabled {
		return nil
	}
	if ev.AgentID != "" && ev.AgentID != mnemosturn.MainAgent && !set.SessionMemory.Subagents {
		return nil // notes follow the main agent (session_memory.subagents)
	}
	turn := store.NotesTurn{Seq: ev.Seq, Tokens: ev.Tokens.Count, ToolCallsTotal: ev.ToolCallsTotal, ToolCalls: ev.ToolCalls}
	owner, claimed, err := s.admit(ctx, tenant, session, turn, set.SessionMemory)
	if err != nil || !claimed {
		return err
	}
	return s.run(ctx, tenant, session, owner, set, m.InProgress)
}

// Decision is what the update gate decides for one turn.
type Decision struct {
	// Due means an update should run now.
	Due bool
	// Rebase means the count fell below the mark (a compaction, or
	// micro-compaction, took tokens out): growth is measured from the
	// turn's count from now on.
	Rebase bool
}

// Decide is the update gate (see docs/compaction.md) for a turn, given where the last
// update (or attempt) left the mark:
//   - a turn the last update already read (seq at or below the mark's) is
//     never due;
//   - before the first update, a turn is due once the count reaches
//     InitTokens;
//   - after it, a turn is due when the count grew by UpdateTokens since the
//     mark AND either UpdateToolCalls tool calls were made since the mark or
//     the turn's response made none. Growth is always required.
//
// A failed or rejected update moves the mark too, so it is tried again only
// after the same growth.
func Decide(mark store.NotesMark, t store.NotesTurn, set tenantcfg.SessionMemory) Decision {
	switch {
	case !mark.Attempted:
		return Decision{Due: t.Tokens >= set.InitTokens}
	case t.Seq <= mark.Seq:
		return Decision{}
	case t.Tokens < mark.Tokens:
		return Decision{Rebase: true}
	}
	grew := t.Tokens-mark.Tokens >= set.UpdateTokens
	tools := t.ToolCallsTotal-mark.ToolCalls >= set.UpdateToolCalls || t.ToolCalls == 0
	return Decision{Due: grew && tools}
}

// admit runs the gate for a turn under the session's notes row lock and,
// when an update is due, either claims it (claimed, with the claim's owner)
// or, when one is running, coalesces the turn into its trailing run.
func (s *Service) admit(ctx context.Context, tenant, session string, t store.NotesTurn, set tenantcfg.SessionMemory) (owner string, claimed bool, err error) {
	coalesced := false
	err = s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		coalesced, claimed, owner = false, false, ""
		n, err := tx.LockNotes(ctx, session)
		if err != nil {
			return err
		}
		d := Decide(n.Mark, t, set)
		if err := tx.ObserveNotesTurn(ctx, session, t.Seq, d.Rebase, t.Tokens); err != nil {
			return err
		}
		if !d.Due {
			return nil
		}
		owner = uuid.NewString()
		ok, err := tx.ClaimNotesUpdate(ctx, session, owner, s.now().Add(s.cfg.Lease))
		if err != nil {
			return err
		}
		if !ok {
			coalesced = true
			return tx.MarkNotesPending(ctx, session, t)
		}
		claimed = true
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("sessionmemory: admit turn %d of %s/%s: %w", t.Seq, tenant, session, err)
	}
	if coalesced {
		s.metrics.update(ctx, OutcomeCoalesced)
	}
	return owner, claimed, nil
}

// errClaimLost means another worker took the session's update over (this
// one's lease ran out): this worker's result is dropped.
var errClaimLost = errors.New("the notes update's claim was lost")

// Outcomes of updates, the values of mnemos_session_notes_updates_total{outcome}.
const (
	// OutcomeUpdated: new notes were stored.
	OutcomeUpdated = "updated"
	// OutcomeRejected: the answer broke the notes' structure; the notes stay.
	OutcomeRejected = "rejected"
	// OutcomeFailed: the model call failed; the notes stay.
	OutcomeFailed = "failed"
	// OutcomeCoalesced: a request folded into the trailing run of an update
	// already running.
	OutcomeCoalesced = "coalesced"
)
