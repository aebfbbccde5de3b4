// Package ctxedit implements the context-management edits of Anthropic's
// Messages API — their names, parameters, defaults and the shape of what
// they report — for a context Mnemos renders, whatever provider it is sent
// to (see docs/context-management.md):
//
//   - clear_tool_uses_20250919 clears the results (and, when asked, the
//     inputs) of older tool uses once the context is past a trigger;
//   - clear_thinking_20251015 drops the thinking blocks of older assistant
//     turns;
//   - compact_20260112 asks for a compaction past a trigger; this package
//     parses and checks it, the caller runs it.
//
// Unlike the provider, which edits every request afresh, Mnemos records
// what an edit cleared (a Cut) and renders every later context with it
// (assembly.Cuts): a cleared prefix stays cleared, so the prompt cache
// breaks once per cut. Triggers are read on the context as it stands with
// the earlier cuts applied.
//
// Everything here is pure: no I/O, no clock.
package ctxedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// The edit types.
const (
	TypeClearToolUses = "clear_tool_uses_20250919"
	TypeClearThinking = "clear_thinking_20251015"
	TypeCompact       = "compact_20260112"
)

// The defaults and bounds of the parameters.
const (
	// DefaultToolUsesTrigger is clear_tool_uses' trigger: 100,000 input tokens.
	DefaultToolUsesTrigger = 100_000
	// DefaultToolUsesKeep is how many of the most recent tool uses clear_tool_uses keeps.
	DefaultToolUsesKeep = 3
	// DefaultThinkingKeep is how many of the most recent thinking turns clear_thinking keeps.
	DefaultThinkingKeep = 1
	// DefaultCompactTrigger is the compaction edit's trigger: 150,000 input
	// tokens; MinCompactTrigger its smallest.
	DefaultCompactTrigger = 150_000
	MinCompactTrigger     = 50_000
	// MaxInstructions bounds the compaction edit's instructions, in bytes
	// (as POST /v1/sessions/{id}/compact does).
	MaxInstructions = 20_000
	// MaxEdits bounds the edits of one request: one of each type.
	MaxEdits = 3
)

// Trigger and keep types.
const (
	UnitInputTokens   = "input_tokens"
	UnitToolUses      = "tool_uses"
	UnitThinkingTurns = "thinking_turns"
)

// Error codes of a context_management object that cannot be used.
const (
	// CodeUnknownEdit: an edit whose type is none of the three.
	CodeUnknownEdit = "unknown_edit_type"
	// CodeBadParameter: a parameter that is unknown, of the wrong type or
	// out of its bounds.
	CodeBadParameter = "bad_edit_parameter"
	// CodeBadEdits: context_management itself is not an object with an
	// array of edits, or names one type twice.
	CodeBadEdits = "bad_context_management"
)

