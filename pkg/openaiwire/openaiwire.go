// Package openaiwire maps OpenAI's wire formats — the Responses API's items
// and the Chat Completions API's messages — to the turn content Mnemos
// records (pkg/turn) and back, without loss: what a request sent decodes to
// messages of text, tool_use, tool_result, image and document blocks that
// accounting, notes, extraction and recall read as they read an Anthropic
// session's, and those messages render back to the same JSON. It also reads
// the usage and the answers, whole or streamed, the two APIs return.
//
// The package is named for what it translates, the OpenAI wire, the way
// pkg/turn is named for the turn: it holds no HTTP and no state, so the
// proxy's OpenAI routes, tests and tools can all use it.
//
// What a block does not carry of its item (an item id, a status, an output
// text's annotations, a function call's arguments as the model wrote them)
// rides in the block's source, under the key "openai" (a note); a block
// Mnemos made has none and renders the plain way. An item the mapping does
// not know, or does not know whole, is kept as it came in a block of type
// openai_item. docs/openai-api.md has the tables.
package openaiwire

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// BlockItem is the type of the block that keeps an item (or a Chat
// message) whole, as {"type":"openai_item","item":<the item as sent>}.
// Mnemos does not know the type, so it stores the block as sent and counts
// its size (turn.Block.Raw).
const BlockItem = "openai_item"

// Conversation is a request's history as a round records it.
type Conversation struct {
	// Instructions are the system and developer items (Chat: messages)
	// the history opens with, as sent: the request's prefix, like the
	// instructions field and the tools, not messages of the conversation.
	Instructions []json.RawMessage
	// Messages are the rest, folded into user and assistant messages.
	Messages []turn.Message
}

// note is what a block does not carry of the item or part it came from.
// Every field is left out when it is the default, so a block of a plain
// item has no note at all.
type note struct {
	// Item is the item's own fields less those its blocks carry, on the
	// block that opens the item.
	Item json.RawMessage `json:"item,omitempty"`
	// Part is the content part's own fields less those the block carries.
	Part json.RawMessage `json:"part,omitempty"`
	// Join says whether the block continues the item of the block before
	// it (true) or opens one (false), when that is not the default.
	Join *bool `json:"join,omitempty"`
	// As is the form of the item's content when it is not the default:
	// "string", "parts", "null" or "absent".
	As string `json:"as,omitempty"`
	// Arguments is a function call's arguments as sent, when they are not
	// the canonical JSON of the block's input.
	Arguments *string `json:"arguments,omitempty"`
}

func (n note) empty() bool {
	return len(n.Item) == 0 && len(n.Part) == 0 && n.Join == nil && n.As == "" && n.Arguments == nil
}

// Content forms (note.As).
const (
	asString = "string"
	asParts  = "parts"
	asNull   = "null"
	asAbsent = "absent"
)

// noteKey is the key of the note in a block's source.
const noteKey = "openai"

// noteOf reads a block's note, and its source less the note (the media
// source of an image or document).
func noteOf(b turn.Block) (note, obj, error) {
	var n note
	if len(b.Source) == 0 {
		return n, nil, nil
	}
	src, err := parseObj(b.Source)
	if err != nil {
		return n, nil, fmt.Errorf("block %s: source: %w", b.Type, err)
	}
	if raw, ok := src[noteKey]; ok {
		if err := json.Unmarshal(raw, &n); err != nil {
			return n, nil, fmt.Errorf("block %s: note: %w", b.Type, err)
		}
		delete(src, noteKey)
	}
	return n, src, nil
}

// withNote sets a block's source: the media source (nil for none) and the
// note, when it says anything.
func withNote(b *turn.Block, media obj, n note) error {
	if n.empty() && media == nil {
		b.Source = nil
		return nil
	}
	src := obj{}
	for k, v := range media {
		src[k] = v
	}
	if !n.empty() {
		raw, err := turn.Marshal(n)
		if err != nil {
			return err
		}
		src[noteKey] = raw
	}
	raw, err := turn.Marshal(src)
	if err != nil {
		return err
	}
	b.Source = raw
	return nil
}

