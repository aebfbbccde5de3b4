package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/accounting"
	"github.com/mnemos-ai/mnemos/pkg/context/assembly"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// The prompt cache and the tool results the accountant offloads (see
// docs/context-management.md, "The prompt cache"). A result over the
// offload's threshold is sent whole once, in the round that brings it,
// and as its preview from the next round on. Two things keep that from
// costing more than sending it whole every time:
//
//   - the rounds the client sent before the current one are rendered with
//     their results offloaded as the accountant will store them, byte for
//     byte, whether or not it has applied them yet: the bytes of a round do
//     not depend on how far behind the accountant is, so they change once,
//     when the round stops being the current one, and never again;
//   - the current round's results that will be offloaded go after the
//     request's last cache breakpoint: the client's marker on them (or on a
//     block after them) moves to the block before the first of them. They
//     are read once, as plain input, instead of written to the cache at
//     1.25 times the price and never read from it.

// offloadRounds is msgs — the client's messages from position start on,
// as it sent them — with the tool results the accountant will offload, in
// every round before the current one, replaced by the previews it will
// store in their place (a round ends at an assistant message; what
// follows the last one is the current round). next holds the tool_use ids
// of the current round's results that the accountant will offload: they
// are sent whole this once. msgs is not changed.
func offloadRounds(off accounting.Offload, tenant, thread string, req *messagesRequest, start int, msgs []json.RawMessage) (out []json.RawMessage, next map[string]bool, err error) {
	idFor := func(toolUseID string) string { return accounting.ToolResultID(tenant, thread, toolUseID) }
	out = msgs
	from := 0
	for i := range msgs {
		m, err := req.turnAt(start + i)
		if err != nil {
			return msgs, nil, err
		}
		if m.Role != "assistant" {
			continue
		}
		if out, err = offloadRound(off, idFor, req, start, from, i+1, out); err != nil {
			return msgs, nil, err
		}
		from = i + 1
	}
	round := make([]turn.Message, 0, len(msgs)-from)
	for i := from; i < len(msgs); i++ {
		m, err := req.turnAt(start + i)
		if err != nil {
			return msgs, nil, err
		}
		round = append(round, m)
	}
	_, decisions, err := off.Apply(round, nil, idFor)
	if err != nil {
		return msgs, nil, err
	}
	for _, d := range decisions {
		if next == nil {
			next = map[string]bool{}
		}
		next[d.ToolUseID] = true
	}
	return out, next, nil
}

// offloadRound replaces msgs[from:to], one round of the client's, by the
// messages the accountant will store for it, where its offload changes
// them; msgs is copied before its first change.
func offloadRound(off accounting.Offload, idFor func(string) string, req *messagesRequest, start, from, to int, msgs []json.RawMessage) ([]json.RawMessage, error) {
	round := make([]turn.Message, 0, to-from)
	for i := from; i < to; i++ {
		m, err := req.turnAt(start + i)
		if err != nil {
			return nil, err
		}
		round = append(round, m)
	}
	shown, decisions, err := off.Apply(round, nil, idFor)
	if err != nil || len(decisions) == 0 {
		return msgs, err
	}
	offloaded := make(map[string]bool, len(decisions))
	for _, d := range decisions {
		offloaded[d.ToolUseID] = true
	}
	copied := false
	for j, m := range shown {
		if !holdsResult(m.Content, offloaded) {
			continue
		}
		data, err := assembly.RenderMessage(m.Role, m.Content)
		if err != nil {
			return nil, fmt.Errorf("proxy: render an offloaded message: %w", err)
		}
		if !copied {
			msgs, copied = append([]json.RawMessage(nil), msgs...), true
		}
		msgs[from+j] = data
	}
	return msgs, nil
}

// holdsResult reports whether c holds a tool result of one of ids.
func holdsResult(c turn.Content, ids map[string]bool) bool {
	for _, b := range c {
		if b.Type == turn.BlockToolResult && ids[b.ToolUseID] {
			return true
		}
	}
	return false
}

// wireBlock is what moveBreakpoint reads of a block.
type wireBlock struct {
	Type         string          `json:"type"`
	ToolUseID    string          `json:"tool_use_id"`
	Text         string          `json:"text"`
	CacheControl json.RawMessage `json:"cache_control"`
}

// moveBreakpoint moves the cache breakpoints the client put on the first
// tool result of ids in msgs, or on any block after it, to the last block
// before it that may carry one: what is offloaded from the next round on
// is then read as plain input, never written to the cache. msgs holds the
// whole request's messages; those it changes are copied. A request with no
// such result, with no marker on or after it, or with no block before it
// to take the marker is returned as it is.
func moveBreakpoint(msgs []json.RawMessage, ids map[string]bool) ([]json.RawMessage, error) {
	if len(ids) == 0 {
		return msgs, nil
	}
	w := &wireMessages{raw: msgs, msgs: make([]wireMessage, len(msgs)), blocks: make([][]wireBlock, len(msgs))}
	// The result is in the current round, at the end: the messages are
	// read from the last one back to it.
	first, marked, marker, err := w.markedFrom(ids)
	if err != nil || first.msg < 0 || len(marked) == 0 {
		return msgs, err
	}
	to, err := w.markableBefore(first)
	if err != nil || to.msg < 0 {
		return msgs, err
	}
	changed := map[int]bool{}
	for _, at := range marked {
		if err := w.setMarker(at, nil); err != nil {
			return msgs, err
		}
		changed[at.msg] = true
	}
	if err := w.setMarker(to, marker); err != nil {
		return msgs, err
	}
	changed[to.msg] = true
	out := append([]json.RawMessage(nil), msgs...)
	for mi := range changed {
		if out[mi], err = turn.Marshal(w.msgs[mi]); err != nil {
			return msgs, err
		}
	}
	return out, nil
}

