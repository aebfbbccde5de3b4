package memory_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

func TestParseLine(t *testing.T) {
	t.Parallel()
	l, err := memory.ParseLine("- [Testing style](testing-style.md) — real database, never mocks")
	require.NoError(t, err)
	require.Equal(t, memory.Line{Title: "Testing style", Name: "testing-style", Hook: "real database, never mocks"}, l)
	require.Equal(t, "- [Testing style](testing-style.md) — real database, never mocks", l.String())

	for _, alt := range []string{"- [T](t.md) - hook", "- [T](t.md) – hook"} {
		l, err := memory.ParseLine(alt)
		require.NoError(t, err, alt)
		require.Equal(t, "- [T](t.md) — hook", l.String())
	}
	l, err = memory.ParseLine("- [T](t.md)")
	require.NoError(t, err)
	require.Empty(t, l.Hook)

	for in, want := range map[string]memory.Reason{
		"* [T](t.md) — x":             memory.ReasonBadIndex,
		"- T(t.md) — x":               memory.ReasonBadIndex,
		"- [](t.md) — x":              memory.ReasonBadIndex,
		"- [T](t.txt) — x":            memory.ReasonBadIndex,
		"- [T](t.md) and more":        memory.ReasonBadIndex,
		"- [T](../t.md) — x":          memory.ReasonOutOfScope,
		"- [T](user:u-1/t.md) — x":    memory.ReasonOutOfScope,
		"- [T](T.md) — x":             memory.ReasonBadName,
		"- [T](t.md) — tab\there":     memory.ReasonBadIndex,
		"- [T](t.md — x":              memory.ReasonBadIndex,
		"- [a [nested]](t.md) — hook": memory.ReasonBadIndex,
	} {
		_, err := memory.ParseLine(in)
		require.Equal(t, want, reasonOf(t, err), "%q", in)
	}
}

func TestDefaultLineFitsTheLimit(t *testing.T) {
	t.Parallel()
	long := memory.Name(strings.Repeat("n", memory.MaxNameLen))
	for _, desc := range []string{"short", strings.Repeat("déscription ", 40)} {
		for _, name := range []memory.Name{"a", long} {
			l := memory.DefaultLine(name, desc, 150)
			require.LessOrEqual(t, utf8.RuneCountInString(l.String()), 150)
			require.NotEmpty(t, l.Hook)
			back, err := memory.ParseLine(l.String())
			require.NoError(t, err)
			require.Equal(t, l, back)
		}
	}
	l := memory.DefaultLine("a", strings.Repeat("x", 400), 150)
	require.Equal(t, 150, utf8.RuneCountInString(l.String()), "a long description fills the line")
	require.True(t, strings.HasSuffix(l.Hook, "…"))
}

func TestCheckIndex(t *testing.T) {
	t.Parallel()
	live := map[memory.Name]string{"a": "about a", "b": "about b", "c": "about c"}
	lines, appended, err := memory.CheckIndex("- [B first](b.md) — my hook\n\n- [a](a.md) — about a\n", live, 150)
	require.NoError(t, err)
	require.Equal(t, []memory.Name{"c"}, appended, "a memory the edit leaves out is appended")
	require.Equal(t, "- [B first](b.md) — my hook\n- [a](a.md) — about a\n- [c](c.md) — about c\n", memory.FormatIndex(lines),
		"the edit's order and hooks are kept, blank lines dropped")

	_, _, err = memory.CheckIndex(strings.Join([]string{
		"- [a](a.md) — x",
		"- [gone](gone.md) — a dangling pointer",
		"- [a again](a.md) — y",
		"a heading",
		"- [b](b.md) — " + strings.Repeat("h", 150),
	}, "\n"), live, 150)
	require.Equal(t, memory.ReasonBadIndex, reasonOf(t, err))
	e, _ := memory.AsError(err)
	for _, want := range []string{"line 2: gone.md is not a memory", "line 3: a.md is listed already on line 1", "line 4:", "line 5: 16"} {
		require.Contains(t, e.Detail, want, "every problem is named")
	}
}

func indexOf(lines, width int) string {
	var b strings.Builder
	for i := range lines {
		name := fmt.Sprintf("m%05d", i)
		line := fmt.Sprintf("- [%s](%s.md) — ", name, name)
		line += strings.Repeat("h", width-len(line)-1)
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestTruncateIndexAtTheLineLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		lines, kept int
		cut         bool
	}{{199, 199, false}, {200, 200, false}, {201, 200, true}, {350, 200, true}} {
		content := indexOf(c.lines, 60) // 200 × 60 bytes: far under the byte limit
		kept, tr := memory.TruncateIndex(content, 200, 25_000)
		require.Equal(t, c.cut, tr.Cut(), "%d lines", c.lines)
		require.Equal(t, c.kept, tr.KeptLines)
		require.Equal(t, c.kept, strings.Count(kept, "\n"))
		require.True(t, strings.HasPrefix(content, kept))
		w := tr.Warning(200, 25_000)
		if !c.cut {
			require.Equal(t, content, kept)
			require.Empty(t, w)
			continue
		}
		require.Equal(t, "lines", tr.By)
		require.Contains(t, w, fmt.Sprintf("has %d lines", c.lines))
		require.Contains(t, w, "limit of 200 lines")
		if c.lines-200 == 1 {
			require.Contains(t, w, "line 201 (1 memory, 60 bytes) was not loaded")
		} else {
			require.Contains(t, w, fmt.Sprintf("lines 201-%d (%d memories, %d bytes) were not loaded", c.lines, c.lines-200, (c.lines-200)*60))
		}
	}
}

