// Package history moves a session's history in and out of Mnemos as turn
// events, one JSON object a line (JSON Lines): the events an export writes
// are the ones POST /v1/turns takes, so importing them into a session
// stores the same messages again.
//
// A session keeps its messages and its applied turns, not the events as
// they came (an event's payload is dropped once applied), so an export
// rebuilds each event from the two: the turn's event id and seq, the
// messages stored under that seq (the response is the one marked so), the
// session's agent, memory scope, model and window, and the time the turn
// was applied as occurred_at. A tool result offloaded at ingest is written
// whole again, from its stored copy, so an import offloads it as the
// original did. What no row keeps is not written: the usage, the request
// prefix and a client compaction's marker.
package history

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/mnemos-ai/mnemos/pkg/cpu"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// ContentType is the media type of an export: JSON Lines.
const ContentType = "application/x-ndjson"

// pageRows is how many messages, and how many turns, one read fetches: a
// session is read a page at a time, each page its own short transaction,
// so an export of any size holds a page of rows, never the session.
const pageRows = 250

// Exporter writes one session's history. Open reads the session, so an
// absent one is known before anything is written.
type Exporter struct {
	st     *store.Store
	tenant string
	sess   sessionstate.Session
	pacer  *cpu.Pacer
}

// Summary is what an export wrote.
type Summary struct {
	Events   int
	Messages int
}

