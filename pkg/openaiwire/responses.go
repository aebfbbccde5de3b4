package openaiwire

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Responses API item types the mapping reads.
const (
	itemMessage              = "message"
	itemFunctionCall         = "function_call"
	itemFunctionCallOutput   = "function_call_output"
	itemCustomToolCall       = "custom_tool_call"
	itemCustomToolCallOutput = "custom_tool_call_output"
	itemReasoning            = "reasoning"
)

// ResponsesInput maps a Responses API request's input items. The system
// and developer messages it opens with are its instructions; every other
// item becomes blocks of a user or an assistant message, consecutive items
// of the same side in one message: a user message, a function_call_output
// (a tool_result) and a custom_tool_call_output on the user's side; an
// assistant message, a function_call and a custom_tool_call (a tool_use), a
// reasoning item (kept whole) on the assistant's. An item it does not know
// whole is kept as sent (BlockItem), on the user's side when its type ends
// in "_output", or it is a system or developer message later in the input,
// else on the assistant's.
func ResponsesInput(items []json.RawMessage) (Conversation, error) {
	return responsesDialect.input(items)
}

var responsesDialect = dialect{what: "item", instruction: responsesInstruction, mapped: responsesMapped, side: responsesSide, joins: responsesJoins,
	instructs: responsesInstructs, sideOf: responsesSideOf}

// responsesInstruction reports whether raw is a system or developer message.
func responsesInstruction(raw json.RawMessage) bool {
	o, err := parseObj(raw)
	return err == nil && responsesInstructs(o)
}

func responsesInstructs(o obj) bool {
	if _, typed := o["type"]; typed {
		if t, _ := o.str("type"); t != itemMessage {
			return false
		}
	}
	return instructs(o)
}

// responsesJoins is the default of a block made from the Responses API:
// every block opens an item of its own, the parts of an item after its
// first say they join it.
func responsesJoins(*turn.Block, turn.Block, string) bool { return false }

// responsesSide is the side of an item kept whole.
func responsesSide(raw json.RawMessage) string {
	o, err := parseObj(raw)
	if err != nil {
		return "user"
	}
	return responsesSideOf(o)
}

func responsesSideOf(o obj) string {
	t, typed := o.str("type")
	if _, has := o["type"]; !has || typed && t == itemMessage {
		if role, _ := o.str("role"); role == "assistant" {
			return "assistant"
		}
		return "user"
	}
	if strings.HasSuffix(t, "_output") {
		return "user"
	}
	return "assistant"
}

func responsesMapped(raw json.RawMessage) (string, []piece, error) {
	o, err := parseObj(raw)
	if err != nil {
		return "", nil, err
	}
	t, typed := o.str("type")
	if _, has := o["type"]; has && !typed {
		return "", nil, errShape
	}
	switch {
	case !typed || t == itemMessage:
		return responsesMessage(o)
	case t == itemFunctionCall || t == itemCustomToolCall:
		p, err := responsesCall(o, t)
		return "assistant", []piece{p}, err
	case t == itemFunctionCallOutput || t == itemCustomToolCallOutput:
		p, err := responsesOutput(o)
		return "user", []piece{p}, err
	}
	return "", nil, errShape
}

func messageDefault(role string) string {
	return `{"role":"` + role + `","type":"message"}`
}

