package openaiwire

import (
	"encoding/json"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// ChatInput maps a Chat Completions request's messages. The system and
// developer messages it opens with are its instructions; a user message
// becomes text, image and document blocks of a user message, a tool
// message a tool_result block of one, an assistant message its text and a
// tool_use block per tool call, consecutive messages of the same side in
// one message. A message it does not know whole (a system or developer
// message later on, the legacy function role, audio) is kept as sent
// (BlockItem), on the user's side unless it is an assistant's.
func ChatInput(messages []json.RawMessage) (Conversation, error) {
	return chatDialect.input(messages)
}

var chatDialect = dialect{what: "message", instruction: chatInstruction, mapped: chatMapped, side: chatSide, joins: chatJoins,
	instructs: instructs, sideOf: chatSideOf}

func chatInstruction(raw json.RawMessage) bool {
	o, err := parseObj(raw)
	return err == nil && instructs(o)
}

// chatJoins is the default of a block made from Chat Completions: a tool
// call joins the assistant message its block follows; every other block
// opens a message.
func chatJoins(prev *turn.Block, b turn.Block, role string) bool {
	if b.Type != turn.BlockToolUse || role != "assistant" || prev == nil {
		return false
	}
	switch prev.Type {
	case turn.BlockText, turn.BlockImage, turn.BlockDocument, turn.BlockToolUse:
		return true
	}
	return false
}

// chatSide is the side of a message kept whole.
func chatSide(raw json.RawMessage) string {
	if o, err := parseObj(raw); err == nil {
		return chatSideOf(o)
	}
	return "user"
}

func chatSideOf(o obj) string {
	if r, _ := o.str("role"); r == "assistant" {
		return "assistant"
	}
	return "user"
}

func chatMapped(raw json.RawMessage) (string, []piece, error) {
	o, err := parseObj(raw)
	if err != nil {
		return "", nil, err
	}
	role, _ := o.str("role")
	switch role {
	case "user":
		return chatUser(o)
	case "assistant":
		return chatAssistant(o)
	case "tool":
		p, err := chatTool(o)
		return "user", []piece{p}, err
	}
	return "", nil, errShape
}

func chatUser(o obj) (string, []piece, error) {
	rest := o.clone()
	delete(rest, "content")
	item := residue(rest, `{"role":"user"}`)
	pieces, as, err := chatContent(o, "user")
	if err != nil || len(pieces) == 0 {
		return "", nil, errShape
	}
	pieces[0].opens, pieces[0].note.Item, pieces[0].note.As = true, item, as
	return "user", pieces, nil
}

// chatContent maps a message's content, a string or parts, and says its
// form when it is not a string: "parts", or for an assistant's "null" and
// "absent".
func chatContent(o obj, role string) ([]piece, string, error) {
	raw, has := o["content"]
	if !has {
		return nil, asAbsent, nil
	}
	if string(raw) == "null" {
		return nil, asNull, nil
	}
	if text, ok := o.str("content"); ok {
		return []piece{{block: turn.Block{Type: turn.BlockText, Text: text}}}, "", nil
	}
	var parts []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &parts) != nil || len(parts) == 0 {
		return nil, "", errShape
	}
	pieces := make([]piece, 0, len(parts))
	for _, r := range parts {
		p, err := chatPart(r, role)
		if err != nil {
			return nil, "", err
		}
		pieces = append(pieces, p)
	}
	return pieces, asParts, nil
}

