package dreamer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Why a run stops before its end.
var (
	// errKilled: an operator killed the dream.
	errKilled = errors.New("killed")
	// errLeaseLost: the dream no longer holds its scope's lease (it ran out
	// and another dreamer took the scope over).
	errLeaseLost = errors.New("the scope's lease was lost")
)

// outcome is how a run ended, for its record and event.
type outcome struct {
	status  dream.Status
	reason  string
	loop    memtools.LoopResult
	staged  memtools.Staged
	live    int
	allowed int
	summary string
	model   string
}

// modelOf is a provider that remembers the model that answered last.
type modelOf struct {
	llm.Provider
	last atomic.Value
}

func (p *modelOf) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	resp, err := p.Provider.Complete(ctx, req)
	if resp.Model != "" {
		p.last.Store(resp.Model)
	}
	return resp, err
}

func (p *modelOf) model() string {
	m, _ := p.last.Load().(string)
	return m
}

// run consolidates the scope of a lease its dream holds, and ends the
// dream: completed (changes applied, consolidation time now), proposed
// (nothing applied, the changes kept; consolidation time now), killed or
// failed (nothing applied, consolidation time unchanged). progress, when
// set, is called with every heartbeat (a bus message's InProgress).
func (s *Service) run(ctx context.Context, l Lease, progress func() error) {
	log := s.log.With("tenant", l.Tenant, "scope", l.Scope.String(), "dream", l.DreamID)
	log.Info("dream starting", "trigger", l.Trigger)
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		s.heartbeat(runCtx, l, cancel, progress)
	}()
	out, err := s.work(runCtx, l)
	if cause := context.Cause(runCtx); err == nil && cause != nil {
		err = cause // a kill that came after the work, before its end
	}
	cancel(nil)
	<-beat
	if err == nil {
		// The end is one short transaction, made whole even if the dreamer
		// is stopping meanwhile, so what it did is never in doubt.
		endCtx, done := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		err = s.conclude(endCtx, l, &out)
		done()
	}
	if err != nil {
		switch {
		case errors.Is(err, errKilled):
			out.status, out.reason = dream.StatusKilled, "killed"
		case errors.Is(err, errLeaseLost):
			out.status, out.reason = dream.StatusFailed, errLeaseLost.Error()
		case ctx.Err() != nil:
			out.status, out.reason = dream.StatusFailed, "the dreamer stopped before the dream ended; nothing was applied"
		default:
			out.status, out.reason = dream.StatusFailed, err.Error()
		}
		if err := s.abort(context.WithoutCancel(ctx), l, &out); err != nil {
			log.Warn("could not record the dream's end; its lease will run out", "status", out.status, "err", err)
			return
		}
	}
	s.metrics.dream(ctx, string(out.status))
	log.Info("dream ended", "status", out.status, "reason", out.reason, "turns", out.loop.Turns,
		"written", len(out.staged.Written), "deleted", len(out.staged.Deleted), "destructive", out.staged.Destructive(), "allowed", out.allowed)
}

// heartbeat renews the lease and looks for a kill request every
// cfg.Heartbeat until ctx ends; a kill or a lost lease cancels the run.
func (s *Service) heartbeat(ctx context.Context, l Lease, cancel context.CancelCauseFunc, progress func() error) {
	t := time.NewTicker(s.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if progress != nil {
			if err := progress(); err != nil {
				s.log.Warn("could not extend the request's ack wait", "dream", l.DreamID, "err", err)
			}
		}
		killed := false
		err := s.store.InTx(ctx, l.Tenant, func(tx *store.Tx) error {
			if err := tx.RenewDreamLease(ctx, l.Scope.String(), l.DreamID, s.now().Add(l.Stale)); err != nil {
				return err
			}
			d, err := tx.Dream(ctx, l.DreamID)
			killed = err == nil && !d.KillRequestedAt.IsZero()
			return err
		})
		switch {
		case killed:
			cancel(errKilled)
			return
		case errors.Is(err, store.ErrNotFound):
			cancel(errLeaseLost)
			return
		case err != nil && ctx.Err() == nil:
			s.log.Warn("could not renew the dream's lease; retrying", "dream", l.DreamID, "err", err)
		}
	}
}

