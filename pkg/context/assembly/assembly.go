// Package assembly renders a session's context, the request the backend
// sends next (see docs/compaction.md), and decides micro-compaction: which old tool
// results to clear without a model call.
//
// Everything here is pure: no I/O, no clock. The same input always renders
// to the same bytes, and a rendering changes only by appending unless a
// recorded decision (a compaction or a micro-compaction) says otherwise, so
// the provider's prompt cache keeps working between rounds.
package assembly

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/tokens"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// ClearedText replaces the content of a tool result that micro-compaction
// or a context-management edit cleared.
const ClearedText = "[Old tool result content cleared]"

// ClearedInput replaces the input of a tool_use a context-management edit
// cleared: the empty object, the one input every tool takes as JSON.
const ClearedInput = "{}"

// Cuts are the recorded decisions of context-management edits (see
// pkg/context/ctxedit): what of the stored messages a context shows less of. Like
// micro-compaction's, they are recorded once and only ever grow.
type Cuts struct {
	// ToolUses holds the tool_use ids whose tool_result content is cleared
	// to ClearedText.
	ToolUses map[string]bool
	// Inputs holds the tool_use ids whose tool_use input is cleared to
	// ClearedInput.
	Inputs map[string]bool
	// Thinking holds the uuids of assistant messages whose thinking and
	// redacted_thinking blocks are dropped. A message that holds nothing
	// else keeps them (an empty message is not a message the API takes).
	Thinking map[string]bool
}

// Empty reports whether c cuts nothing.
func (c Cuts) Empty() bool { return len(c.ToolUses) == 0 && len(c.Inputs) == 0 && len(c.Thinking) == 0 }

// Input is what a session's context is rendered from.
type Input struct {
	// System holds the system text blocks; it may be empty.
	System []turn.Block
	// Head holds the messages the latest compaction made (boundary, summary,
	// restored attachments; for a partial compaction the frozen prefix
	// before them). They are rendered as stored.
	Head []view.Message
	// Messages are the stored conversation messages after the compaction's
	// kept point, in order.
	Messages []view.Message
	// Cleared holds the tool_use ids whose tool_result content a recorded
	// micro-compaction decision cleared. It applies to Messages only.
	Cleared map[string]bool
	// Cuts are the recorded decisions of context-management edits. They
	// apply to Messages only.
	Cuts Cuts
	// Beside holds, by the uuid of a message of Messages, blocks rendered
	// after that message's own: the memories recall surfaced for a user
	// message. They are recorded once and never change, like Cleared.
	Beside map[string]turn.Content
	// Pause, when set, is called after every pauseEvery messages rendered
	// or encoded afresh (not those a memo holds): a heavy request's
	// render rests there (cpu.Pacer). It must not change anything.
	Pause func() `json:"-"`
}

// pauseEvery is how many messages Render and EncodeParts do between calls
// of Input.Pause: a fraction of a millisecond of work, so a paced render
// never runs much past its stretch (the pacer decides by the clock).
const pauseEvery = 50

// Wire is one message exactly as the Anthropic Messages API takes it: no
// uuid or any other field, which the API would refuse.
type Wire struct {
	Role    string       `json:"role"`
	Content turn.Content `json:"content"`
}

// SystemMessage is the Breakpoint.Message of a breakpoint in the system blocks.
const SystemMessage = api.SystemMessage

// Breakpoint is a suggested cache_control position: block Block of message
// Message, or of the system blocks when Message is SystemMessage. It is
// the API's type: a render's breakpoints are answered as they are.
type Breakpoint = api.Breakpoint

// Context is a rendered context.
type Context struct {
	System   []turn.Block `json:"system"`
	Messages []Wire       `json:"messages"`
	// UUIDs is parallel to Messages: the stored message's uuid, "" for a head message.
	UUIDs []string `json:"uuids"`
	// Breakpoints suggest where to put cache_control markers (at most 3).
	// They are kept apart from the blocks so a message's bytes never depend
	// on whether it is still the last one.
	Breakpoints []Breakpoint `json:"breakpoints"`
	// Tokens estimates what is rendered: tokens.EstimateBlock over the
	// system blocks and every message's blocks.
	Tokens int64 `json:"tokens"`

	// memos is parallel to Messages: the memo of a stored message that
	// carries one (nil otherwise), with the variant it was rendered as.
	memos []memoRef
	pause pauser
}