func responsesMessage(o obj) (string, []piece, error) {
	role, _ := o.str("role")
	if role != "user" && role != "assistant" {
		return "", nil, errShape
	}
	rest := o.clone()
	delete(rest, "content")
	item := residue(rest, messageDefault(role))
	if text, ok := o.str("content"); ok {
		p := piece{block: turn.Block{Type: turn.BlockText, Text: text}, opens: true}
		p.note.Item, p.note.As = item, asString
		return role, []piece{p}, nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(o["content"], &parts); err != nil || len(parts) == 0 {
		return "", nil, errShape
	}
	pieces := make([]piece, 0, len(parts))
	for _, raw := range parts {
		p, err := responsesPart(raw, role)
		if err != nil {
			return "", nil, err
		}
		pieces = append(pieces, p)
	}
	pieces[0].opens, pieces[0].note.Item = true, item
	return role, pieces, nil
}

// textPartDefault is the default of a text part in a message of role.
func textPartDefault(role string) string {
	if role == "assistant" {
		return `{"type":"output_text"}`
	}
	return `{"type":"input_text"}`
}

// responsesPart maps a content part: input_text, output_text and refusal to
// a text block, input_image to an image, input_file to a document.
func responsesPart(raw json.RawMessage, role string) (piece, error) {
	o, err := parseObj(raw)
	if err != nil {
		return piece{}, err
	}
	t, _ := o.str("type")
	var p piece
	rest := o.clone()
	switch t {
	case "input_text", "output_text", "refusal":
		key := "text"
		if t == "refusal" {
			key = "refusal"
		}
		text, ok := o.str(key)
		if !ok {
			return piece{}, errShape
		}
		delete(rest, key)
		p.block = turn.Block{Type: turn.BlockText, Text: text}
		p.note.Part = residue(rest, textPartDefault(role))
	case "input_image":
		p.block = turn.Block{Type: turn.BlockImage}
		if u, ok := o.str("image_url"); ok {
			p.media = mediaSource("url", u)
			delete(rest, "image_url")
		} else if id, ok := o.str("file_id"); ok {
			p.media = mediaSource("file", id)
			delete(rest, "file_id")
		} else {
			return piece{}, errShape
		}
		p.note.Part = residue(rest, `{"type":"input_image"}`)
	case "input_file":
		p.block = turn.Block{Type: turn.BlockDocument}
		media, carried, ok := fileSource(o, true)
		if !ok {
			return piece{}, errShape
		}
		p.media = media
		delete(rest, carried)
		p.note.Part = residue(rest, `{"type":"input_file"}`)
	default:
		return piece{}, errShape
	}
	return p, nil
}

// fileSource is the source of a file part (its fields file_id, file_data
// and, in the Responses API, file_url) and the field it carries.
func fileSource(o obj, withURL bool) (obj, string, bool) {
	if id, ok := o.str("file_id"); ok {
		return mediaSource("file", id), "file_id", true
	}
	if data, ok := o.str("file_data"); ok {
		if _, _, isURL := dataURL(data); isURL {
			return mediaSource("url", data), "file_data", true
		}
		return mediaSource("data", data), "file_data", true
	}
	if u, ok := o.str("file_url"); ok && withURL && !strings.HasPrefix(u, "data:") {
		return mediaSource("url", u), "file_url", true
	}
	return nil, "", false
}

// fileField is the field of a file part a document's source gives back.
func fileField(src obj) (string, string, bool) {
	kind, value, ok := sourceValue(src)
	switch {
	case !ok:
		return "", "", false
	case kind == "file":
		return "file_id", value, true
	case kind == "data" || strings.HasPrefix(value, "data:"):
		return "file_data", value, true
	}
	return "file_url", value, true
}

func responsesCall(o obj, t string) (piece, error) {
	id, okID := o.str("call_id")
	name, okName := o.str("name")
	if !okID || !okName || id == "" || name == "" {
		return piece{}, errShape
	}
	rest := o.clone()
	delete(rest, "call_id")
	delete(rest, "name")
	p := piece{block: turn.Block{Type: turn.BlockToolUse, ID: id, Name: name}, opens: true}
	key, err := setCallInput(&p, o, t == itemCustomToolCall)
	if err != nil {
		return piece{}, err
	}
	delete(rest, key)
	p.note.Item = residue(rest, `{"type":"function_call"}`)
	return p, nil
}

func responsesOutput(o obj) (piece, error) {
	return toolResult(o, "call_id", "output", `{"type":"function_call_output"}`, func(raw json.RawMessage) (piece, error) {
		return responsesPart(raw, "user")
	})
}

// toolResult maps a tool's output (a Responses output item, a Chat tool
// message): the call's id at idKey, the output at outputKey, def the
// default of the rest.
func toolResult(o obj, idKey, outputKey, def string, part func(json.RawMessage) (piece, error)) (piece, error) {
	id, ok := o.str(idKey)
	if !ok || id == "" {
		return piece{}, errShape
	}
	rest := o.clone()
	delete(rest, idKey)
	delete(rest, outputKey)
	p := piece{block: turn.Block{Type: turn.BlockToolResult, ToolUseID: id}, opens: true}
	p.note.Item = residue(rest, def)
	content, as, err := outputContent(o[outputKey], part)
	if err != nil {
		return piece{}, err
	}
	p.block.Content, p.note.As = &content, as
	return p, nil
}

// outputContent maps a tool's output, a string or a list of parts, to a
// tool result's content.
func outputContent(raw json.RawMessage, part func(json.RawMessage) (piece, error)) (turn.Content, string, error) {
	var text string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &text) == nil {
		return turn.Content{{Type: turn.BlockText, Text: text}}, "", nil
	}
	var parts []json.RawMessage
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
		return nil, "", errShape
	}
	content := make(turn.Content, 0, len(parts))
	for _, r := range parts {
		p, err := part(r)
		if err != nil {
			return nil, "", err
		}
		if err := withNote(&p.block, p.media, p.note); err != nil {
			return nil, "", err
		}
		content = append(content, p.block)
	}
	return content, asParts, nil
}

// ResponsesItems renders messages as Responses API input items: the
// inverse of ResponsesInput (its instructions go first, as sent, and are
// not among the messages). Every item whose JSON is one the client sent
// (sent, which may be nil) is the client's own bytes. Blocks no item can
// hold (thinking, which only Anthropic's models write) are left out.
func ResponsesItems(msgs []turn.Message, sent *Originals) ([]json.RawMessage, error) {
	return render(msgs, sent, responsesMessageItems)
}

// openMessage is a message item being rendered.
type openMessage struct {
	rest  obj
	as    string
	parts []json.RawMessage
	texts []string // the parts' text, "" and false in isText for media
	text  []bool
	calls []json.RawMessage // Chat: its tool calls
}

func (om *openMessage) add(part json.RawMessage, b turn.Block) {
	om.parts = append(om.parts, part)
	om.texts = append(om.texts, b.Text)
	om.text = append(om.text, b.Type == turn.BlockText)
}