// blockAt is where a block is: its message and its place in it.
type blockAt struct{ msg, block int }

// wireMessages are a request's messages, each decoded block by block once
// it is read (load).
type wireMessages struct {
	raw    []json.RawMessage
	msgs   []wireMessage
	blocks [][]wireBlock
	loaded []bool
}

// load decodes message mi; ok is false for a message whose content is a
// string, which holds no block.
func (w *wireMessages) load(mi int) (ok bool, err error) {
	if w.loaded == nil {
		w.loaded = make([]bool, len(w.raw))
	}
	if w.loaded[mi] {
		return w.msgs[mi].Content != nil, nil
	}
	w.loaded[mi] = true
	if json.Unmarshal(w.raw[mi], &w.msgs[mi]) != nil {
		w.msgs[mi].Content = nil
		return false, nil //nolint:nilerr // a string content holds no block
	}
	w.blocks[mi] = make([]wireBlock, len(w.msgs[mi].Content))
	for bi, raw := range w.msgs[mi].Content {
		if err := json.Unmarshal(raw, &w.blocks[mi][bi]); err != nil {
			return false, fmt.Errorf("proxy: read message %d block %d: %w", mi, bi, err)
		}
	}
	return w.msgs[mi].Content != nil, nil
}

// markedFrom finds the first tool result of ids, reading back from the last
// message, and the blocks from it on that carry a marker, with the marker
// (the first one's, as sent). first.msg is -1 when no result is found.
func (w *wireMessages) markedFrom(ids map[string]bool) (first blockAt, marked []blockAt, marker json.RawMessage, err error) {
	first = blockAt{-1, -1}
	for mi := len(w.raw) - 1; mi >= 0 && first.msg < 0; mi-- {
		ok, err := w.load(mi)
		if err != nil || !ok {
			return blockAt{-1, -1}, nil, nil, err
		}
		for bi := len(w.blocks[mi]) - 1; bi >= 0; bi-- {
			b := w.blocks[mi][bi]
			if len(b.CacheControl) > 0 && string(b.CacheControl) != "null" {
				marked, marker = append(marked, blockAt{mi, bi}), b.CacheControl
			}
			if w.msgs[mi].Role == "user" && b.Type == "tool_result" && ids[b.ToolUseID] {
				first = blockAt{mi, bi}
			}
		}
	}
	return first, marked, marker, nil
}

// markableBefore is the last block before at that the API lets carry a
// marker; msg is -1 when there is none.
func (w *wireMessages) markableBefore(at blockAt) (blockAt, error) {
	for mi := at.msg; mi >= 0; mi-- {
		ok, err := w.load(mi)
		if err != nil || !ok {
			return blockAt{-1, -1}, err
		}
		bi := len(w.blocks[mi]) - 1
		if mi == at.msg {
			bi = at.block - 1
		}
		for ; bi >= 0; bi-- {
			if markable(w.blocks[mi][bi]) {
				return blockAt{mi, bi}, nil
			}
		}
	}
	return blockAt{-1, -1}, nil
}

// setMarker sets the marker of the block at at (nil: takes it out).
func (w *wireMessages) setMarker(at blockAt, marker json.RawMessage) error {
	raw, err := withCacheControl(w.msgs[at.msg].Content[at.block], marker)
	if err != nil {
		return err
	}
	w.msgs[at.msg].Content[at.block] = raw
	return nil
}

// markable reports whether the API takes cache_control on b: not on
// thinking, nor on empty text.
func markable(b wireBlock) bool {
	switch b.Type {
	case "thinking", "redacted_thinking":
		return false
	case "text":
		return b.Text != ""
	}
	return true
}

// withCacheControl is block raw with its cache_control set to marker, or
// taken out when marker is nil; its other fields stay as they were sent.
func withCacheControl(raw json.RawMessage, marker json.RawMessage) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("proxy: a block that is not an object: %w", err)
	}
	if marker == nil {
		delete(fields, "cache_control")
	} else {
		fields["cache_control"] = bytes.Clone(marker)
	}
	return turn.Marshal(fields)
}

// cacheAware is the body of a request whose thread has nothing stored,
// with the rounds before its current one offloaded and its breakpoint
// moved (offloadRounds, moveBreakpoint); body itself when neither changes
// anything.
func cacheAware(req *messagesRequest, off accounting.Offload, tenant, thread string, body []byte) ([]byte, error) {
	if req.openai != nil || len(req.messages) == 0 {
		return body, nil
	}
	msgs, next, err := offloadRounds(off, tenant, thread, req, 0, req.messages)
	if err != nil {
		return body, err
	}
	if msgs, err = moveBreakpoint(msgs, next); err != nil {
		return body, err
	}
	if sameSlices(msgs, req.messages) {
		return body, nil
	}
	return encodeFields(req.fields, "messages", msgs)
}

// sameSlices reports whether a and b hold the same slices, element by
// element (the same backing arrays, not equal bytes).
func sameSlices(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) || (len(a[i]) > 0 && &a[i][0] != &b[i][0]) {
			return false
		}
	}
	return true
}
