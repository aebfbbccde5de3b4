package sessionmemory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/mnemos-ai/mnemos/pkg/context/sessionctx"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/lease"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
)

// run holds the session's claim as owner: it updates the notes, then runs
// the trailing run while requests were coalesced into one and it is still
// due, and releases the claim. progress, when not nil, is called while an
// update runs (the bus message's InProgress).
func (s *Service) run(ctx context.Context, tenant, session, owner string, set tenantcfg.Settings, progress func() error) error {
	for {
		var moved bool
		err := lease.Hold(ctx, s.holder(tenant, session, owner, progress), func(ctx context.Context) (err error) {
			moved, err = s.update(ctx, tenant, session, owner, set)
			return err
		})
		if errors.Is(err, errClaimLost) {
			s.log.Warn("another worker took over this session's notes update; dropping this one's result", "tenant", tenant, "session", session)
			return nil
		}
		if err != nil {
			s.release(ctx, tenant, session, owner)
			return fmt.Errorf("sessionmemory: update of %s/%s: %w", tenant, session, err)
		}
		again, err := s.next(ctx, tenant, session, owner, set.SessionMemory, moved)
		if errors.Is(err, errClaimLost) {
			return nil
		}
		if err != nil || !again {
			return err
		}
	}
}

// next ends an update: when requests were coalesced meanwhile and the
// newest of them is still due against what the update recorded (moved: it
// moved the mark), the claim is kept for the trailing run (again), and so is
// the marker of that run, until an update leaves it not due: a worker that
// dies during the trailing run leaves it to the sweep. Otherwise the marker
// is cleared and the claim released.
func (s *Service) next(ctx context.Context, tenant, session, owner string, set tenantcfg.SessionMemory, moved bool) (again bool, err error) {
	err = s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		again = false
		n, err := tx.LockNotes(ctx, session)
		if err != nil {
			return err
		}
		if n.UpdateOwner != owner {
			return errClaimLost
		}
		if n.Pending {
			d := Decide(n.Mark, n.PendingTurn, set)
			if d.Rebase {
				if err := tx.ObserveNotesTurn(ctx, session, n.PendingTurn.Seq, true, n.PendingTurn.Tokens); err != nil {
					return err
				}
			}
			if d.Due && moved {
				again = true
				return tx.RenewNotesUpdate(ctx, session, owner, s.now().Add(s.cfg.Lease))
			}
			if err := tx.ClearNotesPending(ctx, session); err != nil {
				return err
			}
		}
		return tx.ReleaseNotesUpdate(ctx, session, owner)
	})
	if err != nil && !errors.Is(err, errClaimLost) {
		return false, fmt.Errorf("sessionmemory: end the update of %s/%s: %w", tenant, session, err)
	}
	return again, err
}

// release gives the claim up after a failure, so the next request takes it
// at once rather than after the lease. If that fails too, the lease runs out.
func (s *Service) release(ctx context.Context, tenant, session, owner string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := s.store.InTx(rctx, tenant, func(tx *store.Tx) error { return tx.ReleaseNotesUpdate(rctx, session, owner) })
	if err != nil {
		s.log.Warn("could not release the notes update; its lease will run out", "tenant", tenant, "session", session, "err", err)
	}
}

// holder keeps the session's claim while an update runs, and the bus
// message's ack wait with it.
func (s *Service) holder(tenant, session, owner string, progress func() error) lease.Holder {
	return lease.Holder{
		Every: s.cfg.Lease / 3,
		Renew: func(ctx context.Context) error {
			return s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
				return tx.RenewNotesUpdate(ctx, session, owner, s.now().Add(s.cfg.Lease))
			})
		},
		Progress: progress, Lost: errClaimLost,
		Log: s.log, Attrs: []any{"tenant", tenant, "session", session},
	}
}