// Error is a context_management object that cannot be used: its code (one
// of the Code constants) and what is wrong, naming where.
type Error struct {
	Code string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func fail(code, where, format string, args ...any) error {
	return &Error{Code: code, Msg: where + ": " + fmt.Sprintf(format, args...)}
}

// AsError returns err's *Error, if it is one.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Config is a request's context_management: its edits in the order given,
// every default filled. The zero Config edits nothing.
type Config struct {
	Edits []Edit
}

// Edit is one edit: its Type, and the parameters of that type (exactly one
// of the pointers is set).
type Edit struct {
	Type     string
	ToolUses *ToolUses
	Thinking *Thinking
	Compact  *Compact
}

// Threshold is a trigger: clear once the context holds more than Value of
// Unit (input_tokens or tool_uses).
type Threshold struct {
	Unit  string
	Value int64
}

// ToolUses are the parameters of clear_tool_uses_20250919.
type ToolUses struct {
	// Trigger: past it (more input tokens, or more tool uses whose result
	// is not cleared, than its value), the edit clears.
	Trigger Threshold
	// Keep is how many of the most recent tool uses (of tools not
	// excluded) stay whole.
	Keep int
	// ClearAtLeast: a cut that saves fewer input tokens is not made (0: any).
	ClearAtLeast int64
	// ExcludeTools names the tools whose uses are never cleared.
	ExcludeTools []string
	// ClearAllInputs and ClearInputsOf say whose tool_use inputs are cleared
	// with their results: every tool's, or the named tools'.
	ClearAllInputs bool
	ClearInputsOf  []string
}

// Excludes reports whether the uses of tool name are never cleared.
func (e ToolUses) Excludes(name string) bool { return slices.Contains(e.ExcludeTools, name) }

// ClearsInput reports whether the inputs of tool name's uses are cleared.
func (e ToolUses) ClearsInput(name string) bool {
	return e.ClearAllInputs || slices.Contains(e.ClearInputsOf, name)
}

// Thinking are the parameters of clear_thinking_20251015.
type Thinking struct {
	// KeepAll keeps every thinking block ("keep": "all"); else the thinking
	// of the Keep most recent turns that hold any stays.
	KeepAll bool
	Keep    int
}

// Compact are the parameters of compact_20260112.
type Compact struct {
	// Trigger: past this many input tokens the session is compacted before
	// the context is answered.
	Trigger int64
	// Instructions replace the summary instructions of the compaction.
	Instructions string
	// PauseAfterCompaction: the answer that made the compaction says it
	// paused there (see docs/context-management.md).
	PauseAfterCompaction bool
}

// Due reports whether a context of inputTokens is past the trigger.
func (c Compact) Due(inputTokens int64) bool { return inputTokens > c.Trigger }

// Compaction returns the compaction edit, if cfg has one.
func (cfg Config) Compaction() (Compact, bool) {
	for _, e := range cfg.Edits {
		if e.Compact != nil {
			return *e.Compact, true
		}
	}
	return Compact{}, false
}

// Clears reports whether cfg holds an edit that clears (tool uses or thinking).
func (cfg Config) Clears() bool {
	for _, e := range cfg.Edits {
		if e.ToolUses != nil || e.Thinking != nil {
			return true
		}
	}
	return false
}

// Parse reads a context_management object, {"edits": [...]}, strictly:
// an unknown edit type, an unknown parameter or one of the wrong type or
// out of bounds, and a type named twice are errors (*Error). Every
// parameter left out (or null) takes its default.
func Parse(data []byte) (Config, error) {
	const where = "context_management"
	var top map[string]json.RawMessage
	if err := strictObject(data, &top); err != nil {
		return Config{}, fail(CodeBadEdits, where, "want an object with an array of edits: %v", err)
	}
	for _, k := range sortedKeys(top) {
		if k != "edits" {
			return Config{}, fail(CodeBadEdits, where, "unknown field %q (want \"edits\")", k)
		}
	}
	raw, ok := top["edits"]
	if !ok || isNull(raw) {
		return Config{}, fail(CodeBadEdits, where, "edits is required: an array of edits")
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return Config{}, fail(CodeBadEdits, where+".edits", "want an array of edits")
	}
	if len(list) > MaxEdits {
		return Config{}, fail(CodeBadEdits, where+".edits", "%d edits; at most %d, one of each type", len(list), MaxEdits)
	}
	var cfg Config
	seen := map[string]bool{}
	for i, item := range list {
		at := fmt.Sprintf("%s.edits[%d]", where, i)
		e, err := parseEdit(at, item)
		if err != nil {
			return Config{}, err
		}
		if seen[e.Type] {
			return Config{}, fail(CodeBadEdits, at, "a second %s edit; name each type once", e.Type)
		}
		seen[e.Type] = true
		cfg.Edits = append(cfg.Edits, e)
	}
	return cfg, nil
}

func parseEdit(at string, data []byte) (Edit, error) {
	var fields map[string]json.RawMessage
	if err := strictObject(data, &fields); err != nil {
		return Edit{}, fail(CodeBadEdits, at, "want an object with a type: %v", err)
	}
	var typ string
	if raw, ok := fields["type"]; !ok || json.Unmarshal(raw, &typ) != nil {
		return Edit{}, fail(CodeUnknownEdit, at+".type", "want one of %s, %s, %s", TypeClearToolUses, TypeClearThinking, TypeCompact)
	}
	delete(fields, "type")
	switch typ {
	case TypeClearToolUses:
		p, err := parseToolUses(at, fields)
		return Edit{Type: typ, ToolUses: p}, err
	case TypeClearThinking:
		p, err := parseThinking(at, fields)
		return Edit{Type: typ, Thinking: p}, err
	case TypeCompact:
		p, err := parseCompact(at, fields)
		return Edit{Type: typ, Compact: p}, err
	default:
		return Edit{}, fail(CodeUnknownEdit, at+".type", "unknown edit type %q; want one of %s, %s, %s", typ, TypeClearToolUses, TypeClearThinking, TypeCompact)
	}
}

func parseToolUses(at string, fields map[string]json.RawMessage) (*ToolUses, error) {
	p := &ToolUses{Trigger: Threshold{Unit: UnitInputTokens, Value: DefaultToolUsesTrigger}, Keep: DefaultToolUsesKeep}
	for _, name := range sortedKeys(fields) {
		raw := fields[name]
		where := at + "." + name
		if isNull(raw) {
			continue
		}
		var err error
		switch name {
		case "trigger":
			p.Trigger, err = threshold(where, raw, 1, UnitInputTokens, UnitToolUses)
		case "keep":
			var t Threshold
			t, err = threshold(where, raw, 0, UnitToolUses)
			p.Keep = int(t.Value)
		case "clear_at_least":
			var t Threshold
			t, err = threshold(where, raw, 0, UnitInputTokens)
			p.ClearAtLeast = t.Value
		case "exclude_tools":
			p.ExcludeTools, err = toolNames(where, raw)
		case "clear_tool_inputs":
			if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("[")) {
				p.ClearInputsOf, err = toolNames(where, raw)
			} else if json.Unmarshal(raw, &p.ClearAllInputs) != nil {
				err = fail(CodeBadParameter, where, "want true, false or an array of tool names")
			}
		default:
			err = fail(CodeBadParameter, where, "unknown parameter of %s (want trigger, keep, clear_at_least, exclude_tools, clear_tool_inputs)", TypeClearToolUses)
		}
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

func parseThinking(at string, fields map[string]json.RawMessage) (*Thinking, error) {
	p := &Thinking{Keep: DefaultThinkingKeep}
	for _, name := range sortedKeys(fields) {
		raw := fields[name]
		where := at + "." + name
		if isNull(raw) {
			continue
		}
		if name != "keep" {
			return nil, fail(CodeBadParameter, where, "unknown parameter of %s (want keep)", TypeClearThinking)
		}
		var all string
		if json.Unmarshal(raw, &all) == nil {
			if all != "all" {
				return nil, fail(CodeBadParameter, where, "want \"all\" or {\"type\": \"thinking_turns\", \"value\": N}, got %q", all)
			}
			p.KeepAll = true
			continue
		}
		t, err := threshold(where, raw, 1, UnitThinkingTurns)
		if err != nil {
			return nil, err
		}
		p.Keep = int(t.Value)
	}
	return p, nil
}

func parseCompact(at string, fields map[string]json.RawMessage) (*Compact, error) {
	p := &Compact{Trigger: DefaultCompactTrigger}
	for _, name := range sortedKeys(fields) {
		raw := fields[name]
		where := at + "." + name
		if isNull(raw) {
			continue
		}
		switch name {
		case "trigger":
			t, err := threshold(where, raw, MinCompactTrigger, UnitInputTokens)
			if err != nil {
				return nil, err
			}
			p.Trigger = t.Value
		case "instructions":
			if json.Unmarshal(raw, &p.Instructions) != nil {
				return nil, fail(CodeBadParameter, where, "want a string")
			}
			switch {
			case len(p.Instructions) > MaxInstructions:
				return nil, fail(CodeBadParameter, where, "%d bytes; at most %d", len(p.Instructions), MaxInstructions)
			case strings.ContainsRune(p.Instructions, 0):
				return nil, fail(CodeBadParameter, where, "cannot hold a NUL character (\\u0000)")
			case !utf8.ValidString(p.Instructions):
				return nil, fail(CodeBadParameter, where, "not valid UTF-8")
			}
		case "pause_after_compaction":
			if json.Unmarshal(raw, &p.PauseAfterCompaction) != nil {
				return nil, fail(CodeBadParameter, where, "want true or false")
			}
		default:
			return nil, fail(CodeBadParameter, where, "unknown parameter of %s (want trigger, instructions, pause_after_compaction)", TypeCompact)
		}
	}
	return p, nil
}

// threshold reads {"type": unit, "value": N}: unit one of units, N a whole
// number of at least min.
func threshold(where string, raw json.RawMessage, min int64, units ...string) (Threshold, error) {
	want := fmt.Sprintf("want {\"type\": %s, \"value\": N}", quoted(units))
	var fields map[string]json.RawMessage
	if err := strictObject(raw, &fields); err != nil {
		return Threshold{}, fail(CodeBadParameter, where, "%s", want)
	}
	var t Threshold
	for _, k := range sortedKeys(fields) {
		v := fields[k]
		switch k {
		case "type":
			if json.Unmarshal(v, &t.Unit) != nil || !slices.Contains(units, t.Unit) {
				return Threshold{}, fail(CodeBadParameter, where+".type", "want %s, got %s", quoted(units), v)
			}
		case "value":
			if json.Unmarshal(v, &t.Value) != nil {
				return Threshold{}, fail(CodeBadParameter, where+".value", "want a whole number, got %s", v)
			}
		default:
			return Threshold{}, fail(CodeBadParameter, where, "unknown field %q; %s", k, want)
		}
	}
	if _, ok := fields["type"]; !ok {
		return Threshold{}, fail(CodeBadParameter, where+".type", "is required; %s", want)
	}
	if _, ok := fields["value"]; !ok {
		return Threshold{}, fail(CodeBadParameter, where+".value", "is required; %s", want)
	}
	if t.Value < min {
		return Threshold{}, fail(CodeBadParameter, where+".value", "%d; want at least %d", t.Value, min)
	}
	return t, nil
}

func toolNames(where string, raw json.RawMessage) ([]string, error) {
	var names []string
	if json.Unmarshal(raw, &names) != nil {
		return nil, fail(CodeBadParameter, where, "want an array of tool names")
	}
	for i, n := range names {
		if strings.TrimSpace(n) == "" {
			return nil, fail(CodeBadParameter, fmt.Sprintf("%s[%d]", where, i), "an empty tool name")
		}
	}
	return names, nil
}

// strictObject decodes a JSON object into fields, refusing anything else.
func strictObject(data []byte, fields *map[string]json.RawMessage) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return errors.New("not an object")
	}
	return json.Unmarshal(data, fields)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func quoted(units []string) string {
	q := make([]string, len(units))
	for i, u := range units {
		q[i] = `"` + u + `"`
	}
	return strings.Join(q, " or ")
}