// pauser calls a pause function after every pauseEvery steps of work.
type pauser struct {
	pause func()
	steps int
}

func (p *pauser) step() {
	if p.pause == nil {
		return
	}
	if p.steps++; p.steps%pauseEvery == 0 {
		p.pause()
	}
}

type memoRef struct {
	memo    *view.Memo
	variant uint64
}

// Render builds the context of in: the system blocks, the head as stored,
// then the messages with cleared tool results replaced by ClearedText.
//
// Every cache_control a stored block carries is dropped, in the head too:
// the backends' requests marked whichever block was last at the time, and
// replaying those markers would soon exceed the provider's limit of four.
// The Breakpoints are the only markers this package suggests. Render never
// changes in.
func Render(in Input) Context {
	n := len(in.Head) + len(in.Messages)
	c := Context{
		System:      make([]turn.Block, 0, len(in.System)),
		Messages:    make([]Wire, 0, n),
		UUIDs:       make([]string, 0, n),
		Breakpoints: []Breakpoint{},
		pause:       pauser{pause: in.Pause},
	}
	for _, b := range in.System {
		b = renderBlock(b, cut{})
		c.System = append(c.System, b)
		c.Tokens += tokens.EstimateBlock(b)
	}
	add := func(m view.Message, uuid string, k cut) {
		var ref memoRef
		if m.Memo != nil {
			ref = memoRef{memo: m.Memo, variant: variant(m, k, len(in.Beside[uuid]))}
			if r, ok := m.Memo.Get(ref.variant); ok {
				c.Messages = append(c.Messages, Wire{Role: m.Role, Content: r.Content})
				c.UUIDs = append(c.UUIDs, uuid)
				c.Tokens += r.Tokens
				c.memos = append(c.memos, ref)
				return
			}
		}
		c.pause.step()
		content := renderContent(m.Content, k)
		if extra := in.Beside[uuid]; uuid != "" && len(extra) > 0 {
			content = append(slices.Clip(content), renderContent(extra, cut{})...)
		}
		n := tokens.EstimateContent(content)
		c.Messages = append(c.Messages, Wire{Role: m.Role, Content: content})
		c.UUIDs = append(c.UUIDs, uuid)
		c.Tokens += n
		c.memos = append(c.memos, ref)
		ref.memo.Put(view.Rendering{Variant: ref.variant, Content: content, Tokens: n})
	}
	for _, m := range in.Head {
		m.Memo = nil
		add(m, "", cut{})
	}
	for _, m := range in.Messages {
		add(m, m.UUID, cutOf(m, in.Cleared, in.Cuts))
	}
	c.Breakpoints = breakpoints(c, len(in.Head))
	return c
}

// Shown returns stored messages as Render shows them: cleared tool results
// replaced by ClearedText, the cuts applied, cache_control dropped, Tokens
// estimated again. msgs is not changed. The compactor summarizes what the
// context shows.
func Shown(msgs []view.Message, cleared map[string]bool, cuts Cuts) []view.Message {
	out := make([]view.Message, len(msgs))
	for i, m := range msgs {
		m.Content = renderContent(m.Content, cutOf(m, cleared, cuts))
		m.Tokens = tokens.EstimateContent(m.Content)
		out[i] = m
	}
	return out
}

// cut is what one message is rendered without: the tool results cleared
// (by micro-compaction or an edit), the tool_use inputs cleared, and
// whether its thinking is dropped.
type cut struct {
	cleared, edited map[string]bool
	inputs          map[string]bool
	thinking        bool
}

func cutOf(m view.Message, cleared map[string]bool, cuts Cuts) cut {
	return cut{cleared: cleared, edited: cuts.ToolUses, inputs: cuts.Inputs, thinking: m.UUID != "" && cuts.Thinking[m.UUID]}
}

// result reports whether the result of tool use id is cleared.
func (k cut) result(id string) bool { return k.cleared[id] || k.edited[id] }

// dropsThinking reports whether rendering c drops its thinking blocks:
// when k says so and c holds something else.
func (k cut) dropsThinking(c turn.Content) bool {
	if !k.thinking {
		return false
	}
	var thinking, other bool
	for _, b := range c {
		if isThinking(b) {
			thinking = true
		} else {
			other = true
		}
	}
	return thinking && other
}

func isThinking(b turn.Block) bool {
	return b.Type == turn.BlockThinking || b.Type == turn.BlockRedactedThinking
}