// update makes one update of the session's notes under owner's claim: it
// reads the session, the notes and the messages after the last one they
// cover, asks the provider for edits, checks them and stores the new notes
// with an outbox event. A failed call or a rejected answer is recorded and
// counted and leaves the notes as they were; only Postgres failures and
// the end of ctx are errors. moved reports whether the gate's mark moved
// (not when there was nothing new to read).
func (s *Service) update(ctx context.Context, tenant, session, owner string, set tenantcfg.Settings) (moved bool, err error) {
	var (
		sess  sessionstate.Session
		notes store.Notes
		msgs  []view.Message
	)
	err = s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		if sess, err = tx.Session(ctx, session); err != nil {
			return err
		}
		if notes, err = tx.Notes(ctx, session); err != nil {
			return err
		}
		rows, err := tx.MessagesFrom(ctx, session, notes.LastSummarizedPosition+1)
		if err != nil {
			return err
		}
		// Each statement sees what was committed when it ran: the messages
		// of a turn applied after the session was read are left to the next
		// update, so the notes cover exactly the turns the mark records.
		rows = slices.DeleteFunc(rows, func(m store.Message) bool { return m.Position >= sess.MessageCount })
		msgs, err = sessionctx.Messages(rows)
		return err
	})
	if err != nil {
		return false, err
	}
	if len(msgs) == 0 {
		return false, nil // nothing new since the notes were written
	}
	mark := store.NotesMark{Attempted: true, Seq: sess.AppliedSeq, Tokens: sess.TokenCount, ToolCalls: sess.ToolCallsTotal}
	sm := set.SessionMemory
	current := s.current(notes, sm)
	resp, err := s.provider.Complete(ctx, sessionnotes.Request(sessionnotes.UpdateInput{
		Tenant: tenant, SessionID: session, Notes: current, Messages: sessionnotes.Recent(msgs, s.cfg.MaxInputTokens),
		Prompt: sm.Prompt, SectionTokens: sm.SectionTokens, TotalTokens: sm.TotalTokens,
	}))
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		s.log.Warn("notes update failed; the notes stay as they were", "tenant", tenant, "session", session, "kind", llm.KindOf(err), "err", err)
		return true, s.attempt(ctx, tenant, session, owner, mark, OutcomeFailed, "the model call failed: "+err.Error())
	}
	edits, err := sessionnotes.ParseEdits(resp.Text, current)
	if err != nil {
		s.log.Warn("notes update rejected; the notes stay as they were", "tenant", tenant, "session", session, "err", err)
		return true, s.attempt(ctx, tenant, session, owner, mark, OutcomeRejected, err.Error())
	}
	next := sessionnotes.Apply(current, edits)
	last := msgs[len(msgs)-1]
	err = s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		version, err := tx.SaveNotes(ctx, store.NotesUpdate{
			SessionID: session, Owner: owner, Content: next.Render(),
			LastSummarizedUUID: last.UUID, LastSummarizedPosition: last.Position, Mark: mark, LLMModel: resp.Model,
		})
		if errors.Is(err, store.ErrNotFound) {
			return errClaimLost
		}
		if err != nil {
			return err
		}
		return outbox.Enqueue(ctx, tx, events.SessionMemoryUpdated{
			Schema: events.SchemaSessionMemoryUpdated, TenantID: tenant, SessionID: session, Version: version,
			LastSummarizedMessage: last.UUID, TokensAtUpdate: mark.Tokens, ToolCallsAtUpdate: mark.ToolCalls,
			Sections: sessionnotes.Changed(current, next), LLMProvider: s.provider.Name(), LLMModel: resp.Model,
			At: s.now().UTC(),
		})
	})
	if err != nil {
		return false, err
	}
	s.metrics.update(ctx, OutcomeUpdated)
	s.log.Debug("session notes updated", "tenant", tenant, "session", session, "through", last.Position, "tokens", mark.Tokens)
	return true, nil
}

// current is the notes an update starts from: the stored ones, or the
// tenant's template before the first update.
func (s *Service) current(n store.Notes, set tenantcfg.SessionMemory) sessionnotes.Document {
	if n.Content != "" {
		d, err := sessionnotes.Parse(n.Content)
		if err == nil {
			return d
		}
		s.log.Warn("stored session notes do not parse; starting again from the template", "session", n.SessionID, "err", err)
	}
	d, err := sessionnotes.ParseTemplate(set.TemplateText())
	if err != nil { // settings are validated; this is the default's safety net
		d, _ = sessionnotes.ParseTemplate(sessionnotes.DefaultTemplate)
	}
	return d
}

// attempt records an update that left the notes as they were, and counts it.
func (s *Service) attempt(ctx context.Context, tenant, session, owner string, mark store.NotesMark, outcome, reason string) error {
	err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		err := tx.RecordNotesAttempt(ctx, session, owner, mark, outcome == OutcomeRejected, reason)
		if errors.Is(err, store.ErrNotFound) {
			return errClaimLost
		}
		return err
	})
	if err != nil {
		return err
	}
	s.metrics.update(ctx, outcome)
	return nil
}

// Sweep runs the trailing runs whose claim ran out because the worker that
// held it stopped: each is claimed afresh and run if it is still due.
func (s *Service) Sweep(ctx context.Context) error {
	refs, err := s.store.StaleNotesClaims(ctx)
	if err != nil {
		return err
	}
	for _, r := range refs {
		set, err := s.settings.For(ctx, r.TenantID)
		if err != nil {
			return fmt.Errorf("sessionmemory: settings of %s: %w", r.TenantID, err)
		}
		owner, claimed, err := s.adopt(ctx, r.TenantID, r.SessionID, set.SessionMemory)
		if err != nil {
			return err
		}
		if !claimed {
			continue
		}
		s.log.Info("running a trailing notes update left behind by a stopped worker", "tenant", r.TenantID, "session", r.SessionID)
		if err := s.run(ctx, r.TenantID, r.SessionID, owner, set, nil); err != nil {
			return err
		}
	}
	return nil
}

// adopt claims a session whose trailing run waits behind an expired claim,
// when that run is still due; otherwise it clears the marker.
func (s *Service) adopt(ctx context.Context, tenant, session string, set tenantcfg.SessionMemory) (owner string, claimed bool, err error) {
	err = s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
		claimed = false
		n, err := tx.LockNotes(ctx, session)
		if err != nil {
			return err
		}
		if !n.Pending {
			return nil
		}
		d := Decide(n.Mark, n.PendingTurn, set)
		if !d.Due || !set.Enabled {
			return tx.ClearNotesPending(ctx, session)
		}
		owner = uuid.NewString()
		claimed, err = tx.ClaimNotesUpdate(ctx, session, owner, s.now().Add(s.cfg.Lease))
		if err != nil || !claimed {
			return err
		}
		// Taking the claim clears the marker: it is set again until the run
		// ends, so a sweep that stops during the run leaves it to the next.
		return tx.MarkNotesPending(ctx, session, n.PendingTurn)
	})
	if err != nil {
		return "", false, fmt.Errorf("sessionmemory: adopt %s/%s: %w", tenant, session, err)
	}
	return owner, claimed, nil
}
