package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/tenantcfg"
	"github.com/mnemos-ai/mnemos/pkg/turn"
	"github.com/mnemos-ai/mnemos/services/gateway/contextapi"
)

// reminderPrefix starts the blocks Claude Code puts at the front of the
// first user message of every request (environment, CLAUDE.md, memory):
// the client's instructions, not history.
const reminderPrefix = "<system-reminder>"

// manage rewrites a request of a session as the session's context stands:
// the messages the session has stored, rendered as GET /context renders
// them (the compaction's boundary and summary in place of what it replaced,
// previews of offloaded results, micro-compaction, recall beside user
// messages), then the messages the client added since, as it sent them.
// The memory section follows the client's system prompt. When compact is
// set and the request would reach the auto-compact threshold, the session
// is compacted first (Contexts.CompactBeforeCall), so the upstream never receives a
// request over it. A session with nothing stored is not changed. The
// render's context snapshot is left in req.snapshot, to be written with the
// round (recordRound) or on its own (flushSnapshot).
func (h *Handler) manage(ctx context.Context, tenant string, req *messagesRequest, body []byte, compact bool) ([]byte, error) {
	if err := h.checkMessages(tenant, req); err != nil {
		return body, err // a message Mnemos cannot read: the upstream judges it
	}
	pl, err := h.placeRequest(ctx, tenant, req)
	if err != nil {
		return body, err
	}
	session := pl.thread.ThreadID
	set, err := h.settings.For(ctx, tenant)
	if pl.fresh {
		return freshBody(req, set, err, tenant, session, body)
	}
	if err != nil {
		return body, err
	}
	// The session's context is rendered under the same admission as
	// GET /context: a large one is paced or refused, never held unbounded.
	gate := &contextapi.Gate{}
	defer gate.Done()
	ahead := h.aheadOf(set, req)
	cb, parts, err := h.contexts.Render(ctx, tenant, session, set, ahead, gate)
	req.snapshot = cb.Snapshot
	if nothingStored(cb, err) {
		return cacheAware(req, set.Offload, tenant, session, body)
	}
	if err != nil {
		return body, err
	}
	tail, err := clientTail(req, cb.Session, pl)
	if h.placeAgain(ctx, tenant, req, err) {
		return h.manage(ctx, tenant, req, body, compact)
	}
	if err != nil {
		return body, err
	}
	if compact && set.Compaction.Compacts(cb.Session) && cb.Tokens.AutoCompact > 0 {
		// The client's messages counted as the accountant will count them:
		// each kind of content by the factor the session's responses taught,
		// after the offload it would apply. A raw estimate runs a fifth or
		// more over for code and tool output, and the client's messages are
		// many when its rounds before are not applied yet (sent back to back).
		next := ahead.Count(cb.Session)
		if within := set.Proxy.ExactCountWithinPercent; within > 0 && req.client != nil && req.openai == nil && nearThreshold(next, cb.Tokens.AutoCompact, within) {
			next = h.exactCount(ctx, tenant, req, parts, cb.Compaction != nil, tail, next)
		}
		if next >= cb.Tokens.AutoCompact {
			h.flushSnapshot(ctx, tenant, req) // the render before the compaction's, as it was
			if _, err := h.contexts.CompactBeforeCall(ctx, tenant, session, h.cfg.ContextWait, ""); err != nil {
				return body, fmt.Errorf("compacting before the call: %w", err)
			}
			cb, parts, err = h.contexts.Render(ctx, tenant, session, set, ahead, gate)
			req.snapshot = cb.Snapshot
			if err != nil {
				return body, err
			}
			// While the compaction ran the accountant may have applied
			// rounds before this one: the session may store more of the
			// client's messages now.
			tail, err = clientTail(req, cb.Session, pl)
			if h.placeAgain(ctx, tenant, req, err) {
				return h.manage(ctx, tenant, req, body, compact)
			}
			if err != nil {
				return body, err
			}
		}
	}
	tail, offloadNext, err := sentTail(req, set, tenant, cb, tail)
	if err != nil {
		return body, err
	}
	rendered, err := keepUnchanged(req, parts.Messages, cb.MessageUUIDs, cb.Session.KeepFrom, h.unchanged)
	if err != nil {
		return body, err
	}
	parts.Messages = withTheirTask(req, cb.Session, cb.Compaction != nil, rendered)
	managed, err := managedBody(req, parts, cb.Compaction != nil, tail, offloadNext)
	if err != nil {
		return body, err
	}
	return managed, nil
}

