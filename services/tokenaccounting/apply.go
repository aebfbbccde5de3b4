package tokenaccounting

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/limits"
	"github.com/mnemos-ai/mnemos/pkg/outbox"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Outcome is what Apply did with an event.
type Outcome string

// Apply's outcomes.
const (
	OutcomeApplied   Outcome = "applied"
	OutcomeWaiting   Outcome = "waiting"
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeRejected: a late event, refused and counted on its session.
	OutcomeRejected Outcome = "rejected"
)

// Apply records ev and applies it, and every waiting successor it unblocks,
// in one transaction. It is idempotent: a redelivered event changes nothing.
// An *turn.InputError means the event can never apply; bad content found
// while applying rejects that event alone and is not returned. When another
// transaction holds the session longer than Config.SessionLockWait, Apply
// returns an error wrapping store.ErrSessionBusy and changes nothing: try
// again later.
//
// The event is a batch of one (decide.go): BEGIN with the tenant, the
// session's lock and the reads that decide (known message hashes, frozen
// offload decisions) in one round trip, then every write of the event
// pipelined with the COMMIT.
func (s *Service) Apply(ctx context.Context, ev turn.Event) error {
	return s.apply(ctx, ev, 0, nil)
}

// apply is Apply for an event that arrived encoded in size bytes (0: not
// known, the tenant's turn_bytes is not checked), its messages written at
// pacer's pace (nil: at once).
func (s *Service) apply(ctx context.Context, ev turn.Event, size int, pacer *cpu.Pacer) error {
	q := &queued{ctx: ctx, ev: ev, size: size, at: s.now()}
	decided, err := s.decideBatch(ctx, ev.TenantID, []*queued{q}, true, false, pacer)
	if errors.Is(err, store.ErrUnknownTenant) {
		return turn.Refuse(turn.ReasonUnknownTenant, "tenant %q does not exist", ev.TenantID)
	}
	if err != nil {
		return fmt.Errorf("tokenaccounting.Apply %s: %w", ev.EventID, err)
	}
	return s.answer(decided[0])
}

// answer counts what a batch did with one of its events and returns what
// the event's handler returns: nil, or the event's refusal.
func (s *Service) answer(dec decision) error {
	if dec.outcome != "" {
		s.metrics.outcome(dec.q.ctx, dec.outcome, s.now().Sub(dec.q.at))
	}
	s.metrics.appliedAfterWaiting(dec.q.ctx, dec.waited)
	if dec.err != nil {
		return fmt.Errorf("tokenaccounting.Apply %s: %w", dec.q.ev.EventID, dec.err)
	}
	return nil
}

// turnMessages counts an event's messages: its input messages and its response.
func turnMessages(ev turn.Event) int {
	n := len(ev.InputMessages)
	if ev.Response != nil {
		n++
	}
	return n
}

// turnLimitRefusal checks one event against the tenant's caps on a turn's
// messages and encoded size (size 0 is not checked): the refusal and the
// limit it is counted under.
func turnLimitRefusal(lim limits.Config, ev turn.Event, size int) (*turn.InputError, string) {
	if n := turnMessages(ev); lim.TurnMessages > 0 && n > lim.TurnMessages {
		return turn.Refuse(turn.ReasonTooManyMessages, "the turn has %d messages; the tenant's turn_messages limit is %d", n, lim.TurnMessages), limits.LimitTurnMessages
	}
	if lim.TurnBytes > 0 && size > lim.TurnBytes {
		return turn.Refuse(turn.ReasonTooLarge, "the event is %d bytes; the tenant's turn_bytes limit is %d", size, lim.TurnBytes), limits.LimitEventBytes
	}
	return nil, ""
}

// noteApplied counts and logs what applying a plan to the session as it
// was before did.
func (s *Service) noteApplied(ctx context.Context, before sessionstate.Session, plan turnPlan) {
	if plan.next.CompactRequests > before.CompactRequests {
		s.metrics.compactRequested(ctx)
	}
	if plan.staleUsage {
		s.metrics.staleUsage(ctx)
	}
	if plan.thrashHeld {
		s.metrics.thrashHeld(ctx)
		s.log.Warn("thrash guard: no automatic compaction asked, too many within the last turns",
			"tenant", plan.ev.TenantID, "session", plan.ev.SessionID, "seq", plan.ev.Seq, "recent", plan.next.AutoCompactSeqs)
	}
	for _, d := range plan.decisions {
		if !d.Recorded {
			s.metrics.offloaded(ctx, int64(d.SizeChars))
		}
	}
}

// checkPrefix warns of an event whose request prefix names a hash the
// session does not hold. Nothing else of the event is wrong: it applies
// with the session's prefix, and the client hears of it in the log.
func (s *Service) checkPrefix(ctx context.Context, sess sessionstate.Session, ev turn.Event) {
	if p := ev.RequestPrefix; p != nil {
		if _, _, ok, perr := accounting.PrefixOf(sess, p); perr == nil && !ok {
			s.metrics.unknownPrefix(ctx)
			s.log.Warn("request_prefix names a hash the session does not hold; the session's prefix is kept",
				"tenant", ev.TenantID, "session", ev.SessionID, "seq", ev.Seq, "hash", p.Hash)
		}
	}
}

