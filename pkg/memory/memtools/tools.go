// Package memtools gives a model tools over the memories of one scope —
// list, read, write, edit and delete memories, read and write the index —
// an Executor that runs the model's calls against the memory store as one
// bound actor (or stages them, for the caller to apply as one batch), and Loop, the bounded tool loop the extractor and the
// dreamer run: call the model, run its tool calls, feed the results back,
// until it ends its turn or the turns run out.
package memtools

import (
	"encoding/json"
	"fmt"

	"github.com/mnemos-ai/mnemos/pkg/llm"
)

// The tools' names.
const (
	ToolList       = "memory_list"
	ToolRead       = "memory_read"
	ToolWrite      = "memory_write"
	ToolEdit       = "memory_edit"
	ToolDelete     = "memory_delete"
	ToolIndexRead  = "memory_index_read"
	ToolIndexWrite = "memory_index_write"
)

// AllTools lists every tool, in the order they are offered.
var AllTools = []string{ToolList, ToolRead, ToolWrite, ToolEdit, ToolDelete, ToolIndexRead, ToolIndexWrite}

// nameProperty is the input property naming a memory.
const nameProperty = `{"type": "string", "description": "The memory's name: lowercase letters, digits, '-' and '_' (its file is <name>.md; 'name.md' is accepted too).", "maxLength": 80}`

// definitions are the tools' descriptions and input schemas; %s is the scope.
var definitions = map[string]struct {
	description string
	schema      string
}{
	ToolList: {
		"List the memories of %s, most recently updated first: each one's file, type, last update, revision and description.",
		`{"type": "object", "properties": {}, "additionalProperties": false}`,
	},
	ToolRead: {
		"Read one memory of %s: its whole markdown (frontmatter and body), with its revision and the dates it was created and last updated. Relative dates in a memory are relative to its own dates.",
		`{"type": "object", "properties": {"name": ` + nameProperty + `}, "required": ["name"], "additionalProperties": false}`,
	},
	ToolWrite: {
		"Create a memory of %s, or replace the whole of an existing one. Prefer updating an existing memory to creating a near duplicate. The index (MEMORY.md) gets a line for a new memory by itself.",
		`{"type": "object", "properties": {
			"name": ` + nameProperty + `,
			"description": {"type": "string", "description": "One specific line saying what the memory is for; recall picks memories by it.", "maxLength": 300},
			"type": {"type": "string", "enum": ["user", "feedback", "project", "reference"], "description": "user: who the user is; feedback: how to work, as corrected or confirmed; project: facts about the work not in the code; reference: where outside information lives."},
			"body": {"type": "string", "description": "The memory in markdown. Feedback and project memories lead with the rule or fact, then **Why:** and **How to apply:**. Absolute dates only."}
		}, "required": ["name", "description", "type", "body"], "additionalProperties": false}`,
	},
	ToolEdit: {
		"Edit a memory of %s by replacing an exact string of its markdown (frontmatter included) with another. old_string must occur exactly once unless replace_all is true.",
		`{"type": "object", "properties": {
			"name": ` + nameProperty + `,
			"old_string": {"type": "string", "description": "The exact text to replace."},
			"new_string": {"type": "string", "description": "The text to put in its place."},
			"replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."}
		}, "required": ["name", "old_string", "new_string"], "additionalProperties": false}`,
	},
	ToolDelete: {
		"Delete a memory of %s that is wrong, obsolete or merged into another. Deleted memories stay restorable; a run may delete only a few, further deletions are proposed for approval instead.",
		`{"type": "object", "properties": {
			"name": ` + nameProperty + `,
			"reason": {"type": "string", "description": "Why it goes.", "maxLength": 500}
		}, "required": ["name"], "additionalProperties": false}`,
	},
	ToolIndexRead: {
		"Read the index (MEMORY.md) of %s: one line per memory, '- [Title](name.md) — hook'.",
		`{"type": "object", "properties": {}, "additionalProperties": false}`,
	},
	ToolIndexWrite: {
		"Replace the index (MEMORY.md) of %s, to reorder it or shorten its hooks. Every line is '- [Title](name.md) — hook', at most %d characters, pointing to an existing memory, each memory once; memories left out are appended.",
		`{"type": "object", "properties": {"content": {"type": "string", "description": "The whole new index."}}, "required": ["content"], "additionalProperties": false}`,
	},
}

// tools returns the llm.Tool definitions of names for scope.
func tools(names []string, scope string, lineMax int) []llm.Tool {
	out := make([]llm.Tool, 0, len(names))
	for _, n := range names {
		d := definitions[n]
		desc := fmt.Sprintf(d.description, scope)
		if n == ToolIndexWrite {
			desc = fmt.Sprintf(d.description, scope, lineMax)
		}
		out = append(out, llm.Tool{Name: n, Description: desc, InputSchema: json.RawMessage(d.schema)})
	}
	return out
}