// freshBody is the body of a request of a new thread, whose tenant's
// settings read set (or failed to, with err): nothing stored to manage
// yet, but the rounds before the current one go as the accountant will
// store them, when its settings say how (cacheAware).
func freshBody(req *messagesRequest, set tenantcfg.Settings, err error, tenant, thread string, body []byte) ([]byte, error) {
	if err != nil {
		return body, nil //nolint:nilerr // nothing to manage: the request goes as sent
	}
	return cacheAware(req, set.Offload, tenant, thread, body)
}

// nothingStored reports whether a render found the session without a
// message stored yet (or without a row).
func nothingStored(cb contextapi.Rendered, err error) bool {
	return errors.Is(err, store.ErrNotFound) || (err == nil && cb.Session.MessageCount == 0)
}

// sentTail is the client's tail as it goes up: its rounds before the
// current one as the accountant will store them (offloadRounds), and the
// call its first results answer in front when a compaction summarized it
// (withTheirCalls). next are the current round's results offloaded from
// the next round on.
func sentTail(req *messagesRequest, set tenantcfg.Settings, tenant string, cb contextapi.Rendered, tail []json.RawMessage) (out []json.RawMessage, next map[string]bool, err error) {
	if req.openai == nil {
		if tail, next, err = offloadRounds(set.Offload, tenant, cb.Session.SessionID, req, int(cb.Session.MessageCount), tail); err != nil {
			return nil, nil, err
		}
	}
	if cb.Compaction != nil {
		tail = withTheirCalls(req, cb.Session, tail)
	}
	return tail, next, nil
}

// placeAgain reports whether a request is to be placed again, and makes
// it ready to be: when the thread stored rounds since it was placed (its
// records run after their answers), once, on what the thread holds now.
func (h *Handler) placeAgain(ctx context.Context, tenant string, req *messagesRequest, err error) bool {
	if !errors.Is(err, errMovedOn) || req.replaced {
		return false
	}
	req.place, req.replaced = nil, true
	h.flushSnapshot(ctx, tenant, req)
	return true
}

// clientTail is what the client added to its thread's stored messages: the
// messages of req after the ones sess stored. The placement vouches for
// the client's messages up to pl.matched being the thread's; a thread that
// stored more than that since (a request of the same conversation sent at
// once) holds messages that are not this request's, and nothing of it is
// rendered (errMovedOn).
func clientTail(req *messagesRequest, sess sessionstate.Session, pl *placement) ([]json.RawMessage, error) {
	if stored := sess.MessageCount; stored > pl.matched+1 || int64(len(req.messages)) < stored {
		return nil, fmt.Errorf("%w: thread %s stored %d messages, %d of them the client's", errMovedOn, sess.SessionID, stored, pl.matched+1)
	}
	return req.messages[sess.MessageCount:], nil
}

// withTheirCalls is the client's tail with the message before it put
// back in front when a compaction summarized that message and the tail
// opens with results of the calls it made: an API refuses a tool result
// whose call is not in the message before it (a compaction before the
// call lands between a call and its result whenever the client's request
// carries the result). The message goes as the client sent it.
func withTheirCalls(req *messagesRequest, sess sessionstate.Session, tail []json.RawMessage) []json.RawMessage {
	start := sess.MessageCount
	if len(tail) == 0 || start < 1 || sess.KeepFrom <= start-1 {
		return tail // nothing of the client's tail, or the message before it is kept
	}
	first, err := req.turnAt(int(start))
	if err != nil || first.Role != "user" {
		return tail
	}
	calls, err := req.turnAt(int(start - 1))
	if err != nil || calls.Role != "assistant" {
		return tail
	}
	made := map[string]bool{}
	for _, b := range calls.Content {
		if b.Type == turn.BlockToolUse {
			made[b.ID] = true
		}
	}
	for _, b := range first.Content {
		if b.Type == turn.BlockToolResult && made[b.ToolUseID] {
			return append([]json.RawMessage{req.messages[start-1]}, tail...)
		}
	}
	return tail
}

