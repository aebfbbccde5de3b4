// Package dream is what the dreamer and the API share about consolidations
// of a scope's memories ("dreams", docs/dreaming.md): their records and states,
// the proposal a run leaves when it would change more than its share, its
// progress events, and what an operator does with a dream — request one
// now, kill a running one, approve a proposal. The runs themselves are the
// dreamer service's (services/dreamer).
package dream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// Status is where a dream is.
type Status string

// The statuses of a dream.
const (
	// StatusRequested: an operator asked for it; a dreamer has not started it.
	StatusRequested Status = "requested"
	// StatusRunning: a dreamer runs it, holding the scope's lease.
	StatusRunning Status = "running"
	// StatusCompleted: its changes were applied and the scope's
	// consolidation time moved to its end.
	StatusCompleted Status = "completed"
	// StatusFailed: it stopped on an error (or its dreamer died and its
	// lease ran out); nothing was applied.
	StatusFailed Status = "failed"
	// StatusKilled: it was killed; nothing was applied.
	StatusKilled Status = "killed"
	// StatusProposed: it would have deleted or rewritten more than its
	// share of the scope's memories, so it applied nothing and keeps its
	// changes as a proposal.
	StatusProposed Status = "proposed"
	// StatusApproved: its proposal was approved and applied.
	StatusApproved Status = "approved"
	// StatusSuperseded: a later dream of the scope replaced its proposal.
	StatusSuperseded Status = "superseded"
)

// Ended reports whether a dream in status s has stopped running.
func (s Status) Ended() bool { return s != StatusRequested && s != StatusRunning }

// Triggers of a dream.
const (
	TriggerScheduled = "scheduled"
	TriggerManual    = "manual"
)

// Dream is one consolidation of a scope.
type Dream struct {
	ID      string
	Scope   memory.Scope
	Trigger string
	Status  Status
	// Holder names the dreamer instance that runs (or ran) it.
	Holder string
	// KillRequested is set once a kill was asked for.
	KillRequested bool
	// What it did (Written and Deleted: the memories it changed, or
	// proposes to) and the guard's numbers.
	store.DreamWork
	// Proposal holds the changes of a proposed (or approved) dream.
	Proposal   *Proposal
	CreatedAt  time.Time
	StartedAt  time.Time
	UpdatingAt time.Time
	FinishedAt time.Time
	ApprovedAt time.Time
}

