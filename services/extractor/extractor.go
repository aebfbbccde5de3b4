// Package extractor is the extractor service (see docs/memory.md): after each user
// turn of a session's main agent it decides whether to look for long-term
// memories in what was said since it last looked, and when so runs a
// bounded tool loop in which the model (or the builtin extractor) reads and
// writes the memories of the session's write scope.
//
// Per session a cursor in Postgres records how far the extractor has
// looked. An eligible turn (turn.accounted of the main agent that closes a
// user turn) is skipped, with the cursor moved past it, when the main agent
// wrote memory itself since the cursor; otherwise a run is owed to the
// session once N eligible turns (a tenant setting, default 1) came after
// the cursor.
// Runs go per write scope, one at a time across every replica
// (pkg/singlerun): a turn whose scope is being worked on is coalesced into
// the scope's one trailing run, which reads the newest state. A run works
// through every session of the scope that is owed one. What a run writes
// is announced as memory.saved through the outbox.
package extractor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/singlerun"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Config of the extractor target.
type Config struct {
	// Workers handle turn.accounted events concurrently.
	Workers int
	// Lease is how long a scope's run holds it without renewal; the run
	// renews it (and the message's ack wait) while it works, so a crashed
	// worker's scope is taken over once it runs out.
	Lease time.Duration
	// MaxDeliver bounds redeliveries of an event that keeps failing.
	MaxDeliver int
	// SweepEvery is how often the service looks for trailing runs left
	// behind by a worker that stopped.
	SweepEvery time.Duration
	// DrainTimeout is how long a shutdown waits for the runs under way.
	DrainTimeout time.Duration
	// MaxInputTokens and MaxMessages bound the messages one run reads (the
	// most recent are kept).
	MaxInputTokens int64
	MaxMessages    int
	// ManifestSize is how many memories of the scope the run is shown.
	ManifestSize int
}

// DefaultConfig holds the target's defaults.
func DefaultConfig() Config {
	return Config{
		Workers:        4,
		Lease:          singlerun.DefaultLease,
		MaxDeliver:     8,
		SweepEvery:     30 * time.Second,
		DrainTimeout:   60 * time.Second,
		MaxInputTokens: 30_000,
		MaxMessages:    500,
		ManifestSize:   200,
	}
}

// Kind names the extractor's runs (one per write scope) in run_leases.
const Kind = "extractor"

// Outcomes, the values of mnemos_extractor_runs_total{outcome}. Runs end
// saved, nothing, capped, failed or skipped_agent_wrote; turns that start
// no run of their own are throttled, coalesced, skipped_agent_wrote or
// no_scope.
const (
	// OutcomeSaved: a run wrote memories.
	OutcomeSaved = "saved"
	// OutcomeNothing: a run found nothing to save.
	OutcomeNothing = "nothing"
	// OutcomeCapped: the model still called tools on its last allowed turn;
	// what it wrote is kept.
	OutcomeCapped = "capped"
	// OutcomeFailed: the model call failed; the cursor stays, so the next
	// run reads the same messages again.
	OutcomeFailed = "failed"
	// OutcomeSkippedAgentWrote: the main agent wrote memory itself since
	// the cursor; the cursor moves on without a run.
	OutcomeSkippedAgentWrote = "skipped_agent_wrote"
	// OutcomeThrottled: an eligible turn that only counts towards the next
	// run (every_turns above 1).
	OutcomeThrottled = "throttled"
	// OutcomeCoalesced: a turn folded into the trailing run of its scope's
	// run under way.
	OutcomeCoalesced = "coalesced"
	// OutcomeNoScope: the turn names no scope the tenant lets extraction
	// write to.
	OutcomeNoScope = "no_scope"
)

