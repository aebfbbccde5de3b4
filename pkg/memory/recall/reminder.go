package recall

import (
	"fmt"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// AgeDays is how old something updated at updated is at now, in whole days
// (24-hour periods; never negative).
func AgeDays(updated, now time.Time) int {
	d := now.Sub(updated)
	if d < 0 {
		return 0
	}
	return int(d / (24 * time.Hour))
}

// AgeText says an age in days the way a reminder does: "today",
// "yesterday", "N days ago".
func AgeText(days int) string {
	switch days {
	case 0:
		return "today"
	case 1:
		return "yesterday"
	default:
		return fmt.Sprintf("%d days ago", days)
	}
}

// StaleNote is the note a memory at least Settings.StaleDays old carries.
func StaleNote(days int) string {
	return fmt.Sprintf("It was saved %d days ago and says what was true then: a point-in-time observation, not live state. "+
		"Check it against the code and the systems as they are now before you state it as fact or act on it.", days)
}

// Reminder is what an agent is shown of one memory.
type Reminder struct {
	// Text is the whole reminder, a <system-reminder> block.
	Text string
	// Content is what is shown of the memory's markdown.
	Content string
	// Truncated reports that the memory was cut to the limits.
	Truncated bool
	AgeDays   int
	Stale     bool
}

// Remind renders the reminder of m at now: a heading with its reference,
// type and age, the stale note when it is old enough, then its markdown
// cut to set.MaxLines lines and set.MaxBytes bytes (whole lines; a note
// says what was cut and where the whole memory is).
func Remind(m memory.Memory, now time.Time, set Settings) Reminder {
	days := AgeDays(m.UpdatedAt, now)
	r := Reminder{AgeDays: days, Stale: days >= set.StaleDays}
	whole := strings.TrimSuffix(m.Markdown(), "\n")
	content, shownLines, totalLines := cut(whole, set.MaxLines, set.MaxBytes)
	r.Content, r.Truncated = content, content != whole

	var b strings.Builder
	b.Grow(len(content) + 512)
	b.WriteString("<system-reminder>\n")
	fmt.Fprintf(&b, "A saved memory that may help here: %s (%s, saved %s).\n", Ref(m.Scope, m.Name)+".md", m.Type, AgeText(days))
	if r.Stale {
		b.WriteString(StaleNote(days))
		b.WriteString("\n")
	}
	b.WriteString("\n")
	b.WriteString(strings.ReplaceAll(content, "</system-reminder>", "</ system-reminder>"))
	b.WriteString("\n")
	if r.Truncated {
		fmt.Fprintf(&b, "[The memory is cut here: %d of its %d lines shown, %d of its %d bytes. Read all of it with memory_read %s, or GET /v1/scopes/%s/memories/%s.]\n",
			shownLines, totalLines, len(content), len(whole), m.Name, m.Scope, m.Name)
	}
	b.WriteString("</system-reminder>")
	r.Text = b.String()
	return r
}

// cut keeps the first lines of s, at most maxLines lines and maxBytes bytes
// (newlines between lines counted): whole lines while they fit, then as
// much of the next line as fits, cut at a character boundary.
func cut(s string, maxLines, maxBytes int) (kept string, keptLines, totalLines int) {
	lines := strings.Split(s, "\n")
	n := 0
	for keptLines < len(lines) && keptLines < maxLines {
		line := lines[keptLines]
		if keptLines > 0 {
			n++ // the newline before it
		}
		if n+len(line) > maxBytes {
			part := strings.ToValidUTF8(line[:max(maxBytes-n, 0)], "")
			if part != "" {
				lines[keptLines] = part
				keptLines++
			}
			break
		}
		n += len(line)
		keptLines++
	}
	return strings.Join(lines[:keptLines], "\n"), keptLines, len(lines)
}

// Ref is how recall names a memory to the selector: "<scope>/<name>", as in
// "project:repo-x/staging-db".
func Ref(scope memory.Scope, name memory.Name) string { return scope.String() + "/" + string(name) }
