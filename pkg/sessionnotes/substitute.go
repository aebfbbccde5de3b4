package sessionnotes

import (
	"fmt"
	"slices"
	"strings"
)

// Substitute replaces each {{name}} in text whose name is a key of vars
// with its value, in a single pass from left to right: what a value brings
// in is never looked at again, so a value holding "{{other}}", "$1" or a
// backslash comes out exactly as it is. A {{name}} not in vars stays as
// written. A name is one or more ASCII letters, digits and '_'.
func Substitute(text string, vars map[string]string) string {
	var b strings.Builder
	b.Grow(len(text))
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		name, rest, ok := placeholder(text[i:])
		if !ok {
			// Not a placeholder: keep one brace and look again after it.
			b.WriteString(text[:i+1])
			text = text[i+1:]
			continue
		}
		v, known := vars[name]
		b.WriteString(text[:i])
		if known {
			b.WriteString(v)
		} else {
			b.WriteString(text[i : len(text)-len(rest)])
		}
		text = rest
	}
}

// placeholder reads "{{name}}" at the start of s and returns the name and
// what follows it.
func placeholder(s string) (name, rest string, ok bool) {
	s = s[2:]
	end := strings.Index(s, "}}")
	if end <= 0 {
		return "", "", false
	}
	name = s[:end]
	for _, r := range name {
		if !isNameRune(r) {
			return "", "", false
		}
	}
	return name, s[end+2:], true
}

// isNameRune reports an ASCII letter, digit or '_'.
func isNameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_'
}

// Placeholders lists the names of the {{name}} placeholders in text, in
// order of first appearance.
func Placeholders(text string) []string {
	var out []string
	for {
		i := strings.Index(text, "{{")
		if i < 0 {
			return out
		}
		name, rest, ok := placeholder(text[i:])
		if !ok {
			text = text[i+1:]
			continue
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
		text = rest
	}
}

// The variables of the update prompt.
const (
	// VarMaxSectionTokens and VarMaxTotalTokens are the tenant's limits.
	VarMaxSectionTokens = "max_section_tokens"
	VarMaxTotalTokens   = "max_total_tokens"
	// VarOversized is a sentence naming the sections over their limit, or "".
	VarOversized = "oversized_sections"
	// VarHeadings lists the headings, one a line.
	VarHeadings = "headings"
	// VarSessionID is the session's id.
	VarSessionID = "session_id"
)

// PromptVariables lists the variables an update prompt may use.
func PromptVariables() []string {
	return []string{VarMaxSectionTokens, VarMaxTotalTokens, VarOversized, VarHeadings, VarSessionID}
}

// MaxPromptBytes bounds a tenant's update prompt.
const MaxPromptBytes = 20_000

// ValidatePrompt reports a tenant's update prompt that cannot work: blank,
// longer than MaxPromptBytes, or naming a variable that does not exist.
func ValidatePrompt(prompt string) error {
	if strings.TrimSpace(prompt) == "" {
		return fmt.Errorf("sessionnotes: the update prompt is blank")
	}
	if len(prompt) > MaxPromptBytes {
		return fmt.Errorf("sessionnotes: the update prompt is longer than %d bytes", MaxPromptBytes)
	}
	known := PromptVariables()
	for _, name := range Placeholders(prompt) {
		if !slices.Contains(known, name) {
			return fmt.Errorf("sessionnotes: the update prompt uses {{%s}}, which is not a variable (known: %s)", name, strings.Join(known, ", "))
		}
	}
	return nil
}