// whole keeps raw as it came, in a block of type openai_item.
func whole(raw json.RawMessage) turn.Block {
	var buf bytes.Buffer
	buf.WriteString(`{"type":"` + BlockItem + `","item":`)
	buf.Write(bytes.TrimSpace(raw))
	buf.WriteByte('}')
	return turn.Block{Type: BlockItem, Raw: buf.Bytes()}
}

// itemOf is the item an openai_item block keeps.
func itemOf(b turn.Block) (json.RawMessage, error) {
	var w struct {
		Item json.RawMessage `json:"item"`
	}
	if err := json.Unmarshal(b.Raw, &w); err != nil || len(w.Item) == 0 {
		return nil, fmt.Errorf("block %s: want {\"item\": …}", BlockItem)
	}
	return w.Item, nil
}

// asSent is the item a block that no mapping renders stands for: the item
// an openai_item block keeps, a block of another type Mnemos does not know
// as it came, and nothing for thinking, which no OpenAI item holds.
func asSent(b turn.Block) (json.RawMessage, error) {
	switch b.Type {
	case BlockItem:
		return itemOf(b)
	case turn.BlockThinking, turn.BlockRedactedThinking:
		return nil, nil
	}
	return b.Raw, nil
}

// obj is a JSON object, its values as sent.
type obj map[string]json.RawMessage

// errShape says an item is not of the shape the mapping reads: it is then
// kept whole.
var errShape = errors.New("not of the mapped shape")

func parseObj(raw []byte) (obj, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errShape
	}
	var o obj
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	return o, nil
}

// str is the string at key, when there is one.
func (o obj) str(key string) (string, bool) {
	raw, ok := o[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// setStr sets key to the string s.
func (o obj) setStr(key, s string) {
	raw, _ := turn.Marshal(s) // a string always encodes
	o[key] = raw
}

// sub is the object at key, when there is one.
func (o obj) sub(key string) (obj, bool) {
	raw, ok := o[key]
	if !ok {
		return nil, false
	}
	s, err := parseObj(raw)
	return s, err == nil
}

func (o obj) clone() obj {
	c := make(obj, len(o))
	for k, v := range o {
		c[k] = v
	}
	return c
}

func (o obj) marshal() json.RawMessage {
	raw, _ := turn.Marshal(map[string]json.RawMessage(o)) // values are valid JSON: they were parsed
	return raw
}

// residue is o as a note keeps it: nil when it equals the default def.
func residue(o obj, def string) json.RawMessage {
	raw := o.marshal()
	if sameJSON(raw, []byte(def)) {
		return nil
	}
	return raw
}

// orDefault is the residue a note kept, or the default.
func orDefault(raw json.RawMessage, def string) (obj, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(def)
	}
	return parseObj(raw)
}

// canonical re-encodes a JSON value with every object's keys sorted and
// numbers as written: two values are the same JSON when their canonical
// forms are equal.
func canonical(data []byte) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return turn.Marshal(v)
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	ca, err := canonical(a)
	if err != nil {
		return false
	}
	cb, err := canonical(b)
	return err == nil && bytes.Equal(ca, cb)
}

// SameJSON reports whether a and b hold the same JSON value, whatever the
// order of their objects' keys and their spacing.
func SameJSON(a, b []byte) bool { return sameJSON(a, b) }

// Originals are the items (or Chat messages) a client sent, by their
// canonical JSON (its key, OriginalKey), so that a rendering re-emits the
// client's own bytes for every item Mnemos left as it was: same JSON, same
// bytes, and the upstream's prompt cache sees the prefix it saw before.
type Originals struct {
	byKey map[string][]json.RawMessage
}

// OriginalKey is the key Originals know an item by: the SHA-256 of its
// canonical JSON, the same for every spelling of the same JSON. A caller
// that sees the same item round after round keeps it (NewOriginalsKeyed).
func OriginalKey(item json.RawMessage) (string, error) {
	c, err := canonical(item)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return string(sum[:]), nil
}

// NewOriginals indexes the items a client sent. It serves one render:
// items of the same JSON sent in different bytes (keys in another order)
// are handed out in the order they were sent.
func NewOriginals(items []json.RawMessage) *Originals {
	keys := make([]string, len(items))
	for i, raw := range items {
		keys[i], _ = OriginalKey(raw) // "" for an item that is not JSON: never handed out
	}
	return NewOriginalsKeyed(items, keys)
}

