package memory

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line is one line of a scope's index (MEMORY.md), written
// "- [Title](name.md) — hook". Title and hook are free text the index's editors choose (the title
// defaults to the name, the hook to the description); the file is always
// the memory's name plus ".md".
type Line struct {
	Title string
	Name  Name
	Hook  string
}

// hookSep separates a line's link from its hook.
const hookSep = " — "

func (l Line) String() string {
	s := "- [" + l.Title + "](" + l.Name.File() + ")"
	if l.Hook != "" {
		s += hookSep + l.Hook
	}
	return s
}

// ParseLine reads one index line. The hook may also follow " – " or " - ";
// String writes " — ".
func ParseLine(s string) (Line, error) {
	bad := func(why string) (Line, error) {
		return Line{}, Refuse(ReasonBadIndex, "%q: %s; an index line is '- [Title](name.md) — hook'", clip(s), why)
	}
	if !utf8.ValidString(s) {
		return bad("not valid UTF-8")
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return bad("control characters")
	}
	rest, ok := strings.CutPrefix(s, "- [")
	if !ok {
		return bad("it does not start with '- ['")
	}
	title, rest, ok := strings.Cut(rest, "](")
	if !ok || strings.ContainsAny(title, "[]") {
		return bad("no '[Title](' link")
	}
	if title = strings.TrimSpace(title); title == "" {
		return bad("the title is empty")
	}
	file, rest, ok := strings.Cut(rest, ")")
	if !ok {
		return bad("the link is not closed")
	}
	if !strings.HasSuffix(file, FileExt) {
		return bad("the link does not point to a .md file")
	}
	name, err := ParseRef(file)
	if err != nil {
		return Line{}, err
	}
	l := Line{Title: title, Name: name}
	if strings.TrimSpace(rest) == "" {
		return l, nil
	}
	for _, sep := range []string{hookSep, " – ", " - "} {
		if hook, ok := strings.CutPrefix(rest, sep); ok {
			l.Hook = strings.TrimSpace(hook)
			return l, nil
		}
	}
	return bad("the hook does not follow ' — '")
}

// DefaultLine is the line an index gets for a memory no editor has placed:
// the name as title and the description as hook, shortened to fit maxChars.
func DefaultLine(name Name, description string, maxChars int) Line {
	l := Line{Title: string(name), Name: name, Hook: strings.TrimSpace(description)}
	room := maxChars - utf8.RuneCountInString(Line{Title: l.Title, Name: name}.String()) - utf8.RuneCountInString(hookSep)
	if utf8.RuneCountInString(l.Hook) > room {
		l.Hook = shorten(l.Hook, room)
	}
	return l
}

// shorten cuts s to at most n characters, the last of them "…".
func shorten(s string, n int) string {
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return strings.TrimRightFunc(string(r[:n-1]), unicode.IsSpace) + "…"
}

// ParseIndex reads a stored or edited index: one line per non-blank line.
// Blank lines are dropped. It reports the first line that does not parse.
func ParseIndex(content string) ([]Line, error) {
	var out []Line
	for i, raw := range strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n") {
		raw = strings.TrimRightFunc(raw, unicode.IsSpace)
		if raw == "" {
			continue
		}
		l, err := ParseLine(raw)
		if err != nil {
			e, _ := AsError(err)
			return nil, Refuse(e.Reason, "line %d: %s", i+1, e.Detail)
		}
		out = append(out, l)
	}
	return out, nil
}

// FormatIndex writes lines as a stored index: each line and a newline.
func FormatIndex(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// CheckIndex validates an edited index against the scope's live memories
// (name → description). The edit is refused (bad_index, naming every
// problem) when a line does not parse, is longer than maxChars, points to a
// file that is not a live memory of the scope, or lists a memory twice.
// Memories the edit leaves out are not refused but appended with their
// DefaultLine, so no edit ever unlists a memory; they are returned too.
func CheckIndex(content string, live map[Name]string, maxChars int) ([]Line, []Name, error) {
	var lines []Line
	var problems []string
	seen := map[Name]int{}
	for i, raw := range strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n") {
		raw = strings.TrimRightFunc(raw, unicode.IsSpace)
		if raw == "" {
			continue
		}
		n := i + 1
		l, err := ParseLine(raw)
		if err != nil {
			e, _ := AsError(err)
			problems = append(problems, fmt.Sprintf("line %d: %s", n, e.Detail))
			continue
		}
		if c := utf8.RuneCountInString(l.String()); c > maxChars {
			problems = append(problems, fmt.Sprintf("line %d: %d characters, more than %d", n, c, maxChars))
		}
		if _, ok := live[l.Name]; !ok {
			problems = append(problems, fmt.Sprintf("line %d: %s is not a memory of this scope", n, l.Name.File()))
		}
		if first, dup := seen[l.Name]; dup {
			problems = append(problems, fmt.Sprintf("line %d: %s is listed already on line %d", n, l.Name.File(), first))
		} else {
			seen[l.Name] = n
		}
		lines = append(lines, l)
	}
	if len(problems) > 0 {
		const most = 20
		more := ""
		if len(problems) > most {
			more = fmt.Sprintf("; and %d more", len(problems)-most)
			problems = problems[:most]
		}
		return nil, nil, Refuse(ReasonBadIndex, "%s%s", strings.Join(problems, "; "), more)
	}
	var appended []Name
	for name := range live {
		if _, ok := seen[name]; !ok {
			appended = append(appended, name)
		}
	}
	sort.Slice(appended, func(i, j int) bool { return appended[i] < appended[j] })
	for _, name := range appended {
		lines = append(lines, DefaultLine(name, live[name], maxChars))
	}
	return lines, appended, nil
}