// variant is what a stored message's rendering depends on besides the
// message: how many of its blocks a decision changed (tool results
// cleared, tool_use inputs cleared, thinking dropped) and how many blocks
// recall put beside it. Both only ever grow (a decision, like what recall
// showed, is recorded once and kept), so a rendering made for the same
// variant is the same.
func variant(m view.Message, k cut, beside int) uint64 {
	var n uint64
	for _, b := range m.Content {
		switch {
		case b.Type == turn.BlockToolResult && k.result(b.ToolUseID):
			n++
		case b.Type == turn.BlockToolUse && k.inputs[b.ID]:
			n++
		}
	}
	if k.dropsThinking(m.Content) {
		n++
	}
	return n<<32 | uint64(uint32(beside))
}

// renderContent returns c with the cut applied and cache_control dropped:
// c itself when that changes nothing, a copy otherwise. It never returns
// nil, so empty content is written the same way whatever was stored.
func renderContent(c turn.Content, k cut) turn.Content {
	drop := k.dropsThinking(c)
	if len(c) > 0 && !drop && unchanged(c, k) {
		return c
	}
	out := make(turn.Content, 0, len(c))
	for _, b := range c {
		if drop && isThinking(b) {
			continue
		}
		out = append(out, renderBlock(b, k))
	}
	return out
}

// unchanged reports whether rendering c changes no block: none carries
// cache_control, at the top or in a tool result, no tool result is
// cleared and no tool_use input is.
func unchanged(c turn.Content, k cut) bool {
	for _, b := range c {
		if b.CacheControl != nil {
			return false
		}
		switch b.Type {
		case turn.BlockToolUse:
			if k.inputs[b.ID] {
				return false
			}
		case turn.BlockToolResult:
			if k.result(b.ToolUseID) || (b.Content != nil && !unchanged(*b.Content, cut{})) {
				return false
			}
		}
	}
	return true
}

func renderBlock(b turn.Block, k cut) turn.Block {
	b.CacheControl = nil
	switch b.Type {
	case turn.BlockToolUse:
		if k.inputs[b.ID] {
			b.Input = json.RawMessage(ClearedInput)
		}
		return b
	case turn.BlockToolResult:
	default:
		return b
	}
	if k.result(b.ToolUseID) {
		return clearedBlock(b)
	}
	if b.Content != nil {
		nested := renderContent(*b.Content, cut{})
		b.Content = &nested
	}
	return b
}

// RenderMessage encodes a message no decision cut as Render shows it once
// stored: cache_control dropped. The proxy writes a message the session
// has not stored yet, but whose stored form it knows (an offloaded tool
// result), with it, so that the message's bytes do not change when the
// session stores it.
func RenderMessage(role string, content turn.Content) ([]byte, error) {
	return Wire{Role: role, Content: renderContent(content, cut{})}.MarshalJSON()
}

// ClearedBlock is tool result b as a decision to clear it shows it.
func ClearedBlock(b turn.Block) turn.Block { return clearedBlock(b) }

// ClearedInputBlock is tool_use b as a decision to clear its input shows it.
func ClearedInputBlock(b turn.Block) turn.Block {
	b.Input = json.RawMessage(ClearedInput)
	return b
}

// clearedBlock is tool result b with its content cleared; the tool_use id
// and the error flag stay.
func clearedBlock(b turn.Block) turn.Block {
	content := turn.Content{{Type: turn.BlockText, Text: ClearedText}}
	return turn.Block{Type: turn.BlockToolResult, ToolUseID: b.ToolUseID, IsError: b.IsError, Content: &content}
}

// breakpoints suggests the last system block, the last block of the head
// (stable until the next compaction) and the last block of the last
// message, each the last block that may carry cache_control at or before
// that place.
func breakpoints(c Context, head int) []Breakpoint {
	out := []Breakpoint{}
	for i := len(c.System) - 1; i >= 0; i-- {
		if cacheable(c.System[i]) {
			out = append(out, Breakpoint{Message: SystemMessage, Block: i})
			break
		}
	}
	if bp, ok := lastCacheable(c.Messages[:head]); ok {
		out = append(out, bp)
	}
	if bp, ok := lastCacheable(c.Messages); ok && (len(out) == 0 || out[len(out)-1] != bp) {
		out = append(out, bp)
	}
	return out
}

func lastCacheable(msgs []Wire) (Breakpoint, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		for j := len(msgs[i].Content) - 1; j >= 0; j-- {
			if cacheable(msgs[i].Content[j]) {
				return Breakpoint{Message: i, Block: j}, true
			}
		}
	}
	return Breakpoint{}, false
}