// work runs the tool loop on the scope with its changes staged.
func (s *Service) work(ctx context.Context, l Lease) (outcome, error) {
	var out outcome
	set, err := s.settings.For(ctx, l.Tenant)
	if err != nil {
		return out, fmt.Errorf("settings of %s: %w", l.Tenant, err)
	}
	heads, err := s.memories.Headers(ctx, l.Tenant, l.Scope, maxScopeMemories)
	if err != nil {
		return out, s.why(ctx, err)
	}
	out.live, out.allowed = len(heads), set.Dreaming.AllowedChanges(len(heads))

	var first atomic.Bool
	ex, err := memtools.New(s.memories, memtools.Binding{
		Tenant: l.Tenant, Scope: l.Scope, Actor: memory.ActorDreamer, Reason: "dream " + l.DreamID,
	}, memtools.Options{
		Stage:     true,
		ListLimit: 1_000,
		Extra:     []memtools.Tool{s.searchTool(l, set.Dreaming)},
		OnChange: func(ctx context.Context, _ memory.Op, name memory.Name) {
			if first.CompareAndSwap(false, true) {
				s.updating(ctx, l, name)
			}
		},
	})
	if err != nil {
		return out, err
	}
	req := llm.Request{
		Tenant: l.Tenant, Task: llm.TaskDreaming, System: systemPrompt, MaxTokens: s.cfg.MaxTokens,
		Messages: []llm.Message{userMessage(brief{
			scope: l.Scope, live: out.live, allowed: out.allowed, last: l.LastConsolidatedAt, now: s.now(), limits: set.Memory,
			minSessions: set.Dreaming.MinSessions, trigger: l.Trigger,
		})},
	}
	p := &modelOf{Provider: s.provider}
	out.loop, err = memtools.Loop(ctx, p, req, ex, set.Dreaming.MaxTurns)
	out.model = p.model()
	if err != nil {
		return out, s.why(ctx, err)
	}
	if _, err := ex.TidyIndex(ctx); err != nil {
		return out, s.why(ctx, err)
	}
	out.staged = ex.Staged()
	out.summary = out.loop.Text
	return out, nil
}

// why is the reason a run's step failed: the run's cancellation cause (a
// kill, a lost lease) when it was cancelled, else err.
func (s *Service) why(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// conclude applies the staged changes, or keeps them as a proposal when
// they delete or rewrite more than the run may, ending the dream.
func (s *Service) conclude(ctx context.Context, l Lease, out *outcome) error {
	if out.staged.Destructive() > out.allowed {
		return s.propose(ctx, l, out)
	}
	return s.apply(ctx, l, out)
}

// maxScopeMemories bounds the memories of a scope a run counts.
const maxScopeMemories = 100_000

// apply makes the staged changes in one transaction with the dream's end:
// the lease released (it must still be the dream's), the dream completed,
// the consolidation time moved to now, dream.completed announced.
func (s *Service) apply(ctx context.Context, l Lease, out *outcome) error {
	ch := memory.Change{Actor: memory.ActorDreamer, Reason: "dream " + l.DreamID}
	_, err := s.memories.Apply(ctx, l.Tenant, l.Scope, out.staged.Batch, ch, func(tx *store.Tx, _ memory.BatchResult) error {
		out.status = dream.StatusCompleted
		return s.finish(ctx, tx, l, out, nil, bus.KindDreamCompleted)
	})
	if me, ok := memory.AsError(err); ok {
		return fmt.Errorf("the scope changed while the dream ran, so nothing was applied (%s)", me.Error())
	}
	if errors.Is(err, memory.ErrNotFound) {
		return fmt.Errorf("the scope changed while the dream ran, so nothing was applied (%w)", err)
	}
	return err
}

// propose keeps the staged changes as the dream's proposal, applying none.
func (s *Service) propose(ctx context.Context, l Lease, out *outcome) error {
	raw, err := json.Marshal(dream.ProposalOf(out.staged.Batch))
	if err != nil {
		return err
	}
	out.status = dream.StatusProposed
	out.reason = fmt.Sprintf("it would delete or rewrite %d of %d memories, more than the %d allowed without approval",
		out.staged.Destructive(), out.live, out.allowed)
	return s.store.InTx(ctx, l.Tenant, func(tx *store.Tx) error {
		return s.finish(ctx, tx, l, out, raw, bus.KindDreamProposed)
	})
}

// finish ends a dream that reached its end in tx (completed or proposed).
func (s *Service) finish(ctx context.Context, tx *store.Tx, l Lease, out *outcome, proposal []byte, kind string) error {
	held, err := tx.ReleaseDreamLease(ctx, l.Scope.String(), l.DreamID)
	if err != nil {
		return err
	}
	if !held {
		return errLeaseLost
	}
	now := s.now()
	if err := tx.FinishDream(ctx, l.DreamID, s.record(out, proposal, now)); err != nil {
		return err
	}
	if err := tx.SetDreamConsolidated(ctx, l.Scope.String(), now); err != nil {
		return err
	}
	return dream.Enqueue(ctx, tx, kind, s.event(l, out, now))
}

// abort ends a dream that stopped short (failed or killed): nothing of it
// was applied; the lease is freed and the consolidation time stays. When
// the dream had ended already (another dreamer took the scope over and
// ended it), out takes the status it ended with.
func (s *Service) abort(ctx context.Context, l Lease, out *outcome) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kind := bus.KindDreamFailed
	if out.status == dream.StatusKilled {
		kind = bus.KindDreamKilled
	}
	return s.store.InTx(ctx, l.Tenant, func(tx *store.Tx) error {
		now := s.now()
		if _, err := tx.ReleaseDreamLease(ctx, l.Scope.String(), l.DreamID); err != nil {
			return err
		}
		err := tx.FinishDream(ctx, l.DreamID, s.record(out, nil, now))
		if errors.Is(err, store.ErrNotFound) {
			d, err := tx.Dream(ctx, l.DreamID)
			if err != nil {
				return err
			}
			out.status = dream.Status(d.Status)
			return nil
		}
		if err != nil {
			return err
		}
		return dream.Enqueue(ctx, tx, kind, s.event(l, out, now))
	})
}