// chatPart maps a content part: text and refusal to a text block,
// image_url to an image, file to a document.
func chatPart(raw json.RawMessage, role string) (piece, error) {
	o, err := parseObj(raw)
	if err != nil {
		return piece{}, err
	}
	t, _ := o.str("type")
	rest := o.clone()
	var p piece
	switch t {
	case "text", "refusal":
		text, ok := o.str(t)
		if !ok || t == "refusal" && role != "assistant" {
			return piece{}, errShape
		}
		delete(rest, t)
		p.block = turn.Block{Type: turn.BlockText, Text: text}
		p.note.Part = residue(rest, `{"type":"text"}`)
	case "image_url":
		inner, ok := o.sub("image_url")
		if !ok {
			return piece{}, errShape
		}
		u, ok := inner.str("url")
		if !ok {
			return piece{}, errShape
		}
		delete(inner, "url")
		rest["image_url"] = inner.marshal()
		p.block, p.media = turn.Block{Type: turn.BlockImage}, mediaSource("url", u)
		p.note.Part = residue(rest, `{"image_url":{},"type":"image_url"}`)
	case "file":
		inner, ok := o.sub("file")
		if !ok {
			return piece{}, errShape
		}
		media, carried, ok := fileSource(inner, false)
		if !ok {
			return piece{}, errShape
		}
		delete(inner, carried)
		rest["file"] = inner.marshal()
		p.block, p.media = turn.Block{Type: turn.BlockDocument}, media
		p.note.Part = residue(rest, `{"file":{},"type":"file"}`)
	default:
		return piece{}, errShape
	}
	return p, nil
}

func chatAssistant(o obj) (string, []piece, error) {
	rest := o.clone()
	delete(rest, "content")
	pieces, as, err := chatContent(o, "assistant")
	if err != nil {
		return "", nil, err
	}
	if as == asNull {
		as = "" // the default of an assistant message without text
	}
	if raw, ok := o["tool_calls"]; ok {
		var calls []json.RawMessage
		if json.Unmarshal(raw, &calls) != nil {
			return "", nil, errShape
		}
		if len(calls) > 0 {
			delete(rest, "tool_calls")
		}
		for _, c := range calls {
			p, err := chatCall(c)
			if err != nil {
				return "", nil, err
			}
			pieces = append(pieces, p)
		}
	}
	if len(pieces) == 0 {
		return "", nil, errShape
	}
	pieces[0].opens, pieces[0].note.Item, pieces[0].note.As = true, residue(rest, `{"role":"assistant"}`), as
	return "assistant", pieces, nil
}

// chatCall maps a tool call, of type function or custom, to a tool_use.
func chatCall(raw json.RawMessage) (piece, error) {
	o, err := parseObj(raw)
	if err != nil {
		return piece{}, err
	}
	id, okID := o.str("id")
	t, _ := o.str("type")
	inner, okInner := o.sub(t)
	if !okID || id == "" || !okInner || t != "function" && t != "custom" {
		return piece{}, errShape
	}
	name, ok := inner.str("name")
	if !ok || name == "" {
		return piece{}, errShape
	}
	p := piece{block: turn.Block{Type: turn.BlockToolUse, ID: id, Name: name}}
	delete(inner, "name")
	key, err := setCallInput(&p, inner, t == "custom")
	if err != nil {
		return piece{}, err
	}
	delete(inner, key)
	rest := o.clone()
	delete(rest, "id")
	rest[t] = inner.marshal()
	p.note.Part = residue(rest, `{"function":{},"type":"function"}`)
	return p, nil
}

func chatTool(o obj) (piece, error) {
	return toolResult(o, "tool_call_id", "content", `{"role":"tool"}`, func(raw json.RawMessage) (piece, error) {
		p, err := chatPart(raw, "user")
		if err == nil && p.block.Type != turn.BlockText {
			err = errShape // a tool message holds text parts only
		}
		return p, err
	})
}

// ChatMessages renders messages as Chat Completions messages: the inverse
// of ChatInput (its instructions go first, as sent). Every message whose
// JSON is one the client sent (sent, which may be nil) is the client's own
// bytes. Thinking blocks are left out.
func ChatMessages(msgs []turn.Message, sent *Originals) ([]json.RawMessage, error) {
	return render(msgs, sent, chatMessageItems)
}