// content is the message's content: a string when it was one (or, absent a
// note, when chat is set and it is one text), else its parts.
func (om *openMessage) content(chat bool) json.RawMessage {
	single := len(om.parts) == 1 && om.text[0]
	if single && (om.as == asString || chat && om.as == "") {
		raw, _ := turn.Marshal(om.texts[0])
		return raw
	}
	raw, _ := turn.Marshal(om.parts)
	return raw
}

func responsesMessageItems(m turn.Message) ([]json.RawMessage, error) {
	var (
		out []json.RawMessage
		cur *openMessage
	)
	flush := func() {
		if cur == nil {
			return
		}
		item := cur.rest.clone()
		item["content"] = cur.content(false)
		out = append(out, item.marshal())
		cur = nil
	}
	for _, b := range m.Content {
		switch b.Type {
		case turn.BlockText, turn.BlockImage, turn.BlockDocument:
			n, media, err := noteOf(b)
			if err != nil {
				return nil, err
			}
			part, err := responsesPartOut(b, n, media, m.Role)
			if err != nil {
				return nil, err
			}
			if cur == nil || n.Join == nil || !*n.Join {
				flush()
				rest, err := orDefault(n.Item, messageDefault(m.Role))
				if err != nil {
					return nil, err
				}
				cur = &openMessage{rest: rest, as: n.As}
			}
			cur.add(part, b)
		case turn.BlockToolUse:
			flush()
			item, err := responsesCallOut(b)
			if err != nil {
				return nil, err
			}
			out = append(out, item)
		case turn.BlockToolResult:
			flush()
			item, err := responsesOutputOut(b)
			if err != nil {
				return nil, err
			}
			out = append(out, item)
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
	}
	flush()
	return out, nil
}

// responsesPartOut renders a text, image or document block as a part.
func responsesPartOut(b turn.Block, n note, media obj, role string) (json.RawMessage, error) {
	switch b.Type {
	case turn.BlockText:
		part, err := orDefault(n.Part, textPartDefault(role))
		if err != nil {
			return nil, err
		}
		key := "text"
		if t, _ := part.str("type"); t == "refusal" {
			key = "refusal"
		}
		part.setStr(key, b.Text)
		return part.marshal(), nil
	case turn.BlockImage:
		part, err := orDefault(n.Part, `{"type":"input_image"}`)
		if err != nil {
			return nil, err
		}
		kind, value, ok := sourceValue(media)
		if !ok {
			return nil, fmt.Errorf("image: a source of type base64, url or file")
		}
		if kind == "file" {
			part.setStr("file_id", value)
		} else {
			part.setStr("image_url", value)
		}
		return part.marshal(), nil
	default:
		part, err := orDefault(n.Part, `{"type":"input_file"}`)
		if err != nil {
			return nil, err
		}
		field, value, ok := fileField(media)
		if !ok {
			return nil, fmt.Errorf("document: a source of type base64, url or file")
		}
		part.setStr(field, value)
		return part.marshal(), nil
	}
}

func responsesCallOut(b turn.Block) (json.RawMessage, error) {
	n, _, err := noteOf(b)
	if err != nil {
		return nil, err
	}
	item, err := orDefault(n.Item, `{"type":"function_call"}`)
	if err != nil {
		return nil, err
	}
	item.setStr("call_id", b.ID)
	item.setStr("name", b.Name)
	if t, _ := item.str("type"); t == itemCustomToolCall {
		item.setStr("input", customText(b.Input))
	} else {
		item.setStr("arguments", toolArguments(b.Input, n.Arguments))
	}
	return item.marshal(), nil
}

func responsesOutputOut(b turn.Block) (json.RawMessage, error) {
	n, _, err := noteOf(b)
	if err != nil {
		return nil, err
	}
	item, err := orDefault(n.Item, `{"type":"function_call_output"}`)
	if err != nil {
		return nil, err
	}
	item.setStr("call_id", b.ToolUseID)
	output, err := outputOut(b, n, func(c turn.Block, cn note, media obj) (json.RawMessage, error) {
		return responsesPartOut(c, cn, media, "user")
	})
	if err != nil {
		return nil, err
	}
	item["output"] = output
	return item.marshal(), nil
}

// outputOut renders a tool result's content as a tool's output: a string
// unless it was parts or is more than one text.
func outputOut(b turn.Block, n note, part func(turn.Block, note, obj) (json.RawMessage, error)) (json.RawMessage, error) {
	var content turn.Content
	if b.Content != nil {
		content = *b.Content
	}
	if n.As != asParts {
		switch {
		case len(content) == 0:
			return json.RawMessage(`""`), nil
		case len(content) == 1 && content[0].Type == turn.BlockText:
			return turn.Marshal(content[0].Text)
		}
	}
	parts := make([]json.RawMessage, 0, len(content))
	for _, c := range content {
		switch c.Type {
		case turn.BlockText, turn.BlockImage, turn.BlockDocument:
			cn, media, err := noteOf(c)
			if err != nil {
				return nil, err
			}
			p, err := part(c, cn, media)
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		}
	}
	return turn.Marshal(parts)
}