// Service is the extractor service.
type Service struct {
	cfg      Config
	store    *store.Store
	bus      *bus.Bus
	settings *tenantcfg.Cache
	memories *memory.Store
	provider llm.Provider
	runs     *singlerun.Runs
	log      *slog.Logger
	now      func() time.Time
	metrics  serviceMetrics

	stopping chan struct{} // closed when Run begins to shut down
	stopOnce sync.Once
}

// New builds the service. provider extracts (llm.TaskExtraction); meter may be nil.
func New(cfg Config, st *store.Store, b *bus.Bus, settings *tenantcfg.Cache, provider llm.Provider, log *slog.Logger, meter metric.Meter) (*Service, error) {
	meter = defaults.Meter(meter)
	m, err := newMetrics(meter)
	if err != nil {
		return nil, fmt.Errorf("extractor.New: %w", err)
	}
	defaults.Fill(&cfg, DefaultConfig())
	memories, err := memory.NewStore(st, meter, memory.Options{Limits: settings.MemoryLimits})
	if err != nil {
		return nil, fmt.Errorf("extractor.New: %w", err)
	}
	runs, err := singlerun.New(st, singlerun.Config{Kind: Kind, Lease: cfg.Lease, Log: log})
	if err != nil {
		return nil, fmt.Errorf("extractor.New: %w", err)
	}
	return &Service{
		cfg: cfg, store: st, bus: b, settings: settings, memories: memories, provider: provider, runs: runs,
		log: log, now: time.Now, metrics: m, stopping: make(chan struct{}),
	}, nil
}

// Run consumes turn.accounted events until ctx ends, sweeping meanwhile
// for trailing runs left behind. On shutdown it starts no new run, lets
// the runs under way finish (within DrainTimeout; their model calls are
// not cancelled before), and leaves the rest to redelivery and to the
// sweep of another replica.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("extractor consuming", "subject", bus.KindTurnAccounted+".>", "workers", s.cfg.Workers, "provider", s.provider.Name())
	return s.bus.Serve(ctx, bus.Service{
		Name: "extractor",
		Consumers: []bus.Consumer{{
			Spec: bus.ConsumerSpec{
				Stream:        bus.StreamEvents,
				Durable:       "extractor",
				FilterSubject: bus.KindTurnAccounted + ".>",
				Workers:       s.cfg.Workers,
				MaxDeliver:    s.cfg.MaxDeliver,
				AckWait:       s.cfg.Lease,
				Classify:      bus.TransientIf(store.IsUnavailable),
			},
			Handler: events.Handler(s.bus, s.handle),
		}},
		// The sweep's runs, like the handlers', are not cancelled when ctx
		// ends: the loop stops at Stopping and its runs finish within the drain.
		Loops:    []func(context.Context){func(ctx context.Context) { s.sweepLoop(context.WithoutCancel(ctx)) }},
		Stopping: func() { s.stopOnce.Do(func() { close(s.stopping) }) },
		Drain:    s.cfg.DrainTimeout,
	})
}

// sweepLoop runs the trailing runs left behind by stopped workers, every
// SweepEvery, until the service stops.
func (s *Service) sweepLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stopping:
			return
		case <-t.C:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("extractor sweep failed; the next tick retries", "err", err)
		}
	}
}

// Sweep runs the trailing runs whose worker stopped before making them,
// and returns how many it ran.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	return s.runs.Sweep(ctx, s.work, singlerun.Options{Stopping: s.stopping})
}

// errStopping hands an event back for redelivery: the service is
// shutting down and starts no new run.
var errStopping = errors.New("extractor: shutting down; the event is left for redelivery")