// withTheirTask is the rendered context of an OpenAI request with the
// client's first message put back in front, as the client sent it, when a
// compaction summarized it and it is the user's: an OpenAI agent opens its
// conversation with its task and its environment (the Codex CLI's first
// items), which it means to hold for good, as Claude Code holds its
// reminders (withReminders). The Messages API's requests are left as they
// are.
func withTheirTask(req *messagesRequest, sess sessionstate.Session, compacted bool, rendered [][]byte) [][]byte {
	if req.openai == nil || !compacted || sess.KeepFrom <= 0 || len(req.messages) == 0 {
		return rendered
	}
	if first, err := req.turnAt(0); err != nil || first.Role != "user" {
		return rendered
	}
	return append([][]byte{req.messages[0]}, rendered...)
}

// aheadOf is contextapi.Ahead for req, its count worked out once for each
// state of the session a request sees (micro-compaction and the compaction
// before the call ask for the same one). Not for concurrent use: a
// request's own.
func (h *Handler) aheadOf(set tenantcfg.Settings, req *messagesRequest) contextapi.Ahead {
	return &ahead{h: h, set: set, req: req}
}

// ahead is aheadOf's contextapi.Ahead.
type ahead struct {
	h     *Handler
	set   tenantcfg.Settings
	req   *messagesRequest
	seen  [4]int64
	count int64
	known bool
}

func (a *ahead) Count(sess sessionstate.Session) int64 {
	state := [4]int64{sess.MessageCount, sess.TokenCount, sess.AppliedSeq, sess.ContextEpoch}
	if !a.known || state != a.seen {
		a.seen, a.count, a.known = state, a.h.countAhead(a.set, a.req, sess), true
	}
	return a.count
}

// Pending is the request's messages after those sess stored, decoded;
// none when the request holds fewer, or one that cannot be read (manage
// reports that).
func (a *ahead) Pending(sess sessionstate.Session) []turn.Message {
	if int64(len(a.req.messages)) < sess.MessageCount {
		return nil
	}
	out := make([]turn.Message, 0, int64(len(a.req.messages))-sess.MessageCount)
	for i := sess.MessageCount; i < int64(len(a.req.messages)); i++ {
		m, err := a.req.turnAt(int(i))
		if err != nil {
			return nil
		}
		out = append(out, m)
	}
	return out
}

// contextapi.Ahead is the count the session will have with the messages of req it
// has not stored: counted as the accountant will count them (as for the
// compaction before the call), or the session's count when req holds fewer
// messages than it stored or one that cannot be read (manage reports that).
//
// The messages are counted as the rounds that will bring them: the proxy
// records each answer with the client's messages before it as one turn
// (recordRound), so a turn ends at every assistant message. Rounds sent
// back to back, before the accountant applied the ones before, would
// otherwise count as one turn whose tool results together pass the offload's
// cap, and the count would leave out results the accountant will keep. A
// client that sends several rounds Mnemos never answered in one request
// (a history it imports) has them recorded as one turn, which may offload
// more: counted here as rounds, they count high, and the session is
// compacted early rather than sent over its threshold.
func (h *Handler) countAhead(set tenantcfg.Settings, req *messagesRequest, sess sessionstate.Session) int64 {
	if int64(len(req.messages)) < sess.MessageCount {
		return sess.TokenCount
	}
	var turns [][]turn.Message
	var round []turn.Message
	for i := sess.MessageCount; i < int64(len(req.messages)); i++ {
		m, err := req.turnAt(int(i))
		if err != nil {
			return sess.TokenCount
		}
		round = append(round, m)
		if m.Role == "assistant" {
			turns, round = append(turns, round), nil
		}
	}
	turns = append(turns, round)
	return accounting.PreflightForTurns(set.Tokens, set.Offload, sess, turns).Count
}