// NewOriginalsKeyed is NewOriginals with each item's OriginalKey given.
func NewOriginalsKeyed(items []json.RawMessage, keys []string) *Originals {
	o := &Originals{byKey: make(map[string][]json.RawMessage, len(items))}
	for i, raw := range items {
		if keys[i] != "" {
			o.byKey[keys[i]] = append(o.byKey[keys[i]], raw)
		}
	}
	return o
}

// sent is the client's bytes of the item rendered, when it sent the same
// JSON: the first of them not yet handed out, or the last when all were.
func (o *Originals) sent(rendered json.RawMessage) json.RawMessage {
	if o == nil || len(o.byKey) == 0 {
		return rendered
	}
	key, err := OriginalKey(rendered)
	if err != nil {
		return rendered
	}
	raws := o.byKey[key]
	switch len(raws) {
	case 0:
		return rendered
	case 1:
		return raws[0]
	}
	o.byKey[key] = raws[1:]
	return raws[0]
}

// dialect is what the Responses API's mapping and Chat Completions' differ in.
type dialect struct {
	what        string // "item" or "message", for errors
	instruction func(json.RawMessage) bool
	// mapped maps an item it knows whole to the pieces of a message of the
	// role it returns, and fails with any other.
	mapped func(json.RawMessage) (string, []piece, error)
	// side is the role of the message an item kept whole goes to.
	side  func(json.RawMessage) string
	joins func(prev *turn.Block, b turn.Block, role string) bool
	// instructs and sideOf are instruction and side for an item already
	// split into its fields (Spans).
	instructs func(obj) bool
	sideOf    func(obj) string
}

// item maps one item to the pieces of the message of the role it returns:
// mapped, or kept whole. forced, when set, is that role whatever the item.
func (d dialect) item(raw json.RawMessage, forced string) (string, []piece) {
	role, pieces, err := d.mapped(raw)
	if err != nil {
		role, pieces = d.side(raw), []piece{{block: whole(raw), opens: true}}
	}
	if forced != "" {
		role = forced
	}
	return role, pieces
}

// instructs reports whether a message is a system or developer message.
func instructs(o obj) bool {
	role, _ := o.str("role")
	return role == "system" || role == "developer"
}

// input maps a request's items: the instructions they open with, then
// every other item folded into messages.
func (d dialect) input(items []json.RawMessage) (Conversation, error) {
	var c Conversation
	i := 0
	for ; i < len(items) && d.instruction(items[i]); i++ {
		c.Instructions = append(c.Instructions, items[i])
	}
	for ; i < len(items); i++ {
		role, pieces := d.item(items[i], "")
		var err error
		if c.Messages, err = finish(c.Messages, role, pieces, d.joins); err != nil {
			return Conversation{}, fmt.Errorf("%s %d: %w", d.what, i, err)
		}
	}
	return c, nil
}

// render renders each message's items (each), the client's bytes for
// those it sent.
func render(msgs []turn.Message, sent *Originals, each func(turn.Message) ([]json.RawMessage, error)) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for i, m := range msgs {
		items, err := each(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		for _, it := range items {
			out = append(out, sent.sent(it))
		}
	}
	return out, nil
}

// fold appends an item's blocks to the conversation's messages: to the last
// message when it has the same role, else as a new message.
func fold(msgs []turn.Message, role string, blocks []turn.Block) []turn.Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
		return msgs
	}
	return append(msgs, turn.Message{Role: role, Content: blocks})
}

// piece is a block being made, with its note and whether it opens an item.
type piece struct {
	block turn.Block
	media obj
	note  note
	opens bool
}