// FromStore converts a stored dream.
func FromStore(r store.Dream) (Dream, error) {
	sc, err := memory.ParseScope(r.Scope)
	if err != nil {
		return Dream{}, fmt.Errorf("dream %s: %w", r.DreamID, err)
	}
	d := Dream{
		ID: r.DreamID, Scope: sc, Trigger: r.Trigger, Status: Status(r.Status), Holder: r.Holder,
		KillRequested: !r.KillRequestedAt.IsZero(), DreamWork: r.DreamWork,
		CreatedAt: r.CreatedAt.UTC(), StartedAt: utc(r.StartedAt), UpdatingAt: utc(r.UpdatingAt),
		FinishedAt: utc(r.FinishedAt), ApprovedAt: utc(r.ApprovedAt),
	}
	if len(r.ProposalJSON) > 0 {
		var p Proposal
		if err := json.Unmarshal(r.ProposalJSON, &p); err != nil {
			return Dream{}, fmt.Errorf("dream %s: proposal: %w", r.DreamID, err)
		}
		d.Proposal = &p
	}
	return d, nil
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// Proposal is the changes a run staged and did not apply: a memory.Batch
// as stored, for approval. It is the API's type: stored as it is answered.
type Proposal = api.Proposal

// ProposedEdit is one memory written or deleted.
type ProposedEdit = api.ProposedEdit

// ProposalOf stores b.
func ProposalOf(b memory.Batch) Proposal {
	p := Proposal{Edits: make([]ProposedEdit, 0, len(b.Edits)), Index: b.Index, IndexRevision: b.IndexRevision}
	for _, e := range b.Edits {
		pe := ProposedEdit{Name: string(e.Name), Delete: e.Deletes(), ExpectRevision: e.Expect.Revision, ExpectAbsent: e.Expect.Absent, Reason: e.Reason}
		if e.Document != nil {
			pe.Description, pe.Type, pe.Body = e.Document.Description, string(e.Document.Type), e.Document.Body
		}
		p.Edits = append(p.Edits, pe)
	}
	return p
}

// batchOf is proposal p as a batch to apply.
func batchOf(p Proposal) memory.Batch {
	b := memory.Batch{Edits: make([]memory.Edit, 0, len(p.Edits)), Index: p.Index, IndexRevision: p.IndexRevision}
	for _, pe := range p.Edits {
		e := memory.Edit{Name: memory.Name(pe.Name), Expect: memory.Expect{Revision: pe.ExpectRevision, Absent: pe.ExpectAbsent}, Reason: pe.Reason}
		if !pe.Delete {
			e.Document = &memory.Document{Name: memory.Name(pe.Name), Description: pe.Description, Type: memory.Type(pe.Type), Body: pe.Body}
		}
		b.Edits = append(b.Edits, e)
	}
	return b
}

// namesOf returns the memories proposal p writes and deletes.
func namesOf(p Proposal) (written, deleted []string) {
	for _, e := range p.Edits {
		if e.Delete {
			deleted = append(deleted, e.Name)
		} else {
			written = append(written, e.Name)
		}
	}
	return written, deleted
}

// Touched lists written then deleted names, each once.
func Touched(written, deleted []string) []string {
	out := slices.Clone(written)
	for _, n := range deleted {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// Enqueue writes a dream's progress event of kind (bus.KindDream…) to the
// outbox of tx, on "<kind>.<tenant>.<dream id>". ev's schema, tenant, state
// and Memories are filled in.
func Enqueue(ctx context.Context, tx *store.Tx, kind string, ev events.Dream) error {
	ev.Schema, ev.TenantID = events.SchemaDream, tx.Tenant()
	ev.State = strings.TrimPrefix(kind, "dream.")
	if ev.Memories == nil {
		ev.Memories = Touched(ev.Written, ev.Deleted)
	}
	return outbox.Enqueue(ctx, tx, ev)
}

// Error is a request about a dream that cannot be done as things stand.
type Error struct {
	// Code is stable: the API's error code.
	Code   string
	Detail string
	// DreamID names the dream in the way (a running one), when there is one.
	DreamID string
}

func (e *Error) Error() string { return e.Code + ": " + e.Detail }

// The codes of Error.
const (
	CodeRunning     = "dream_running"
	CodeEnded       = "dream_ended"
	CodeNotProposal = "not_a_proposal"
	CodeStale       = "proposal_stale"
	CodeDisabled    = "dreaming_disabled"
)

// AsError returns err's *Error when it is (or wraps) one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// ErrNotFound is returned for a dream the tenant does not have.
var ErrNotFound = store.ErrNotFound

// Dreams reads dreams and does what an operator asks of them.
type Dreams struct {
	db       *store.Store
	memories *memory.Store
	now      func() time.Time
}

// New returns Dreams on db; memories applies approved proposals. now is
// the clock (time.Now when nil).
func New(db *store.Store, memories *memory.Store, now func() time.Time) *Dreams {
	if now == nil {
		now = time.Now
	}
	return &Dreams{db: db, memories: memories, now: now}
}

func (d *Dreams) clock() time.Time { return d.now().UTC().Truncate(time.Microsecond) }

// Get returns a dream; ErrNotFound when the tenant has none of that id.
func (d *Dreams) Get(ctx context.Context, tenant, id string) (Dream, error) {
	var out Dream
	err := d.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		r, err := tx.Dream(ctx, id)
		if err != nil {
			return err
		}
		out, err = FromStore(r)
		return err
	})
	return out, err
}

// List returns a scope's dreams, newest first, at most limit.
func (d *Dreams) List(ctx context.Context, tenant string, scope memory.Scope, limit int) ([]Dream, error) {
	var out []Dream
	err := d.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		rows, err := tx.Dreams(ctx, scope.String(), limit)
		if err != nil {
			return err
		}
		out = make([]Dream, 0, len(rows))
		for _, r := range rows {
			dr, err := FromStore(r)
			if err != nil {
				return err
			}
			out = append(out, dr)
		}
		return nil
	})
	return out, err
}

// LeaseHeld reports whether a scope's lease is held by a live dream at now.
func LeaseHeld(s store.DreamScope, now time.Time) bool {
	return s.LeaseHolder != "" && s.LeaseExpiresAt.After(now)
}

// Request records a consolidation of scope asked for now by an operator
// and announces it (dream.requested), for a dreamer to run: the time and
// session gates do not apply, the lease does. It is refused with
// CodeRunning while a dream of the scope holds the lease.
func (d *Dreams) Request(ctx context.Context, tenant string, scope memory.Scope) (Dream, error) {
	id := uuid.NewString()
	var out Dream
	err := d.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		now := d.clock()
		s, err := tx.LockDreamScope(ctx, scope.String())
		if err != nil {
			return err
		}
		if LeaseHeld(s, now) {
			return &Error{Code: CodeRunning, DreamID: s.LeaseDreamID,
				Detail: fmt.Sprintf("dream %s is consolidating %s; kill it first or wait for it", s.LeaseDreamID, scope)}
		}
		r := store.Dream{DreamID: id, Scope: scope.String(), Trigger: TriggerManual, Status: string(StatusRequested), CreatedAt: now}
		if err := tx.InsertDream(ctx, r); err != nil {
			return err
		}
		if err := Enqueue(ctx, tx, bus.KindDreamRequested, events.Dream{DreamID: id, Scope: scope.String(), Trigger: TriggerManual, At: now}); err != nil {
			return err
		}
		stored, err := tx.Dream(ctx, id)
		if err != nil {
			return err
		}
		out, err = FromStore(stored)
		return err
	})
	return out, err
}