// keepUnchanged returns the rendered messages with every stored message
// that Mnemos left as the client sent it (nothing cleared, cut or recalled
// beside it) replaced by the client's own bytes, cache_control and all: the
// client's cached prefix then stays byte for byte what it sent the round
// before, and its breakpoints stay where it put them. uuids is parallel to
// rendered ("" for what a compaction made); the stored messages among them
// are the session's positions from keepFrom on.
//
// A message is left as sent when its rendering and the client's message,
// without cache_control, are the same JSON once canonical (canonicalJSON):
// Postgres keeps a tool's input with its keys in its own order, so bytes
// alone would call every stored tool call changed. The verdict on a pair
// of the client's message and a rendering is kept in known (by their
// digests: req.digests, from checkMessages) and not worked out again. An
// OpenAI client's message is its own when it is the rendering as such a
// client sends an answer back (door.sameAsSent): the ids and statuses it
// dropped are not put back.
func keepUnchanged(req *messagesRequest, rendered [][]byte, uuids []string, keepFrom int64, known *verdicts) ([][]byte, error) {
	out := make([][]byte, len(rendered))
	copy(out, rendered)
	req.changed = req.changed[:0]
	pos := keepFrom
	for i, part := range rendered {
		if i >= len(uuids) || uuids[i] == "" {
			continue // the compaction's own messages
		}
		p := pos
		pos++
		if p < 0 || p >= int64(len(req.messages)) {
			continue
		}
		pair := pairDigest(req.digests[p], part)
		same, ok := known.get(pair)
		if !ok && req.openai != nil {
			var err error
			if same, err = req.door.sameAsSent(req, p, part); err != nil {
				return nil, err
			}
			known.put(pair, same)
		} else if !ok {
			m, err := req.turnAt(int(p))
			if err != nil {
				return nil, err
			}
			client, err := assembly.Wire{Role: m.Role, Content: m.Content}.MarshalJSON()
			if err != nil {
				return nil, err
			}
			if same, err = sameJSON(part, client); err != nil {
				return nil, err
			}
			known.put(pair, same)
		}
		if same {
			out[i] = req.messages[p]
		} else {
			req.changed = append(req.changed, p)
		}
	}
	return out, nil
}

// sameJSON reports whether a and b hold the same JSON value, whatever the
// order of their objects' keys.
func sameJSON(a, b []byte) (bool, error) {
	ca, err := canonicalJSON(a)
	if err != nil {
		return false, err
	}
	cb, err := canonicalJSON(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ca, cb), nil
}

// canonicalJSON re-encodes data with every object's keys sorted.
func canonicalJSON(data []byte) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers as written, not through float64
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return turn.Marshal(v)
}

// managedBody is the request with its messages replaced by the session's
// rendered ones and the client's tail, and the memory section after its
// system prompt; every other field as the client sent it. When the context
// starts with a compaction, the reminders at the front of the client's
// first message are put at the front of the context's first.
func managedBody(req *messagesRequest, parts contextapi.Encoded, compacted bool, tail []json.RawMessage, offloadNext map[string]bool) ([]byte, error) {
	msgs := make([]json.RawMessage, 0, len(parts.Messages)+len(tail))
	for _, p := range parts.Messages {
		msgs = append(msgs, p)
	}
	msgs = append(msgs, tail...)
	if req.openai != nil {
		return openaiBody(req.door, req, parts.System, msgs)
	}
	msgs, err := moveBreakpoint(msgs, offloadNext)
	if err != nil {
		return nil, err
	}
	if compacted && len(req.messages) > 0 && len(msgs) > 0 {
		first, err := withReminders(msgs[0], req.messages[0])
		if err != nil {
			return nil, err
		}
		msgs[0] = first
	}
	fields := req.fields
	if len(parts.System) > 0 {
		system, err := withSystem(req.fields["system"], parts.System)
		if err != nil {
			return nil, err
		}
		fields = maps.Clone(req.fields)
		fields["system"] = system
	}
	return encodeFields(fields, "messages", msgs)
}

