package extractor

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/extraction"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/singlerun"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Tools are the memory tools of an extraction: list, read, write, edit and
// the index of the one scope — no deletion.
var Tools = []string{memtools.ToolList, memtools.ToolRead, memtools.ToolWrite, memtools.ToolEdit, memtools.ToolIndexRead, memtools.ToolIndexWrite}

// dueBatch is how many owed sessions a run reads at a time.
const dueBatch = 20

// work is one run of a scope (c.Key): it works through the scope's
// sessions that are owed a run, each once, longest waiting first. When the
// service begins to stop, it ends after the session under way and leaves
// the rest pending.
func (s *Service) work(ctx context.Context, c singlerun.Claim) error {
	scope, err := memory.ParseScope(c.Key)
	if err != nil {
		return fmt.Errorf("extractor: run key %q: %w", c.Key, err)
	}
	done := map[string]bool{}
	for {
		var due []string
		err := s.store.InTx(ctx, c.Tenant, func(tx *store.Tx) error {
			var err error
			due, err = tx.ExtractorDueSessions(ctx, c.Key, dueBatch+len(done))
			return err
		})
		if err != nil {
			return fmt.Errorf("extractor: sessions owed a run in %s/%s: %w", c.Tenant, c.Key, err)
		}
		progress := false
		for _, session := range due {
			if done[session] {
				continue
			}
			select {
			case <-s.stopping:
				return singlerun.ErrUnfinished
			default:
			}
			done[session] = true
			progress = true
			if err := s.extract(ctx, c, scope, session); err != nil {
				return err
			}
		}
		if !progress {
			return nil
		}
	}
}

// extract makes the run owed to one session: it skips it when the main
// agent wrote memory itself since the cursor; otherwise it runs the tool
// loop over the messages since the cursor, through the turn the run is
// owed for, and moves the cursor past them. A failed model call is
// recorded and counted, and leaves the cursor where it was; only failures
// of the system (Postgres) and the end of ctx are errors.
func (s *Service) extract(ctx context.Context, c singlerun.Claim, scope memory.Scope, session string) error {
	var (
		cur     store.ExtractorCursor
		aw      store.AgentMemoryWrite
		end     int64
		msgs    []view.Message
		earlier []string
	)
	err := s.store.InTx(ctx, c.Tenant, func(tx *store.Tx) error {
		var err error
		if cur, err = tx.ExtractorCursor(ctx, session); err != nil {
			return err
		}
		if !cur.Due() || cur.Scope != c.Key {
			return nil
		}
		if aw, err = agentWrite(ctx, tx, session); err != nil {
			return err
		}
		if end, err = tx.EndOfTurn(ctx, session, cur.DueSeq); err != nil {
			return err
		}
		if aw.Writes > cur.AgentWrites {
			return nil
		}
		if cur.FailedRuns == 0 {
			// A run for this turn that was cut short (a crash, a kill)
			// between writing its memories and moving the cursor never
			// announced them: this run does. (A failed run announced what
			// it wrote; past one, this run announces only its own.)
			if earlier, err = tx.ExtractorCreatedFor(ctx, scope.String(), session, cur.DueEventID); err != nil {
				return err
			}
		}
		rows, err := tx.MessagesRange(ctx, session, cur.Position, cur.DueSeq, s.cfg.MaxMessages)
		if err != nil {
			return err
		}
		msgs, err = sessionctx.Messages(rows)
		return err
	})
	if err != nil {
		return fmt.Errorf("extractor: read %s/%s: %w", c.Tenant, session, err)
	}
	switch {
	case !cur.Due() || cur.Scope != c.Key:
		return nil // made meanwhile, or now owed to another scope's run
	case aw.Writes > cur.AgentWrites:
		return s.advance(ctx, c, store.ExtractorAdvance{
			SessionID: session, Position: max(end, aw.Position), Seq: cur.DueSeq, AgentWrites: aw.Writes, Skipped: true,
		}, OutcomeSkippedAgentWrote, nil)
	case len(msgs) == 0:
		return s.advance(ctx, c, store.ExtractorAdvance{SessionID: session, Position: end, Seq: cur.DueSeq, Ran: true}, OutcomeNothing, nil)
	}

	set, err := s.settings.For(ctx, c.Tenant)
	if err != nil {
		return fmt.Errorf("extractor: settings of %s: %w", c.Tenant, err)
	}
	heads, err := s.memories.Headers(ctx, c.Tenant, scope, s.cfg.ManifestSize)
	if err != nil {
		return fmt.Errorf("extractor: manifest of %s/%s: %w", c.Tenant, scope, err)
	}
	ex, err := memtools.New(s.memories, memtools.Binding{
		Tenant: c.Tenant, Scope: scope, Actor: memory.ActorExtractor, SessionID: session,
		Reason:      fmt.Sprintf("extracted from session %s through turn %d", session, cur.DueSeq),
		SourceTurns: []string{cur.DueEventID},
	}, memtools.Options{Tools: Tools})
	if err != nil {
		return fmt.Errorf("extractor: %w", err)
	}
	req := extraction.Request(extraction.Input{
		Tenant: c.Tenant, SessionID: session, Scope: scope, Messages: sessionnotes.Recent(msgs, s.cfg.MaxInputTokens),
		Manifest: heads, Now: s.now(), MaxTurns: set.Extraction.MaxTurns,
	})
	res, err := memtools.Loop(ctx, s.provider, req, ex, set.Extraction.MaxTurns)
	saved := s.saved(c, scope, session, cur, ex, res, earlier)
	if err != nil {
		if ctx.Err() != nil || llm.KindOf(err) == "" {
			return err // cancelled, or the memory store failed: the run is made again
		}
		s.log.Warn("memory extraction failed; the cursor stays for the next run", "tenant", c.Tenant, "session", session, "scope", scope, "kind", llm.KindOf(err), "err", err)
		return s.fail(ctx, c, session, cur.DueSeq, "the model call failed: "+err.Error(), saved)
	}
	outcome := OutcomeNothing
	switch {
	case res.Capped:
		outcome = OutcomeCapped
	case saved != nil:
		outcome = OutcomeSaved
	}
	return s.advance(ctx, c, store.ExtractorAdvance{
		SessionID: session, Position: end, Seq: cur.DueSeq, AgentWrites: cur.AgentWrites, Ran: true, Saved: saved != nil,
	}, outcome, saved)
}