// cacheable reports whether the provider accepts cache_control on b: not on
// thinking blocks, not on empty text.
func cacheable(b turn.Block) bool {
	switch b.Type {
	case turn.BlockThinking, turn.BlockRedactedThinking:
		return false
	case turn.BlockText:
		return b.Text != ""
	}
	return true
}

// Encode writes c as JSON without HTML escaping. The same Context always
// gives the same bytes; nil and empty slices are written alike.
func (c Context) Encode() ([]byte, error) {
	out := c
	if out.System == nil {
		out.System = []turn.Block{}
	}
	if out.Messages == nil {
		out.Messages = []Wire{}
	}
	if out.UUIDs == nil {
		out.UUIDs = []string{}
	}
	if out.Breakpoints == nil {
		out.Breakpoints = []Breakpoint{}
	}
	data, err := turn.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("assembly: encode context: %w", err)
	}
	return data, nil
}

// Prefix returns the bytes the next rendering must start with when nothing
// but appends happened since: every system block, then every message, each
// encoded like Encode does and concatenated in order. Breakpoints, uuids and
// the token estimate are left out. A block that cannot be encoded (raw JSON
// that is not valid, which Encode reports as an error) contributes the text
// of its error instead.
func (c Context) Prefix() []byte {
	system, messages := c.parts()
	return Join(system, messages)
}

// Join concatenates encoded parts, the way Prefix does.
func Join(system, messages [][]byte) []byte {
	n := 0
	for _, p := range system {
		n += len(p)
	}
	for _, p := range messages {
		n += len(p)
	}
	buf := make([]byte, 0, n)
	for _, p := range system {
		buf = append(buf, p...)
	}
	for _, p := range messages {
		buf = append(buf, p...)
	}
	return buf
}

// EncodeParts encodes each system block and each message once, as Encode
// does, so a caller can both write them and take their Prefix (Join) without
// encoding twice. It reports the first part that cannot be encoded.
func (c Context) EncodeParts() (system, messages [][]byte, err error) {
	system = make([][]byte, len(c.System))
	for i, b := range c.System {
		if system[i], err = b.MarshalJSON(); err != nil {
			return nil, nil, fmt.Errorf("assembly: encode system block %d: %w", i, err)
		}
	}
	messages = make([][]byte, len(c.Messages))
	for i, m := range c.Messages {
		var ref memoRef
		if i < len(c.memos) {
			ref = c.memos[i]
		}
		r, memo := ref.memo.Get(ref.variant)
		if memo && r.Data != nil {
			messages[i] = r.Data
			continue
		}
		c.pause.step()
		if messages[i], err = m.MarshalJSON(); err != nil {
			return nil, nil, fmt.Errorf("assembly: encode message %d: %w", i, err)
		}
		if memo { // Render kept this message's rendering: keep its encoding with it
			r.Data = messages[i]
			ref.memo.Put(r)
		}
	}
	return system, messages, nil
}

// parts is EncodeParts with a failed part standing as its error's text.
func (c Context) parts() (system, messages [][]byte) {
	enc := func(f func() ([]byte, error)) []byte {
		data, err := f()
		if err != nil {
			return []byte(err.Error())
		}
		return data
	}
	system = make([][]byte, len(c.System))
	for i, b := range c.System {
		system[i] = enc(b.MarshalJSON)
	}
	messages = make([][]byte, len(c.Messages))
	for i, m := range c.Messages {
		messages[i] = enc(m.MarshalJSON)
	}
	return system, messages
}

// MarshalJSON writes {"role":…,"content":[…]}, the content encoded once.
func (w Wire) MarshalJSON() ([]byte, error) {
	role, err := turn.Marshal(w.Role)
	if err != nil {
		return nil, err
	}
	content, err := w.Content.MarshalJSON()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, len(role)+len(content)+24)
	buf = append(buf, `{"role":`...)
	buf = append(buf, role...)
	buf = append(buf, `,"content":`...)
	buf = append(buf, content...)
	return append(buf, '}'), nil
}

// IsPrefix reports whether next starts with prev: whether a rendering whose
// Prefix is next can reuse the provider's cache of one whose Prefix is prev.
// False means a cache break.
func IsPrefix(prev, next []byte) bool {
	return bytes.HasPrefix(next, prev)
}