// wireMessage is a message with its content kept block by block as sent.
type wireMessage struct {
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}

// withReminders puts the leading reminder blocks of the client's first
// message (from) at the front of the context's first message (to), when
// both are the user's.
func withReminders(to, from json.RawMessage) (json.RawMessage, error) {
	var src wireMessage
	if err := json.Unmarshal(from, &src); err != nil || src.Role != "user" {
		return to, nil //nolint:nilerr // a string content holds no reminder blocks: nothing to move
	}
	var reminders []json.RawMessage
	for _, b := range src.Content {
		var block struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(b, &block) != nil || block.Type != "text" || !strings.HasPrefix(strings.TrimSpace(block.Text), reminderPrefix) {
			break
		}
		reminders = append(reminders, b)
	}
	if len(reminders) == 0 {
		return to, nil
	}
	var dst wireMessage
	if err := json.Unmarshal(to, &dst); err != nil || dst.Role != "user" {
		return to, nil //nolint:nilerr // a first message that is not the user's blocks takes no reminders
	}
	dst.Content = append(reminders, dst.Content...)
	return turn.Marshal(dst)
}

// withSystem appends the memory section's blocks to the client's system
// prompt, a string or blocks.
func withSystem(system json.RawMessage, section [][]byte) (json.RawMessage, error) {
	var blocks []json.RawMessage
	if len(bytes.TrimSpace(system)) > 0 && string(bytes.TrimSpace(system)) != "null" {
		var text string
		if json.Unmarshal(system, &text) == nil {
			b, err := turn.Marshal(map[string]string{"type": "text", "text": text})
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		} else if err := json.Unmarshal(system, &blocks); err != nil {
			return nil, fmt.Errorf("system: want a string or an array of blocks: %w", err)
		}
	}
	for _, b := range section {
		blocks = append(blocks, b)
	}
	return turn.Marshal(blocks)
}

// nearThreshold reports whether an estimate is within percent of the
// threshold, on either side.
func nearThreshold(estimate, threshold int64, percent float64) bool {
	margin := float64(threshold) * percent / 100
	return math.Abs(float64(estimate-threshold)) <= margin
}

// exactCount asks the upstream's count_tokens for the request as it would
// go up now (the session's context rendered, then the client's new
// messages), and answers that figure. When the upstream cannot say, it
// answers the estimate: the decision falls back to it, as without the
// setting. Counted in mnemos.proxy.exact_counts by outcome (over, under,
// failed).
func (h *Handler) exactCount(ctx context.Context, tenant string, req *messagesRequest, parts contextapi.Encoded, compacted bool, tail []json.RawMessage, estimate int64) int64 {
	fail := func(err error) int64 {
		h.Log.Warn("messages proxy: count_tokens failed; deciding on the estimate", "tenant", tenant, "session", req.session, "err", err)
		h.metrics.exactCounts.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "failed")))
		return estimate
	}
	body, err := managedBody(req, parts, compacted, tail, nil)
	if err != nil {
		return fail(err)
	}
	// count_tokens takes the request's content, not how to answer it.
	body, err = withoutFields(body, "max_tokens", "stream", "metadata", "temperature", "top_p", "top_k", "stop_sequences", "service_tier", "context_management")
	if err != nil {
		return fail(err)
	}
	counted, err := h.countUp(ctx, req.client, req.upstream, body)
	if err != nil {
		return fail(err)
	}
	outcome := "under"
	if counted >= estimate {
		outcome = "over"
	}
	h.metrics.exactCounts.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
	h.Log.Debug("messages proxy: exact count near the threshold", "tenant", tenant, "session", req.session, "estimate", estimate, "exact", counted)
	return counted
}

// exactCountWait bounds the count_tokens call: past it, the estimate decides.
const exactCountWait = 5 * time.Second

// withoutFields is a JSON object without the named top-level fields.
func withoutFields(body []byte, names ...string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	for _, n := range names {
		delete(fields, n)
	}
	return json.Marshal(fields)
}