// handle looks at one turn.accounted event.
func (s *Service) handle(ctx context.Context, m bus.Message, ev events.TurnAccounted) error {
	tenant, session := ev.Address()
	if !ev.ClosesUserTurn {
		return nil // only finished user turns are looked at
	}
	if ev.AgentID != turn.MainAgent && ev.AgentID != "" && !s.subagents(ctx, tenant) {
		return nil // the main agent's, unless the tenant's extraction.subagents says every agent's
	}
	select {
	case <-s.stopping:
		return errStopping
	default:
	}
	set, err := s.settings.For(ctx, tenant)
	if err != nil {
		return fmt.Errorf("extractor: settings of %s: %w", tenant, err)
	}
	if !set.Extraction.Enabled {
		return nil
	}
	scope, ok := set.Extraction.Scope(ev.MemoryScope)
	if !ok {
		s.metrics.run(ctx, OutcomeNoScope)
		return nil
	}
	key, outcome, err := s.admit(ctx, tenant, session, ev, scope, set.Extraction)
	if err != nil {
		return err
	}
	if outcome != "" {
		s.metrics.run(ctx, outcome)
	}
	if key == "" {
		return nil
	}
	ran, err := s.runs.Request(ctx, tenant, key, s.work, singlerun.Options{Progress: m.InProgress, Stopping: s.stopping})
	if err == nil && !ran && outcome == "" {
		s.metrics.run(ctx, OutcomeCoalesced)
	}
	return err
}

// admit looks at an eligible turn under the session's cursor lock. A turn
// the cursor is past asks again for the run still owed, if any. A turn
// whose memory the main agent already wrote is skipped: the cursor moves
// past it. Otherwise a run is owed through the turn once the session holds
// every_turns eligible turns after the cursor through it — counted from
// the stored rounds, so turns handled out of order, or twice, count the
// same. It returns the scope to request a run of ("" for none) and the
// outcome to count for a turn that starts no run.
func (s *Service) admit(ctx context.Context, tenant, session string, ev events.TurnAccounted, scope memory.Scope, set tenantcfg.Extraction) (key, outcome string, err error) {
	err = s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		key, outcome = "", ""
		c, err := tx.LockExtractorCursor(ctx, session)
		if err != nil {
			return err
		}
		if ev.Seq <= c.Seq {
			if c.Due() {
				key = c.Scope
			}
			return nil
		}
		aw, err := agentWrite(ctx, tx, session)
		if err != nil {
			return err
		}
		if aw.Writes > c.AgentWrites {
			end, err := tx.EndOfTurn(ctx, session, ev.Seq)
			if err != nil {
				return err
			}
			outcome = OutcomeSkippedAgentWrote
			return tx.AdvanceExtractorCursor(ctx, store.ExtractorAdvance{
				SessionID: session, Position: max(end, aw.Position), Seq: ev.Seq, AgentWrites: aw.Writes, Skipped: true,
			})
		}
		eligible, err := tx.ClosingRounds(ctx, session, c.Position, c.Seq, ev.Seq)
		if err != nil {
			return err
		}
		due := eligible >= int64(set.EveryTurns)
		if err := tx.SeeExtractorTurn(ctx, session, ev.Seq, ev.EventID, scope.String(), due); err != nil {
			return err
		}
		switch {
		case due:
			key = scope.String()
		case c.Due(): // a run owed before this turn is still to be made
			key, outcome = c.Scope, OutcomeThrottled
		default:
			outcome = OutcomeThrottled
		}
		return nil
	})
	if err != nil {
		return "", "", fmt.Errorf("extractor: admit turn %d of %s/%s: %w", ev.Seq, tenant, session, err)
	}
	return key, outcome, nil
}

// agentWrite is the session's latest memory write of its main agent (the
// zero value when it never wrote).
func agentWrite(ctx context.Context, tx *store.Tx, session string) (store.AgentMemoryWrite, error) {
	aw, err := tx.AgentMemoryWrite(ctx, session)
	if errors.Is(err, store.ErrNotFound) {
		return store.AgentMemoryWrite{}, nil
	}
	return aw, err
}

// subagents reports whether the tenant extracts from every agent's turns
// (extraction.subagents); when its settings cannot be read, the default.
func (s *Service) subagents(ctx context.Context, tenant string) bool {
	set, err := s.settings.For(ctx, tenant)
	return err == nil && set.Extraction.Subagents
}
