package assembly_test

import (
	"encoding/json"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

func text(s string) turn.Block { return turn.Block{Type: turn.BlockText, Text: s} }

func toolUse(id, name string) turn.Block {
	return turn.Block{Type: turn.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(`{"path":"/a"}`)}
}

func toolResult(id, s string) turn.Block {
	c := turn.Content{text(s)}
	return turn.Block{Type: turn.BlockToolResult, ToolUseID: id, Content: &c}
}

func stored(uuid string, pos int64, role string, blocks ...turn.Block) view.Message {
	return view.Message{UUID: uuid, Position: pos, Round: pos + 1, Role: role, Content: turn.Content(blocks)}
}

func made(role string, blocks ...turn.Block) view.Message {
	return view.Message{Position: -1, Role: role, Content: turn.Content(blocks)}
}