// finish writes the pieces' notes, join included when the default (given
// the block before each) is not what the item says, and appends the blocks.
func finish(msgs []turn.Message, role string, pieces []piece, joinsByDefault func(prev *turn.Block, b turn.Block, role string) bool) ([]turn.Message, error) {
	var prev *turn.Block
	if n := len(msgs); n > 0 && msgs[n-1].Role == role && len(msgs[n-1].Content) > 0 {
		prev = &msgs[n-1].Content[len(msgs[n-1].Content)-1]
	}
	blocks := make([]turn.Block, 0, len(pieces))
	for i := range pieces {
		p := &pieces[i]
		if p.block.Type != BlockItem {
			if def := joinsByDefault(prev, p.block, role); def == p.opens {
				join := !p.opens
				p.note.Join = &join
			}
			if err := withNote(&p.block, p.media, p.note); err != nil {
				return nil, err
			}
		}
		blocks = append(blocks, p.block)
		prev = &blocks[len(blocks)-1]
	}
	return fold(msgs, role, blocks), nil
}

// dataURL splits a data URL "data:<media type>;base64,<data>" with a media
// type; joining the two gives the URL back exactly.
func dataURL(u string) (mediaType, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	mediaType, data, ok = strings.Cut(rest, ";base64,")
	if !ok || mediaType == "" {
		return "", "", false
	}
	return mediaType, data, true
}

// mediaSource is the source of an image or document block (Anthropic's
// shape, which Mnemos's background calls read) for a URL, a data URL or a
// file id.
func mediaSource(kind, value string) obj {
	src := obj{}
	switch kind {
	case "url":
		if mt, data, ok := dataURL(value); ok {
			src.setStr("type", "base64")
			src.setStr("media_type", mt)
			src.setStr("data", data)
			return src
		}
		src.setStr("type", "url")
		src.setStr("url", value)
	case "file":
		src.setStr("type", "file")
		src.setStr("file_id", value)
	case "data": // a file's data that is no data URL
		src.setStr("type", "base64")
		src.setStr("media_type", "")
		src.setStr("data", value)
	}
	return src
}

// sourceValue is what mediaSource was given: the kind ("url", "file" or
// "data") and the value.
func sourceValue(src obj) (kind, value string, ok bool) {
	t, _ := src.str("type")
	switch t {
	case "base64":
		mt, _ := src.str("media_type")
		data, ok := src.str("data")
		if !ok {
			return "", "", false
		}
		if mt == "" {
			return "data", data, true
		}
		return "url", "data:" + mt + ";base64," + data, true
	case "url":
		u, ok := src.str("url")
		return "url", u, ok
	case "file":
		id, ok := src.str("file_id")
		return "file", id, ok
	}
	return "", "", false
}

// toolInput is a function call's arguments as a tool_use input, and the
// arguments a note must keep: nil when the input's canonical JSON is them.
func toolInput(args string) (json.RawMessage, *string) {
	trimmed := strings.TrimSpace(args)
	if strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed)) {
		if c, err := canonical([]byte(trimmed)); err == nil {
			if string(c) == args {
				return c, nil
			}
			return c, &args
		}
	}
	return json.RawMessage("{}"), &args
}

// toolArguments is the inverse of toolInput: the note's arguments while the
// input is still what they decoded to, else the input's canonical JSON.
func toolArguments(input json.RawMessage, kept *string) string {
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if kept != nil {
		was, _ := toolInput(*kept)
		if sameJSON(was, input) {
			return *kept
		}
	}
	c, err := canonical(input)
	if err != nil {
		return string(input)
	}
	return string(c)
}

// setCallInput sets a tool_use's input from a call's free-form input
// (custom) or its arguments, and says which field of the call it carries.
func setCallInput(p *piece, call obj, custom bool) (string, error) {
	key := "arguments"
	if custom {
		key = "input"
	}
	s, ok := call.str(key)
	if !ok {
		return "", errShape
	}
	if custom {
		p.block.Input = customInput(s)
	} else {
		p.block.Input, p.note.Arguments = toolInput(s)
	}
	return key, nil
}

// customInput is a custom tool's free-form input as a tool_use input.
func customInput(input string) json.RawMessage {
	o := obj{}
	o.setStr("input", input)
	return o.marshal()
}

// customText is the inverse of customInput; a cleared input is "".
func customText(input json.RawMessage) string {
	o, err := parseObj(input)
	if err != nil {
		return ""
	}
	s, _ := o.str("input")
	return s
}