func chatMessageItems(m turn.Message) ([]json.RawMessage, error) {
	var (
		out  []json.RawMessage
		cur  *openMessage
		prev *turn.Block
	)
	flush := func() {
		if cur == nil {
			return
		}
		msg := cur.rest.clone()
		switch {
		case len(cur.parts) > 0:
			msg["content"] = cur.content(true)
		case cur.as == asAbsent:
		default:
			msg["content"] = json.RawMessage("null")
		}
		if len(cur.calls) > 0 {
			raw, _ := turn.Marshal(cur.calls)
			msg["tool_calls"] = raw
		}
		out = append(out, msg.marshal())
		cur = nil
	}
	open := func(n note, role string) error {
		flush()
		rest, err := orDefault(n.Item, `{"role":"`+role+`"}`)
		if err != nil {
			return err
		}
		cur = &openMessage{rest: rest, as: n.As}
		return nil
	}
	for i, b := range m.Content {
		n, media, err := noteOf(b)
		if err != nil {
			return nil, err
		}
		joins := chatJoins(prev, b, m.Role)
		if n.Join != nil {
			joins = *n.Join
		}
		switch b.Type {
		case turn.BlockText, turn.BlockImage, turn.BlockDocument:
			part, err := chatPartOut(b, n, media)
			if err != nil {
				return nil, err
			}
			if cur == nil || !joins || len(cur.calls) > 0 {
				if err := open(n, m.Role); err != nil {
					return nil, err
				}
			}
			cur.add(part, b)
		case turn.BlockToolUse:
			call, err := chatCallOut(b, n)
			if err != nil {
				return nil, err
			}
			if cur == nil || !joins {
				if err := open(n, "assistant"); err != nil {
					return nil, err
				}
			}
			cur.calls = append(cur.calls, call)
		case turn.BlockToolResult:
			flush()
			msg, err := orDefault(n.Item, `{"role":"tool"}`)
			if err != nil {
				return nil, err
			}
			msg.setStr("tool_call_id", b.ToolUseID)
			if msg["content"], err = outputOut(b, n, func(c turn.Block, cn note, media obj) (json.RawMessage, error) {
				return chatPartOut(c, cn, media)
			}); err != nil {
				return nil, err
			}
			out = append(out, msg.marshal())
		default:
			flush()
			item, err := asSent(b)
			if err != nil {
				return nil, err
			}
			if item != nil {
				out = append(out, item)
			}
		}
		prev = &m.Content[i]
	}
	flush()
	return out, nil
}

func chatPartOut(b turn.Block, n note, media obj) (json.RawMessage, error) {
	switch b.Type {
	case turn.BlockText:
		part, err := orDefault(n.Part, `{"type":"text"}`)
		if err != nil {
			return nil, err
		}
		key, _ := part.str("type")
		if key != "refusal" {
			key = "text"
		}
		part.setStr(key, b.Text)
		return part.marshal(), nil
	case turn.BlockImage:
		part, err := orDefault(n.Part, `{"image_url":{},"type":"image_url"}`)
		if err != nil {
			return nil, err
		}
		kind, value, ok := sourceValue(media)
		if !ok || kind != "url" {
			return nil, fmt.Errorf("image: Chat Completions takes a url or base64 source")
		}
		inner, _ := part.sub("image_url")
		if inner == nil {
			inner = obj{}
		}
		inner.setStr("url", value)
		part["image_url"] = inner.marshal()
		return part.marshal(), nil
	default:
		part, err := orDefault(n.Part, `{"file":{},"type":"file"}`)
		if err != nil {
			return nil, err
		}
		field, value, ok := fileField(media)
		if !ok || field == "file_url" {
			return nil, fmt.Errorf("document: Chat Completions takes a file id or data")
		}
		inner, _ := part.sub("file")
		if inner == nil {
			inner = obj{}
		}
		inner.setStr(field, value)
		part["file"] = inner.marshal()
		return part.marshal(), nil
	}
}

func chatCallOut(b turn.Block, n note) (json.RawMessage, error) {
	call, err := orDefault(n.Part, `{"function":{},"type":"function"}`)
	if err != nil {
		return nil, err
	}
	t, _ := call.str("type")
	if t != "custom" {
		t = "function"
	}
	inner, _ := call.sub(t)
	if inner == nil {
		inner = obj{}
	}
	inner.setStr("name", b.Name)
	if t == "custom" {
		inner.setStr("input", customText(b.Input))
	} else {
		inner.setStr("arguments", toolArguments(b.Input, n.Arguments))
	}
	call[t] = inner.marshal()
	call.setStr("id", b.ID)
	return call.marshal(), nil
}