// saved is the memory.saved event of a run, nil when it wrote nothing:
// what it created and updated, and what an earlier run for the same turn
// created and did not announce (earlier).
func (s *Service) saved(c singlerun.Claim, scope memory.Scope, session string, cur store.ExtractorCursor, ex *memtools.Executor, res memtools.LoopResult, earlier []string) *events.MemorySaved {
	ev := events.MemorySaved{
		Schema: events.SchemaMemorySaved, TenantID: c.Tenant, SessionID: session, Scope: scope.String(),
		Created: []string{}, Updated: []string{}, IndexChanged: res.IndexChanged,
		SourceTurn: cur.DueEventID, Seq: cur.DueSeq, LLMProvider: s.provider.Name(), At: s.now().UTC(),
	}
	seen := map[memory.Name]bool{}
	for _, name := range earlier {
		seen[memory.Name(name)] = true
		ev.Created = append(ev.Created, name)
	}
	for _, a := range ex.Applied() {
		if a.Op == memory.OpDeleted || seen[a.Name] {
			continue
		}
		seen[a.Name] = true
		if a.Op == memory.OpCreated {
			ev.Created = append(ev.Created, string(a.Name))
		} else {
			ev.Updated = append(ev.Updated, string(a.Name))
		}
	}
	if len(seen) == 0 {
		return nil
	}
	return &ev
}

// advance moves the session's cursor, with the memory.saved event of the
// run when it wrote memories, if the run still holds its scope.
func (s *Service) advance(ctx context.Context, c singlerun.Claim, a store.ExtractorAdvance, outcome string, saved *events.MemorySaved) error {
	err := s.store.InTx(ctx, c.Tenant, func(tx *store.Tx) error {
		if err := c.Check(ctx, tx); err != nil {
			return err
		}
		if err := tx.AdvanceExtractorCursor(ctx, a); err != nil {
			return err
		}
		return s.enqueue(ctx, tx, saved)
	})
	if err != nil {
		return fmt.Errorf("extractor: advance %s/%s: %w", c.Tenant, a.SessionID, err)
	}
	s.metrics.run(ctx, outcome)
	s.log.Debug("memory extraction", "tenant", c.Tenant, "session", a.SessionID, "scope", c.Key, "through", a.Seq, "outcome", outcome)
	return nil
}

// fail records a run whose model call failed; what it wrote before is
// announced all the same.
func (s *Service) fail(ctx context.Context, c singlerun.Claim, session string, seq int64, reason string, saved *events.MemorySaved) error {
	err := s.store.InTx(ctx, c.Tenant, func(tx *store.Tx) error {
		if err := c.Check(ctx, tx); err != nil {
			return err
		}
		if err := tx.FailExtractorRun(ctx, session, seq, reason); err != nil {
			return err
		}
		return s.enqueue(ctx, tx, saved)
	})
	if err != nil {
		return fmt.Errorf("extractor: record the failed run of %s/%s: %w", c.Tenant, session, err)
	}
	s.metrics.run(ctx, OutcomeFailed)
	return nil
}

func (s *Service) enqueue(ctx context.Context, tx *store.Tx, saved *events.MemorySaved) error {
	if saved == nil {
		return nil
	}
	if saved.RunID == "" {
		saved.RunID = uuid.NewString()
	}
	return outbox.Enqueue(ctx, tx, *saved)
}
