// Package sessionnotes holds the rolling notes of a session (see docs/compaction.md) as
// pure logic: the document and its fixed structure, the default template,
// the edits a model answers with and how they are checked, the update
// request and its prompt with {{name}} substitution, the truncation that
// fits notes into a compaction summary, and the builtin writer that fills
// the notes from the conversation itself when there is no model. Storage,
// scheduling and events belong to the session-memory service.
package sessionnotes

import (
	_ "embed" // the default template
	"errors"
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/compaction"
)

// The section headings of the notes, in order. They never change: the
// update prompt may not edit them, and a tenant's template must keep them.
const (
	HeadingTitle     = "Session Title"
	HeadingState     = "Current State"
	HeadingTask      = "Task specification"
	HeadingFiles     = "Files and Functions"
	HeadingWorkflow  = "Workflow"
	HeadingErrors    = "Errors & Corrections"
	HeadingCodebase  = "Codebase and System Documentation"
	HeadingLearnings = "Learnings"
	HeadingResults   = "Key results"
	HeadingWorklog   = "Worklog"
)

// Headings returns the section headings, in order. The slice is the
// caller's to keep.
func Headings() []string {
	return []string{
		HeadingTitle, HeadingState, HeadingTask, HeadingFiles, HeadingWorkflow,
		HeadingErrors, HeadingCodebase, HeadingLearnings, HeadingResults, HeadingWorklog,
	}
}

//go:embed prompts/template.md
var defaultTemplateText string

// DefaultTemplate is the empty notes document (prompts/template.md): each
// section a heading and an italic line saying what belongs under it.
var DefaultTemplate = strings.TrimSpace(defaultTemplateText) + "\n"

// Section is one section of the notes.
type Section struct {
	// Heading is the section's title, without the leading "# ".
	Heading string
	// Description is the italic line under the heading, as written.
	Description string
	// Body is the section's content, without leading blank lines and
	// trailing white space; "" when the section is empty.
	Body string
}

// Document is a notes document: its sections, in order.
type Document struct {
	Sections []Section
}

// Section returns the section with the given heading.
func (d Document) Section(heading string) (Section, bool) {
	for _, s := range d.Sections {
		if s.Heading == heading {
			return s, true
		}
	}
	return Section{}, false
}

// Render writes the document in its canonical form: each section's heading
// line, its description line, then its body after a blank line; sections
// separated by a blank line. Parse(Render(d)) gives d back.
func (d Document) Render() string {
	return renderSections(d.Sections)
}

func renderSections(sections []Section) string {
	var b strings.Builder
	for i, s := range sections {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString("# " + s.Heading + "\n" + s.Description + "\n")
		if s.Body != "" {
			b.WriteString("\n" + s.Body + "\n")
		}
	}
	return b.String()
}

// Tokens is the estimate of the rendered document (bytes / 4, rounded up),
// the way message text is estimated.
func (d Document) Tokens() int64 {
	return tokensOf(d.Render())
}

func tokensOf(s string) int64 { return (int64(len(s)) + 3) / 4 }

// Parse reads a notes document. Every line before the first heading must be
// blank; a heading is a line "# Title" outside fenced code; the line right
// after it is the section's italic description ("_…_" or "*…*"); what
// follows up to the next heading is the body. Parse does not check which
// headings there are (see CheckStructure).
func Parse(text string) (Document, error) {
	sections, err := parseSections(text)
	if err != nil {
		return Document{}, err
	}
	for _, s := range sections {
		if !isItalic(s.Description) {
			return Document{}, fmt.Errorf("sessionnotes: the line under heading %q is not an italic description: %q", s.Heading, s.Description)
		}
	}
	return Document{Sections: sections}, nil
}

// CheckStructure reports a document whose headings are not exactly
// Headings(), in order.
func (d Document) CheckStructure() error {
	want := Headings()
	for i, s := range d.Sections {
		if i >= len(want) {
			return fmt.Errorf("sessionnotes: unexpected heading %q after %q", s.Heading, want[len(want)-1])
		}
		if s.Heading != want[i] {
			return fmt.Errorf("sessionnotes: heading %d is %q, want %q", i+1, s.Heading, want[i])
		}
	}
	if len(d.Sections) < len(want) {
		return fmt.Errorf("sessionnotes: heading %q is missing", want[len(d.Sections)])
	}
	return nil
}

// MaxTemplateBytes bounds a tenant's template.
const MaxTemplateBytes = 40_000

// ParseTemplate reads a template, a tenant's or DefaultTemplate: a document
// with exactly the fixed headings, in order, each with an italic
// description line. A template's sections may hold starting content.
func ParseTemplate(text string) (Document, error) {
	if len(text) > MaxTemplateBytes {
		return Document{}, fmt.Errorf("sessionnotes: template is longer than %d bytes", MaxTemplateBytes)
	}
	d, err := Parse(text)
	if err != nil {
		return Document{}, fmt.Errorf("template: %w", err)
	}
	if err := d.CheckStructure(); err != nil {
		return Document{}, fmt.Errorf("template: %w", err)
	}
	return d, nil
}

