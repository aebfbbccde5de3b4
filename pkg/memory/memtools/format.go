package memtools

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// The texts memory_list and memory_read answer with are written here and
// read back here, so a reader that is not a model (the builtin provider)
// understands them the way they were written.

func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// listLine is one memory of memory_list's answer.
func listLine(h memory.Header) string {
	return fmt.Sprintf("- %s [%s] updated %s, revision %d: %s\n", h.Name.File(), h.Type, day(h.UpdatedAt), h.Revision, h.Description)
}

// stagedListLine is one memory of memory_list's answer that this run changed.
func stagedListLine(d memory.Document) string {
	return fmt.Sprintf("- %s [%s] changed in this run: %s\n", d.Name.File(), d.Type, d.Description)
}

var listLineRE = regexp.MustCompile(`^- ([a-z0-9][a-z0-9_-]*)\.md \[`)

// ParseList returns the names memory_list's answer lists, in order.
func ParseList(text string) []memory.Name {
	var out []memory.Name
	for line := range strings.SplitSeq(text, "\n") {
		if m := listLineRE.FindStringSubmatch(line); m != nil {
			out = append(out, memory.Name(m[1]))
		}
	}
	return out
}

// FormatRead is memory_read's answer for m.
func FormatRead(m memory.Memory) string {
	return fmt.Sprintf("%s of %s, revision %d, created %s, updated %s:\n\n%s",
		m.Name.File(), m.Scope, m.Revision, m.CreatedAt.Format(time.RFC3339), m.UpdatedAt.Format(time.RFC3339), m.Markdown())
}

var readHeadRE = regexp.MustCompile(`^([a-z0-9][a-z0-9_-]*)\.md of \S+, revision (\d+), created (\S+), updated (\S+):$`)

// ParseRead reads memory_read's answer (FormatRead) back into a memory
// (without its scope). Answers about staged changes, and errors, do not parse.
func ParseRead(text string) (memory.Memory, error) {
	head, doc, ok := strings.Cut(text, "\n\n")
	m := readHeadRE.FindStringSubmatch(head)
	if !ok || m == nil {
		return memory.Memory{}, fmt.Errorf("memtools.ParseRead: not a memory_read answer: %.80q", head)
	}
	d, err := memory.ParseDocument(doc)
	if err != nil {
		return memory.Memory{}, fmt.Errorf("memtools.ParseRead: %w", err)
	}
	rev, err := strconv.ParseInt(m[2], 10, 64)
	if err != nil {
		return memory.Memory{}, fmt.Errorf("memtools.ParseRead: revision: %w", err)
	}
	created, err := time.Parse(time.RFC3339, m[3])
	if err != nil {
		return memory.Memory{}, fmt.Errorf("memtools.ParseRead: created: %w", err)
	}
	updated, err := time.Parse(time.RFC3339, m[4])
	if err != nil {
		return memory.Memory{}, fmt.Errorf("memtools.ParseRead: updated: %w", err)
	}
	return memory.Memory{Document: d, Revision: rev, CreatedAt: created.UTC(), UpdatedAt: updated.UTC()}, nil
}