// Open reads the session to export; store.ErrNotFound (wrapped) when the
// tenant has no such session. pacer, when set, rests between pages.
func Open(ctx context.Context, st *store.Store, tenant, sessionID string, pacer *cpu.Pacer) (*Exporter, error) {
	e := &Exporter{st: st, tenant: tenant, pacer: pacer}
	err := st.InTx(ctx, tenant, func(tx *store.Tx) error {
		var err error
		e.sess, err = tx.Session(ctx, sessionID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("history.Open: %w", err)
	}
	return e, nil
}

// Session is the session as Open read it: the export goes as far as its
// applied seq and message count then.
func (e *Exporter) Session() sessionstate.Session { return e.sess }

// flusher is a writer that can push what it was given on (an HTTP answer).
type flusher interface{ Flush() }

// WriteTo writes the session's events to w in seq order, one a line, a
// page of rows at a time; after each page it flushes w when w can be.
// Messages and turns are only ever added, so the pages read apart from
// each other still make one history: the one up to the session's count
// when Open read it.
func (e *Exporter) WriteTo(ctx context.Context, w io.Writer) (Summary, error) {
	var sum Summary
	bw := bufio.NewWriterSize(w, 64<<10)
	turns := &turnPages{e: e}
	msgs := &messagePages{e: e}
	for {
		t, tok, err := turns.peek(ctx)
		if err != nil {
			return sum, err
		}
		m, mok, err := msgs.peek(ctx)
		if err != nil {
			return sum, err
		}
		if !tok && !mok {
			break
		}
		// The next event is the lower of the next turn's seq and the next
		// message's: a turn that stored no message of its own (all of its
		// messages re-sent) is an event without messages.
		seq := t.Seq
		if !tok || (mok && m.Seq < seq) {
			seq = m.Seq
		}
		ev := e.event(seq)
		if tok && t.Seq == seq {
			ev.EventID, ev.OccurredAt = t.EventID, t.AppliedAt.UTC()
			turns.next()
		}
		for mok && m.Seq == seq {
			if err := addMessage(&ev, m); err != nil {
				return sum, err
			}
			sum.Messages++
			msgs.next()
			if m, mok, err = msgs.peek(ctx); err != nil {
				return sum, err
			}
		}
		line, err := turn.Marshal(ev)
		if err != nil {
			return sum, fmt.Errorf("history: event of seq %d: %w", seq, err)
		}
		if _, err := bw.Write(append(line, '\n')); err != nil {
			return sum, err
		}
		sum.Events++
		if turns.fresh || msgs.fresh {
			turns.fresh, msgs.fresh = false, false
			if err := flush(bw, w); err != nil {
				return sum, err
			}
			if err := e.pacer.Pause(ctx); err != nil {
				return sum, err
			}
		}
	}
	return sum, flush(bw, w)
}

func flush(bw *bufio.Writer, w io.Writer) error {
	if err := bw.Flush(); err != nil {
		return err
	}
	if f, ok := w.(flusher); ok {
		f.Flush()
	}
	return nil
}

// event is the frame of the event of seq: what the session row says of
// every round. A seq whose turn row is missing gets an event id of its
// own, so its messages are not lost.
func (e *Exporter) event(seq int64) turn.Event {
	s := e.sess
	window := s.ContextWindow
	if window < 1000 { // below the schema's minimum: never given
		window = 0
	}
	return turn.Event{
		Schema: turn.SchemaV1, EventID: "seq-" + strconv.FormatInt(seq, 10), SessionID: s.SessionID, Seq: seq,
		AgentID: s.AgentID, MemoryScope: s.MemoryScope, Model: s.Model, ContextWindow: window, MaxOutputTokens: s.MaxOutputTokens,
		InputMessages: []turn.Message{},
	}
}

// addMessage adds a stored message to its event: as the response when it
// was one, else as an input message.
func addMessage(ev *turn.Event, m storedMessage) error {
	var content turn.Content
	if err := json.Unmarshal(m.Content, &content); err != nil {
		return fmt.Errorf("history: message %s: %w", m.UUID, err)
	}
	restore(content, m.originals)
	msg := turn.Message{UUID: m.UUID, Role: m.Role, Content: content, StopReason: m.StopReason}
	if m.IsResponse {
		ev.Response = &msg
		return nil
	}
	ev.InputMessages = append(ev.InputMessages, msg)
	return nil
}

// restore puts back, in content, the tool results offloaded at ingest:
// originals holds their stored copies by tool_use id. A result whose copy
// is gone (the tenant's retention deleted it) keeps its preview.
func restore(content turn.Content, originals map[string]string) {
	if len(originals) == 0 {
		return
	}
	for i, b := range content {
		orig, ok := originals[b.ToolUseID]
		if b.Type != turn.BlockToolResult || !ok {
			continue
		}
		c := resultContent(orig)
		content[i].Content = &c
	}
}

// resultContent is a tool result's content from its stored copy, which is
// the result's text, or the JSON of its blocks when they were not all
// text (accounting.Offload keeps it so).
func resultContent(orig string) turn.Content {
	if len(orig) > 0 && orig[0] == '[' {
		var blocks turn.Content
		if json.Unmarshal([]byte(orig), &blocks) == nil && len(blocks) > 0 {
			for _, b := range blocks {
				if b.Type != turn.BlockText {
					return blocks
				}
			}
		}
	}
	return turn.Content{{Type: turn.BlockText, Text: orig}}
}

// storedMessage is a stored message with the originals of its offloaded
// tool results.
type storedMessage struct {
	store.Message
	originals map[string]string
}

// turnPages reads the session's applied turns a page at a time.
type turnPages struct {
	e     *Exporter
	page  []store.TurnPoint
	after int64
	done  bool
	fresh bool // a page was read since the last flush
}

func (p *turnPages) peek(ctx context.Context) (store.TurnPoint, bool, error) {
	if len(p.page) == 0 && !p.done {
		err := p.e.st.InTx(ctx, p.e.tenant, func(tx *store.Tx) error {
			var err error
			p.page, err = tx.AppliedTurnsAfter(ctx, p.e.sess.SessionID, p.after, pageRows)
			return err
		})
		if err != nil {
			return store.TurnPoint{}, false, fmt.Errorf("history: turns after seq %d: %w", p.after, err)
		}
		p.fresh = true
		if len(p.page) < pageRows {
			p.done = true
		}
		for i, t := range p.page {
			if t.Seq > p.e.sess.AppliedSeq { // applied since Open read the session
				p.page, p.done = p.page[:i], true
				break
			}
		}
		if len(p.page) > 0 {
			p.after = p.page[len(p.page)-1].Seq
		}
	}
	if len(p.page) == 0 {
		return store.TurnPoint{}, false, nil
	}
	return p.page[0], true, nil
}

func (p *turnPages) next() { p.page = p.page[1:] }

// messagePages reads the session's messages a page at a time, with the
// stored copies of the page's offloaded tool results.
type messagePages struct {
	e     *Exporter
	page  []storedMessage
	from  int64
	done  bool
	fresh bool
}

func (p *messagePages) peek(ctx context.Context) (storedMessage, bool, error) {
	if len(p.page) == 0 && !p.done {
		if err := p.read(ctx); err != nil {
			return storedMessage{}, false, fmt.Errorf("history: messages from position %d: %w", p.from, err)
		}
		p.fresh = true
	}
	if len(p.page) == 0 {
		return storedMessage{}, false, nil
	}
	return p.page[0], true, nil
}

func (p *messagePages) next() { p.page = p.page[1:] }

func (p *messagePages) read(ctx context.Context) error {
	count := p.e.sess.MessageCount
	if p.from >= count {
		p.done = true
		return nil
	}
	id := p.e.sess.SessionID
	return p.e.st.InTx(ctx, p.e.tenant, func(tx *store.Tx) error {
		rows, err := tx.MessagesPage(ctx, id, p.from, pageRows)
		if err != nil {
			return err
		}
		if len(rows) < pageRows {
			p.done = true
		}
		var toolUses []string
		p.page = p.page[:0]
		for _, r := range rows {
			if r.Position >= count { // stored since Open read the session
				p.done = true
				break
			}
			p.page = append(p.page, storedMessage{Message: r})
			toolUses = append(toolUses, toolResultIDs(r.Content)...)
		}
		if len(p.page) > 0 {
			p.from = p.page[len(p.page)-1].Position + 1
		}
		if len(toolUses) == 0 {
			return nil
		}
		originals, err := offloaded(ctx, tx, id, toolUses)
		if err != nil {
			return err
		}
		for i := range p.page {
			p.page[i].originals = originals
		}
		return nil
	})
}

// offloaded reads the stored copies of those of the tool results (by
// tool_use id) that were offloaded, by tool_use id.
func offloaded(ctx context.Context, tx *store.Tx, sessionID string, toolUses []string) (map[string]string, error) {
	decided, err := tx.ReplacementsFor(ctx, sessionID, store.ReplaceOffload, toolUses)
	if err != nil || len(decided) == 0 {
		return nil, err
	}
	out := make(map[string]string, len(decided))
	for toolUse, r := range decided {
		res, err := tx.ToolResult(ctx, r.ToolResultID)
		if errors.Is(err, store.ErrNotFound) {
			continue // expired: the preview stays
		}
		if err != nil {
			return nil, err
		}
		out[toolUse] = res.Content
	}
	return out, nil
}

// toolResultIDs lists the tool_use ids of a stored content's tool_result
// blocks, read without decoding the rest.
func toolResultIDs(content []byte) []string {
	if !bytes.Contains(content, []byte(`"tool_result"`)) {
		return nil
	}
	var blocks []struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return nil
	}
	var out []string
	for _, b := range blocks {
		if b.Type == turn.BlockToolResult && b.ToolUseID != "" {
			out = append(out, b.ToolUseID)
		}
	}
	return out
}