// IsEmpty reports whether d holds nothing beyond template: every section's
// body is blank or the template's body for that heading. Such notes are
// never used as a compaction summary.
func IsEmpty(d, template Document) bool {
	for _, s := range d.Sections {
		if s.Body == "" {
			continue
		}
		if t, ok := template.Section(s.Heading); !ok || t.Body != s.Body {
			return false
		}
	}
	return true
}

// ErrEmpty means the notes hold nothing beyond their template.
var ErrEmpty = errors.New("sessionnotes: the notes are only the empty template")

// ForCompaction returns stored notes as a compaction summary: parsed,
// checked against the fixed structure, refused (ErrEmpty) when they hold
// nothing beyond template, and truncated per section to fit sectionTokens
// and totalTokens (see Truncate).
func ForCompaction(notes, template string, sectionTokens, totalTokens int64) (string, error) {
	d, err := Parse(notes)
	if err != nil {
		return "", err
	}
	if err := d.CheckStructure(); err != nil {
		return "", err
	}
	t, err := ParseTemplate(template)
	if err != nil {
		t = Document{} // a template that no longer parses: only blank sections count as empty
	}
	if IsEmpty(d, t) {
		return "", ErrEmpty
	}
	return Truncate(d, sectionTokens, totalTokens).Render(), nil
}

// Truncate bounds each section's body to sectionTokens and, when the whole
// document would still be over totalTokens, lowers the bound of the
// largest bodies together until it fits (the smaller sections stay whole).
// A cut body ends with a marker saying how much was cut. Headings and
// descriptions are never cut. A bound at 0 or below is no bound.
func Truncate(d Document, sectionTokens, totalTokens int64) Document {
	out := Document{Sections: append([]Section(nil), d.Sections...)}
	if sectionTokens > 0 {
		for i := range out.Sections {
			out.Sections[i].Body = clipBody(out.Sections[i].Body, int(sectionTokens*4))
		}
	}
	if totalTokens <= 0 || out.Tokens() <= totalTokens {
		return out
	}
	// The largest per-body bound (in bytes) under which the whole fits.
	longest := 0
	for _, s := range out.Sections {
		longest = max(longest, len(s.Body))
	}
	fits := func(limit int) bool {
		var trial Document
		for _, s := range out.Sections {
			s.Body = clipBody(s.Body, limit)
			trial.Sections = append(trial.Sections, s)
		}
		return trial.Tokens() <= totalTokens
	}
	lo, hi := 0, longest // fits(lo) is assumed; the search keeps the largest limit that fits
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	for i := range out.Sections {
		out.Sections[i].Body = clipBody(out.Sections[i].Body, lo)
	}
	return out
}

// clipBody bounds a body to n bytes, saying what was cut; a body cut to
// nothing keeps only the marker, so the reader knows content is missing.
func clipBody(body string, n int) string {
	if len(body) <= n {
		return body
	}
	marker := fmt.Sprintf("[… section truncated: %d bytes left out]", len(body))
	if n <= len(marker) {
		return marker
	}
	return compaction.Clip(body, n)
}

// parseSections splits text into sections (see Parse) without checking the
// descriptions' form.
func parseSections(text string) ([]Section, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	var out []Section
	var body []string
	inFence := false
	flush := func() {
		if len(out) > 0 {
			out[len(out)-1].Body = trimBody(body)
		}
		body = nil
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if isFence(line) {
			inFence = !inFence
		}
		heading, ok := headingOf(line)
		if !ok || inFence {
			if len(out) == 0 && strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("sessionnotes: text before the first heading: %q", compaction.Clip(strings.TrimSpace(line), 80))
			}
			body = append(body, line)
			continue
		}
		flush()
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) == "" {
			return nil, fmt.Errorf("sessionnotes: heading %q has no description line under it", heading)
		}
		if _, next := headingOf(lines[i+1]); next {
			return nil, fmt.Errorf("sessionnotes: heading %q has no description line under it", heading)
		}
		i++
		out = append(out, Section{Heading: heading, Description: strings.TrimSpace(lines[i])})
	}
	if inFence {
		return nil, errors.New("sessionnotes: a fenced code block is not closed")
	}
	flush()
	if len(out) == 0 {
		return nil, errors.New("sessionnotes: no heading")
	}
	return out, nil
}

// headingOf returns the title of a "# Title" line.
func headingOf(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "# ")
	if !ok {
		return "", false
	}
	title := strings.TrimSpace(rest)
	return title, title != ""
}

// isFence reports a line that opens or closes fenced code.
func isFence(line string) bool {
	t := strings.TrimLeft(line, " ")
	return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")
}

// isItalic reports a line written in italics: "_text_" or "*text*".
func isItalic(line string) bool {
	if len(line) < 3 {
		return false
	}
	first, last := line[0], line[len(line)-1]
	return (first == '_' || first == '*') && first == last && strings.TrimSpace(line[1:len(line)-1]) != "" &&
		line[1] != first && line[len(line)-2] != last
}

// trimBody joins body lines without leading blank lines and trailing white space.
func trimBody(lines []string) string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	return strings.TrimRight(strings.Join(lines, "\n"), " \t\n")
}
