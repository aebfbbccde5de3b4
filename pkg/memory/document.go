package memory

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDescriptionChars bounds a description: one specific line.
const MaxDescriptionChars = 300

// Document is a memory's content: its frontmatter and body.
//
// As markdown it is written
//
//	---
//	name: testing-style
//	description: Integration tests hit a real database, never mocks
//	type: feedback
//	---
//
//	Body…
//
// A value that starts with a quote is written as a JSON string; reading
// also accepts YAML's single-quoted strings. The body has no leading blank
// lines and no trailing white space.
type Document struct {
	Name        Name
	Description string
	Type        Type
	Body        string
}

const fence = "---"

// ParseDocument reads a memory's markdown. It refuses what is not exactly a
// frontmatter of name, description and type (each once) followed by the
// body, and every value Validate would refuse. Line ends may be CRLF; a
// leading byte order mark is skipped.
func ParseDocument(markdown string) (Document, error) {
	if !utf8.ValidString(markdown) {
		return Document{}, Refuse(ReasonInvalidUTF8, "the document is not valid UTF-8")
	}
	if strings.ContainsRune(markdown, 0) {
		return Document{}, Refuse(ReasonBadBody, "the document contains a NUL byte")
	}
	s := strings.ReplaceAll(strings.TrimPrefix(markdown, "\ufeff"), "\r\n", "\n")
	first, rest, _ := strings.Cut(s, "\n")
	if !isFence(first) {
		return Document{}, Refuse(ReasonBadFrontmatter, "a memory starts with a frontmatter: a line '---', then name, description and type, then a line '---'")
	}
	var d Document
	seen := map[string]bool{}
	for line := 2; ; line++ {
		raw, after, found := strings.Cut(rest, "\n")
		if !found && !isFence(raw) {
			return Document{}, Refuse(ReasonBadFrontmatter, "the frontmatter is not closed by a line '---'")
		}
		rest = after
		if isFence(raw) {
			break
		}
		if strings.TrimSpace(raw) == "" {
			continue
		}
		key, value, ok := strings.Cut(raw, ":")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return Document{}, Refuse(ReasonBadFrontmatter, "frontmatter line %d: want 'key: value'", line)
		}
		if seen[key] {
			return Document{}, Refuse(ReasonBadFrontmatter, "frontmatter line %d: %s given twice", line, clip(key))
		}
		seen[key] = true
		v, err := unquote(strings.TrimSpace(value))
		if err != nil {
			return Document{}, Refuse(ReasonBadFrontmatter, "frontmatter line %d: %s: %v", line, clip(key), err)
		}
		switch key {
		case "name":
			d.Name = Name(v)
		case "description":
			d.Description = v
		case "type":
			d.Type = Type(v)
		default:
			return Document{}, Refuse(ReasonBadFrontmatter, "frontmatter line %d: unknown field %q; a memory has name, description and type", line, clip(key))
		}
	}
	for _, k := range []string{"name", "description", "type"} {
		if !seen[k] {
			return Document{}, Refuse(ReasonBadFrontmatter, "the frontmatter has no %s", k)
		}
	}
	d.Body = canonicalBody(rest)
	if err := d.check(); err != nil {
		return Document{}, err
	}
	return d, nil
}

// isFence reports whether line is a frontmatter fence ("---", trailing
// blanks allowed).
func isFence(line string) bool { return strings.TrimRight(line, " \t") == fence }

// canonicalBody drops leading blank lines and trailing white space.
func canonicalBody(s string) string {
	return strings.TrimRightFunc(strings.TrimLeft(s, "\n"), unicode.IsSpace)
}