func TestTruncateIndexAtTheByteLimit(t *testing.T) {
	t.Parallel()
	// 100 lines of 250 bytes (with their newlines) are exactly 25,000 bytes.
	exact := indexOf(100, 250)
	require.Len(t, exact, 25_000)
	// Build the three neighbours precisely: the last line one byte shorter,
	// as it is, and one byte longer.
	last := strings.LastIndex(strings.TrimSuffix(exact, "\n"), "\n") + 1
	head, tail := exact[:last], exact[last:]
	under := head + tail[:len(tail)-2] + "\n"
	over := head + tail[:len(tail)-1] + "h\n"
	require.Len(t, under, 24_999)
	require.Len(t, over, 25_001)

	kept, tr := memory.TruncateIndex(under, 200, 25_000)
	require.False(t, tr.Cut())
	require.Equal(t, under, kept)

	kept, tr = memory.TruncateIndex(exact, 200, 25_000)
	require.False(t, tr.Cut(), "exactly at the limit is within it")
	require.Equal(t, exact, kept)

	kept, tr = memory.TruncateIndex(over, 200, 25_000)
	require.True(t, tr.Cut())
	require.Equal(t, "bytes", tr.By)
	require.Equal(t, head, kept, "the line that crosses the limit is cut whole")
	require.Equal(t, 99, tr.KeptLines)
	require.Equal(t, 24_750, tr.KeptBytes)
	w := tr.Warning(200, 25_000)
	require.Contains(t, w, "has 100 lines (25001 bytes), over the limit of 25000 bytes")
	require.Contains(t, w, "line 100 (1 memory, 251 bytes) was not loaded")
}

func TestTruncateIndexWhicheverComesFirst(t *testing.T) {
	t.Parallel()
	// 201 lines of 130 bytes: 26,130 bytes. The byte limit cuts first, at 192 lines.
	content := indexOf(201, 130)
	kept, tr := memory.TruncateIndex(content, 200, 25_000)
	require.Equal(t, "bytes", tr.By)
	require.Equal(t, 192, tr.KeptLines)
	require.Len(t, kept, 192*130)
	// 250 lines of 100 bytes: 25,000 bytes; the line limit cuts first.
	content = indexOf(250, 100)
	_, tr = memory.TruncateIndex(content, 200, 25_000)
	require.Equal(t, "lines", tr.By)
	require.Equal(t, 200, tr.KeptLines)
}

func TestSection(t *testing.T) {
	t.Parallel()
	require.Nil(t, memory.Section(nil, memory.DefaultLimits()), "no scope, no section")
	user := memory.Scope{Kind: memory.KindUser, ID: "u-42"}
	project := memory.Scope{Kind: memory.KindProject, ID: "repo"}
	blocks := memory.Section([]memory.ScopeIndex{
		{Scope: user, Content: "- [role](role.md) — data scientist\n"},
		{Scope: project, Content: indexOf(201, 60)},
	}, memory.DefaultLimits())
	require.Len(t, blocks, 3)
	require.Equal(t, memory.Instructions, blocks[0])
	for _, want := range []string{"user", "feedback", "project", "reference", "Why:", "How to apply:", "stale", "absolute"} {
		require.Contains(t, blocks[0], want)
	}
	require.Equal(t, "## MEMORY.md of user:u-42 (the user's memories)\n\n- [role](role.md) — data scientist", blocks[1])
	require.Equal(t, 200, strings.Count(blocks[2], "\n- ["))
	require.Contains(t, blocks[2], "line 201 (1 memory")
	empty := memory.Section([]memory.ScopeIndex{{Scope: user}}, memory.DefaultLimits())
	require.Contains(t, empty[1], "no memories saved in this scope yet")
}

// FuzzIndex: no input panics; an index that parses writes back to text that
// parses to the same lines; truncation keeps whole lines from the start
// within both limits and says what it cut.
func FuzzIndex(f *testing.F) {
	f.Add("- [a](a.md) — x\n- [b](b.md)\n")
	f.Add("garbage\n\n- [c](../c.md) — y")
	f.Fuzz(func(t *testing.T, content string) {
		if lines, err := memory.ParseIndex(content); err == nil {
			text := memory.FormatIndex(lines)
			back, err := memory.ParseIndex(text)
			require.NoError(t, err)
			require.Equal(t, lines, back)
			require.Equal(t, text, memory.FormatIndex(back))
		}
		for _, lim := range [][2]int{{3, 1_000}, {200, 25_000}, {1, 10}} {
			kept, tr := memory.TruncateIndex(content, lim[0], lim[1])
			require.LessOrEqual(t, tr.KeptLines, lim[0])
			require.LessOrEqual(t, len(kept), lim[1])
			require.Equal(t, tr.KeptBytes, len(kept))
			require.Equal(t, tr.KeptLines, strings.Count(kept, "\n"))
			require.Equal(t, tr.Cut(), tr.KeptLines < tr.TotalLines)
			require.Equal(t, tr.Cut(), tr.Warning(lim[0], lim[1]) != "")
		}
	})
}