// turnInput is one event's messages as sent, encoded and hashed, and what
// the reads found of them.
type turnInput struct {
	ev   turn.Event
	msgs []turn.Message
	// encoded is each message's content as sent, also what is stored when
	// nothing in it is replaced; sums its hash; uuids the messages' uuids.
	encoded, sums [][]byte
	uuids         []string
	toolUseIDs    []string
	// known holds the hashes of the messages the session stored already.
	known map[string][]byte
	// shown are the messages as the context shows them (offloaded results
	// replaced), decisions the offload decisions.
	shown     []turn.Message
	decisions []accounting.Decision
	// contextEstimate is the estimate of the session's context, read when
	// the event changes the model (accounting.Start).
	contextEstimate int64
}

// prepare encodes and hashes an event's messages.
func prepare(ev turn.Event) (turnInput, error) {
	msgs := ev.Messages()
	in := turnInput{ev: ev, msgs: msgs, encoded: make([][]byte, len(msgs)), sums: make([][]byte, len(msgs)), uuids: make([]string, len(msgs))}
	for i, m := range msgs {
		enc, err := turn.Marshal(m.Content)
		if err != nil {
			return in, fmt.Errorf("encode message %s: %w", m.UUID, err)
		}
		in.encoded[i], in.sums[i], in.uuids[i] = enc, contentHash(m.Role, enc), m.UUID
		for _, b := range m.Content {
			if b.Type == turn.BlockToolResult {
				in.toolUseIDs = append(in.toolUseIDs, b.ToolUseID)
			}
		}
	}
	return in, nil
}

// knownRefusal refuses an event that resends a stored message with other
// content, or whose new messages would pass the session's cap: the refusal
// and the limit it is counted under, if any.
func knownRefusal(lim limits.Config, sess sessionstate.Session, in turnInput) (*turn.InputError, string) {
	for i, m := range in.msgs {
		if prev, ok := in.known[m.UUID]; ok && !bytes.Equal(prev, in.sums[i]) {
			return turn.Refuse(turn.ReasonDuplicateUUID, "message %s was sent before with different content", m.UUID), ""
		}
	}
	if limit := int64(lim.SessionMessages); limit > 0 {
		fresh := int64(len(in.msgs) - len(in.known)) // a turn's uuids are distinct (turn.Decode)
		if sess.MessageCount+fresh > limit {
			return turn.Refuse(turn.ReasonSessionFull,
				"session %s holds %d messages; the turn's %d new ones would pass the tenant's session_messages limit of %d", in.ev.SessionID, sess.MessageCount, fresh, limit), limits.LimitSessionMessages
		}
	}
	return nil, ""
}

// turnPlan is everything applying one event writes.
type turnPlan struct {
	ev        turn.Event
	next      sessionstate.Session
	added     []store.Message
	decisions []accounting.Decision
	outgoing  []events.Event
	// staleUsage: the response's usage was measured before the latest
	// compaction and counted by its estimate instead.
	staleUsage bool
	// thrashHeld: the session was due an automatic compaction the thrash
	// guard held back.
	thrashHeld bool
}