// Markdown writes d as ParseDocument reads it; ParseDocument(d.Markdown())
// returns d for every valid d.
func (d Document) Markdown() string {
	var b strings.Builder
	b.Grow(len(d.Body) + len(d.Description) + 64)
	b.WriteString(fence + "\nname: ")
	b.WriteString(quote(string(d.Name)))
	b.WriteString("\ndescription: ")
	b.WriteString(quote(d.Description))
	b.WriteString("\ntype: ")
	b.WriteString(quote(string(d.Type)))
	b.WriteString("\n" + fence + "\n")
	if d.Body != "" {
		b.WriteString("\n")
		b.WriteString(d.Body)
		b.WriteString("\n")
	}
	return b.String()
}

// Canonical returns d with its description trimmed and its body in the form
// Markdown writes, so that equal contents compare equal.
func (d Document) Canonical() Document {
	d.Description = strings.TrimSpace(d.Description)
	d.Body = canonicalBody(strings.ReplaceAll(d.Body, "\r\n", "\n"))
	return d
}

// Validate checks d and its size against l: a valid name, a description of
// one line, a known type, a body of valid UTF-8 without NUL, at most
// l.MaxBytes as markdown. d should be Canonical.
func (d Document) Validate(l Limits) error {
	if err := d.check(); err != nil {
		return err
	}
	if n := len(d.Markdown()); n > l.MaxBytes {
		return Refuse(ReasonTooLarge, "the memory is %d bytes, more than %d: keep memories short", n, l.MaxBytes)
	}
	return nil
}

func (d Document) check() error {
	if _, err := ParseName(string(d.Name)); err != nil {
		return err
	}
	if _, err := ParseType(string(d.Type)); err != nil {
		return err
	}
	desc := d.Description
	switch {
	case !utf8.ValidString(desc):
		return Refuse(ReasonInvalidUTF8, "the description is not valid UTF-8")
	case desc == "":
		return Refuse(ReasonBadDescription, "the description is empty: give one specific line saying what the memory is for")
	case desc != strings.TrimSpace(desc):
		return Refuse(ReasonBadDescription, "the description starts or ends with white space")
	case utf8.RuneCountInString(desc) > MaxDescriptionChars:
		return Refuse(ReasonBadDescription, "the description is %d characters, more than %d: one specific line", utf8.RuneCountInString(desc), MaxDescriptionChars)
	case strings.IndexFunc(desc, unicode.IsControl) >= 0:
		return Refuse(ReasonBadDescription, "the description is one line, without control characters")
	}
	switch {
	case !utf8.ValidString(d.Body):
		return Refuse(ReasonInvalidUTF8, "the body is not valid UTF-8")
	case strings.ContainsRune(d.Body, 0):
		return Refuse(ReasonBadBody, "the body contains a NUL byte")
	case d.Body != canonicalBody(d.Body) || strings.Contains(d.Body, "\r\n"):
		return Refuse(ReasonBadBody, "the body starts with a blank line, ends with white space or has CRLF line ends (use Canonical)")
	}
	return nil
}

// quote writes a frontmatter value: as it is, or as a JSON string when it
// starts with a quote (or is empty), so that unquote reads it back.
func quote(v string) string {
	if v != "" && v[0] != '"' && v[0] != '\'' {
		return v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a string always encodes
	return strings.TrimSuffix(buf.String(), "\n")
}

// unquote reads a trimmed frontmatter value: plain, a JSON (double-quoted)
// string, or a YAML single-quoted string (two single quotes stand for one).
func unquote(v string) (string, error) {
	switch {
	case strings.HasPrefix(v, `"`):
		var out string
		if err := json.Unmarshal([]byte(v), &out); err != nil {
			return "", errBadQuote
		}
		return out, nil
	case strings.HasPrefix(v, "'"):
		if len(v) < 2 || !strings.HasSuffix(v, "'") {
			return "", errBadQuote
		}
		inner := v[1 : len(v)-1]
		if strings.Contains(strings.ReplaceAll(inner, "''", ""), "'") {
			return "", errBadQuote
		}
		return strings.ReplaceAll(inner, "''", "'"), nil
	}
	return v, nil
}

var errBadQuote = &Error{Reason: ReasonBadFrontmatter, Detail: "a quoted value is not closed or holds a stray quote"}
