package sessionnotes

import (
	"errors"
	"fmt"
	"strings"
)

// ErrRejected is what every refused answer wraps: the answer broke the
// notes' structure, and the notes stay as they were.
var ErrRejected = errors.New("sessionnotes: update rejected")

// ParseEdits reads a model's answer to an update request: the sections it
// changes, each written whole — its heading line and its description line
// exactly as they are in current, then the new body. Sections left out stay
// as they are. The answer is rejected (an error wrapping ErrRejected) when
// it names a heading current does not have, changes a description line,
// writes a section twice, has text before its first heading, hides a
// heading of the notes inside a section's body (an unclosed code fence
// does that), or holds no section at all. A fence around the whole answer
// is taken off first.
func ParseEdits(answer string, current Document) ([]Section, error) {
	text := unfence(strings.TrimSpace(answer))
	if text == "" {
		return nil, fmt.Errorf("%w: the answer is empty", ErrRejected)
	}
	sections, err := parseSections(text)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	known := map[string]Section{}
	for _, s := range current.Sections {
		known[s.Heading] = s
	}
	seen := map[string]bool{}
	for _, s := range sections {
		cur, ok := known[s.Heading]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: heading %q is not one of the notes' headings", ErrRejected, s.Heading)
		case seen[s.Heading]:
			return nil, fmt.Errorf("%w: section %q is written twice", ErrRejected, s.Heading)
		case s.Description != cur.Description:
			return nil, fmt.Errorf("%w: the description line of %q was changed to %q", ErrRejected, s.Heading, s.Description)
		}
		seen[s.Heading] = true
		for _, line := range strings.Split(s.Body, "\n") {
			if h, ok := headingOf(line); ok {
				if _, isNotes := known[h]; isNotes {
					return nil, fmt.Errorf("%w: heading %q appears inside section %q (an unclosed code fence?)", ErrRejected, h, s.Heading)
				}
			}
		}
	}
	return sections, nil
}

// Apply returns current with the bodies of edits in place of its own.
func Apply(current Document, edits []Section) Document {
	body := map[string]string{}
	for _, e := range edits {
		body[e.Heading] = e.Body
	}
	out := Document{Sections: make([]Section, len(current.Sections))}
	for i, s := range current.Sections {
		if b, ok := body[s.Heading]; ok {
			s.Body = b
		}
		out.Sections[i] = s
	}
	return out
}

// Changed lists the headings whose bodies differ between before and after.
func Changed(before, after Document) []string {
	var out []string
	for _, a := range after.Sections {
		if b, ok := before.Section(a.Heading); !ok || b.Body != a.Body {
			out = append(out, a.Heading)
		}
	}
	return out
}

// RenderEdits writes sections the way an answer to an update request does.
func RenderEdits(sections []Section) string {
	return renderSections(sections)
}

// unfence takes off a code fence that wraps the whole text.
func unfence(text string) string {
	if !strings.HasPrefix(text, "```") || !strings.HasSuffix(text, "```") || len(text) < 6 {
		return text
	}
	first := strings.IndexByte(text, '\n')
	if first < 0 {
		return text
	}
	inner := strings.TrimSuffix(text[first+1:], "```")
	if strings.Contains(inner, "\n```") {
		return text // fences inside: the answer is not one fenced block
	}
	return strings.TrimSpace(inner)
}