// planTurn decides what applying one event does to its session: the
// messages it stores (those not stored before), the session's new count,
// state and tallies, and the events it announces. It reads nothing and
// writes nothing.
func planTurn(set tenantcfg.Settings, sess sessionstate.Session, in turnInput, now time.Time) (turnPlan, error) {
	ev := in.ev
	plan := turnPlan{ev: ev, next: sess, decisions: in.decisions}
	next := &plan.next
	tally := accounting.TallyOf(*next)
	if err := accounting.Start(&tally, next, accounting.RequestOf(ev), in.contextEstimate); err != nil {
		// turn.Decode checked the prefix's shape: an event that gets here
		// with a bad one was stored by an older build.
		return plan, fmt.Errorf("request prefix: %w", err)
	}
	updateSessionInfo(next, ev)
	limits := accounting.Limits(set.Tokens, *next)
	replaced := map[string]bool{}
	for _, d := range in.decisions {
		replaced[d.MessageUUID] = true
	}
	for i, m := range in.shown {
		isResponse := ev.Response != nil && i == len(in.shown)-1
		_, resent := in.known[m.UUID]
		switch {
		case isResponse && ev.Usage != nil && stale(*next, *ev.Usage):
			// Answered from the context as it was before the latest
			// compaction: the usage measures what the compaction removed.
			tally.AddMessage(m)
			plan.staleUsage = true
		case isResponse && ev.Usage != nil:
			// Offloaded results are counted by their preview, which the
			// request may not have carried: no calibration from them.
			tally.Observe(*ev.Usage, m.Content, len(in.decisions) == 0)
			next.StaleUsageAbove = 0
		case !resent:
			tally.AddMessage(m)
		}
		if resent {
			continue // stored and counted once already
		}
		content := in.encoded[i]
		if replaced[m.UUID] {
			var err error
			if content, err = turn.Marshal(m.Content); err != nil {
				return plan, fmt.Errorf("encode message %s: %w", m.UUID, err)
			}
		}
		estimate := tokens.EstimateMessage(m)
		next.MessageBytes += store.MessageSize(content, estimate)
		plan.added = append(plan.added, store.Message{
			SessionID: next.SessionID, UUID: m.UUID, Position: next.MessageCount, Seq: ev.Seq, Role: m.Role,
			Content: content, ContentHash: in.sums[i], EstimateTokens: estimate,
			IsResponse: isResponse, StopReason: in.msgs[i].StopReason, BytesThrough: next.MessageBytes,
		})
		next.MessageCount++
	}

	count := tally.Count()
	state := limits.State(count)
	accounting.Save(next, tally)
	next.TokenCount, next.State = count, string(state)
	next.AppliedSeq = ev.Seq
	toolCalls := 0
	if ev.Response != nil {
		toolCalls = ev.Response.ToolUseCount()
		next.LastResponseAt = ev.OccurredAt
	}
	next.ToolCallsTotal += int64(toolCalls)
	status := accounting.Status(limits, count)

	if string(state) != sess.State {
		plan.outgoing = append(plan.outgoing, events.ContextThreshold{
			Schema: events.SchemaContextThreshold, TenantID: ev.TenantID, SessionID: ev.SessionID, EventID: ev.EventID, Seq: ev.Seq,
			PreviousState: sess.State, Tokens: status, At: now,
		})
	}
	switch auto := set.Compaction.AutoCompaction(*next, ev.Seq, limits.AboveAutoCompact(count)); {
	case auto.Held:
		next.ThrashHeld++
		plan.thrashHeld = true
	case auto.Ask:
		next.CompactionInFlight = true
		next.CompactRequests++
		next.AutoCompactSeqs = auto.Seqs
		plan.outgoing = append(plan.outgoing, events.CompactRequested{
			Schema: events.SchemaCompactRequested, TenantID: ev.TenantID, SessionID: ev.SessionID, Seq: ev.Seq,
			Request: next.CompactRequests, Trigger: events.TriggerAuto, Tokens: status, At: now,
		})
	}
	var offloaded []string
	for _, d := range in.decisions {
		if !d.Recorded {
			offloaded = append(offloaded, d.ToolResultID)
		}
	}
	accounted := events.TurnAccounted{
		Schema: events.SchemaTurnAccounted, EventID: ev.EventID, TenantID: ev.TenantID, SessionID: ev.SessionID,
		Seq: ev.Seq, AgentID: ev.Agent(), MemoryScope: ev.MemoryScope, Model: ev.Model, Tokens: status,
		MessageUUIDs: in.uuids, ToolCalls: toolCalls, ToolCallsTotal: next.ToolCallsTotal,
		ClosesUserTurn: ev.ClosesUserTurn(), OffloadedTools: offloaded, OccurredAt: ev.OccurredAt, AccountedAt: now,
	}
	if ev.Response != nil {
		accounted.ResponseUUID = ev.Response.UUID
	}
	plan.outgoing = append(plan.outgoing, accounted)
	return plan, nil
}

// outboxRows encodes the events a plan announces.
func outboxRows(ctx context.Context, plan turnPlan) ([]store.OutboxEvent, error) {
	rows := make([]store.OutboxEvent, len(plan.outgoing))
	for i, e := range plan.outgoing {
		var err error
		if rows[i], err = outbox.Emit(ctx, e); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// queueOffloads queues a plan's new offload decisions: each result stored
// whole and its replacement.
func queueOffloads(ctx context.Context, p *store.Tx, plan turnPlan) error {
	for _, d := range plan.decisions {
		if d.Recorded {
			continue
		}
		if err := p.InsertToolResult(ctx, store.ToolResult{
			ID: d.ToolResultID, SessionID: plan.next.SessionID, MessageUUID: d.MessageUUID,
			ToolUseID: d.ToolUseID, Content: d.Original, SizeChars: int64(d.SizeChars),
		}); err != nil {
			return err
		}
		if err := p.RecordReplacement(ctx, store.Replacement{
			SessionID: plan.next.SessionID, ToolUseID: d.ToolUseID, Kind: store.ReplaceOffload,
			ToolResultID: d.ToolResultID, Text: d.Replacement,
		}); err != nil {
			return err
		}
	}
	return nil
}

// stale reports whether a response's usage was measured on the context as it
// was before the session's latest compaction: its input is at or above the
// midpoint between the sizes before and after it. Such usage says nothing of
// the compacted context, so the response is counted by its estimate until a
// request built on the compacted context reports.
func stale(s sessionstate.Session, u turn.Usage) bool {
	return s.StaleUsageAbove > 0 && u.InputSide() >= s.StaleUsageAbove
}

// contentHash identifies a message's content as the backend sent it.
func contentHash(role string, encoded []byte) []byte {
	h := sha256.New()
	h.Write([]byte(role))
	h.Write([]byte{0})
	h.Write(encoded)
	return h.Sum(nil)
}