// Kill stops a dream: one not yet started ends killed at once; a running
// one is asked to stop, which its run sees within its heartbeat and ends
// killed, applying nothing. Killing an ended dream is refused (CodeEnded).
func (d *Dreams) Kill(ctx context.Context, tenant, id string) (Dream, error) {
	var out Dream
	err := d.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		now := d.clock()
		r, err := tx.LockDream(ctx, id)
		if err != nil {
			return err
		}
		switch Status(r.Status) {
		case StatusRequested:
			if err := tx.FinishDream(ctx, id, store.DreamOutcome{Status: string(StatusKilled), DreamWork: store.DreamWork{Error: "killed before it started"}, At: now}); err != nil {
				return err
			}
			if err := Enqueue(ctx, tx, bus.KindDreamKilled, events.Dream{DreamID: id, Scope: r.Scope, Trigger: r.Trigger, Reason: "killed before it started", At: now}); err != nil {
				return err
			}
		case StatusRunning:
			if _, err := tx.RequestDreamKill(ctx, id, now); err != nil {
				return err
			}
		default:
			return &Error{Code: CodeEnded, DreamID: id, Detail: fmt.Sprintf("dream %s has ended (%s)", id, r.Status)}
		}
		if r, err = tx.Dream(ctx, id); err != nil {
			return err
		}
		out, err = FromStore(r)
		return err
	})
	return out, err
}

// Reject ends a proposal the deletion guard held without applying it: the
// dream ends killed, with "rejected" and reason as its error, and
// dream.killed is announced. A dream that is not a proposal is refused
// (CodeNotProposal).
func (d *Dreams) Reject(ctx context.Context, tenant, id, reason string) (Dream, error) {
	err := d.db.InTx(ctx, tenant, func(tx *store.Tx) error {
		r, err := tx.LockDream(ctx, id)
		if err != nil {
			return err
		}
		why := strings.TrimSpace("rejected " + reason)
		now := d.clock()
		ok, err := tx.RejectDream(ctx, id, why, now)
		if err != nil {
			return err
		}
		if !ok {
			return &Error{Code: CodeNotProposal, DreamID: id, Detail: fmt.Sprintf("dream %s is %s, not a proposal", id, r.Status)}
		}
		return Enqueue(ctx, tx, bus.KindDreamKilled, events.Dream{DreamID: id, Scope: r.Scope, Trigger: r.Trigger, Reason: why, At: now})
	})
	if err != nil {
		return Dream{}, err
	}
	return d.Get(ctx, tenant, id)
}

// Approve applies a proposal: every staged change in one transaction, each
// a revision by the dreamer, expecting the memories (and the index) to be
// as the run saw them; the dream becomes approved and dream.completed is
// announced with Approved. A proposal whose memories changed since is
// refused (CodeStale) and stays as it is; so is a dream that is not a
// proposal (CodeNotProposal).
func (d *Dreams) Approve(ctx context.Context, tenant, id string) (Dream, error) {
	dr, err := d.Get(ctx, tenant, id)
	if err != nil {
		return Dream{}, err
	}
	if dr.Status != StatusProposed || dr.Proposal == nil {
		return Dream{}, &Error{Code: CodeNotProposal, DreamID: id, Detail: fmt.Sprintf("dream %s is %s, not a proposal", id, dr.Status)}
	}
	ch := memory.Change{Actor: memory.ActorDreamer, Reason: fmt.Sprintf("dream %s, approved", id)}
	_, err = d.memories.Apply(ctx, tenant, dr.Scope, batchOf(*dr.Proposal), ch, func(tx *store.Tx, _ memory.BatchResult) error {
		now := d.clock()
		ok, err := tx.SetDreamApproved(ctx, id, now)
		if err != nil {
			return err
		}
		if !ok {
			return &Error{Code: CodeNotProposal, DreamID: id, Detail: fmt.Sprintf("dream %s is no longer a proposal", id)}
		}
		written, deleted := namesOf(*dr.Proposal)
		return Enqueue(ctx, tx, bus.KindDreamCompleted, events.Dream{DreamID: id, Scope: dr.Scope.String(), Trigger: dr.Trigger,
			Written: written, Deleted: deleted, Destructive: dr.ChangesDestructive, Allowed: dr.ChangesAllowed, Approved: true, At: now})
	})
	if _, ok := AsError(err); ok {
		return Dream{}, err
	}
	if me, ok := memory.AsError(err); ok {
		return Dream{}, &Error{Code: CodeStale, DreamID: id, Detail: "the scope changed since the proposal was made: " + me.Error()}
	}
	if errors.Is(err, memory.ErrNotFound) {
		return Dream{}, &Error{Code: CodeStale, DreamID: id, Detail: "the scope changed since the proposal was made: " + err.Error()}
	}
	if err != nil {
		return Dream{}, err
	}
	return d.Get(ctx, tenant, id)
}