// record is the dream's stored end.
func (s *Service) record(out *outcome, proposal []byte, now time.Time) store.DreamOutcome {
	written, deleted := names(out.staged.Written), names(out.staged.Deleted)
	if out.status == dream.StatusFailed || out.status == dream.StatusKilled {
		written, deleted = nil, nil // nothing was applied
	}
	errText := ""
	if out.status != dream.StatusCompleted {
		errText = out.reason
	}
	return store.DreamOutcome{
		Status: string(out.status),
		DreamWork: store.DreamWork{
			LLMProvider: s.provider.Name(), LLMModel: out.model,
			Turns: out.loop.Turns, ToolCalls: out.loop.ToolCalls, ToolErrors: out.loop.ToolErrors,
			InputTokens:  out.loop.Usage.InputTokens + out.loop.Usage.CacheReadTokens + out.loop.Usage.CacheWriteTokens,
			OutputTokens: out.loop.Usage.OutputTokens, MemoriesLive: out.live, ChangesAllowed: out.allowed,
			ChangesDestructive: out.staged.Destructive(), Written: written, Deleted: deleted, ProposalJSON: proposal,
			Summary: clip(storable(out.summary), 4_000), Error: clip(storable(errText), 2_000),
		},
		At: now,
	}
}

func (s *Service) event(l Lease, out *outcome, now time.Time) events.Dream {
	ev := events.Dream{
		DreamID: l.DreamID, Scope: l.Scope.String(), Trigger: l.Trigger, Destructive: out.staged.Destructive(),
		Allowed: out.allowed, LLMProvider: s.provider.Name(), At: now,
	}
	switch out.status {
	case dream.StatusCompleted, dream.StatusProposed:
		ev.Written, ev.Deleted = names(out.staged.Written), names(out.staged.Deleted)
	}
	if out.status != dream.StatusCompleted {
		ev.Reason = storable(out.reason)
	}
	return ev
}

// updating announces a running dream's first change (staged).
func (s *Service) updating(ctx context.Context, l Lease, name memory.Name) {
	err := s.store.InTx(ctx, l.Tenant, func(tx *store.Tx) error {
		now := s.now()
		first, err := tx.MarkDreamUpdating(ctx, l.DreamID, now)
		if err != nil || !first {
			return err
		}
		ev := events.Dream{DreamID: l.DreamID, Scope: l.Scope.String(), Trigger: l.Trigger, LLMProvider: s.provider.Name(), At: now}
		if name != "" {
			ev.Memories = []string{string(name)}
		}
		return dream.Enqueue(ctx, tx, bus.KindDreamUpdating, ev)
	})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("could not announce the dream's first change", "dream", l.DreamID, "err", err)
	}
}

func names(ns []memory.Name) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = string(n)
	}
	return out
}

// storable is s without NUL characters, which Postgres text and jsonb
// cannot hold: a model's summary with one could not be recorded, and the
// dream stayed running until its lease ran out.
func storable(s string) string { return strings.ReplaceAll(s, "\x00", "") }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
