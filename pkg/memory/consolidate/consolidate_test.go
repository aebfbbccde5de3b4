package consolidate_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/consolidate"
)

// ref is a Wednesday.
var ref = time.Date(2026, 11, 18, 15, 30, 0, 0, time.UTC)

func TestResolveDates(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"We moved the deploy yesterday.":              "We moved the deploy on 2026-11-17.",
		"Yesterday the build broke.":                  "On 2026-11-17 the build broke.",
		"Broken since yesterday, fixed today.":        "Broken since 2026-11-17, fixed on 2026-11-18.",
		"yesterday's meeting decided it":              "the 2026-11-17 meeting decided it",
		"The freeze starts tomorrow.":                 "The freeze starts on 2026-11-19.",
		"the day before yesterday":                    "on 2026-11-16",
		"3 days ago the cache was cleared":            "on 2026-11-15 the cache was cleared",
		"two days ago":                                "on 2026-11-16",
		"a week ago":                                  "in the week of 2026-11-09",
		"Released last week.":                         "Released in the week of 2026-11-09.",
		"Due next week":                               "Due in the week of 2026-11-23",
		"until next week":                             "until the week of 2026-11-23",
		"This week's release slipped":                 "The week of 2026-11-16 release slipped",
		"Migrated last month":                         "Migrated in October 2026",
		"2 months ago":                                "in September 2026",
		"last year":                                   "in 2025",
		"The review was last Monday.":                 "The review was on 2026-11-16.",
		"The review was last Wednesday.":              "The review was on 2026-11-11.",
		"Ship next Friday":                            "Ship on 2026-11-20",
		"Ship on Friday":                              "Ship on 2026-11-20",
		"Met this Monday":                             "Met on 2026-11-16",
		"in 3 days":                                   "on 2026-11-21",
		"as of today":                                 "as of 2026-11-18",
		"Run `make test` yesterday, not `yesterday`.": "Run `make test` on 2026-11-17, not `yesterday`.",
		"Nothing relative here: 2026-01-02, Monday.":  "Nothing relative here: 2026-01-02, Monday.",
		"today\n```\nyesterday\n```\ntomorrow":        "on 2026-11-18\n```\nyesterday\n```\non 2026-11-19",
	} {
		got, n := consolidate.ResolveDates(in, ref)
		require.Equal(t, want, got, in)
		require.Equal(t, in != want, n > 0, in)
	}
	_, n := consolidate.ResolveDates("yesterday and today and last week", ref)
	require.Equal(t, 3, n)
}

func doc(name, description, body string) memory.Document {
	return memory.Document{Name: memory.Name(name), Description: description, Type: memory.TypeFeedback, Body: body}
}

func TestNearDuplicates(t *testing.T) {
	t.Parallel()
	long := "Integration tests must hit a real Postgres database, never mocks, because mocks hid a broken migration."
	for _, c := range []struct {
		a, b memory.Document
		want bool
	}{
		{doc("a", "Tests use a real DB", "Use pgtest."), doc("b", "tests use a real db!", "use  pgtest"), true},
		{doc("a", "Testing rule", long), doc("b", "Testing rule", long+" Always."), true},
		{doc("a", "Testing rule", long), doc("b", "Testing rule", "Integration tests must hit a real Postgres database."), false},
		{doc("a", "Short", "yes"), doc("b", "Short", "no"), false},
		{doc("a", "Tests use a real DB", "Use pgtest."), memory.Document{Name: "b", Description: "Tests use a real DB", Type: memory.TypeProject, Body: "Use pgtest."}, false},
	} {
		require.Equal(t, c.want, consolidate.NearDuplicate(c.a, c.b), "%+v / %+v", c.a, c.b)
	}
	docs := []memory.Document{
		doc("a", "Tests use a real DB", "Use pgtest."),
		doc("b", "Other", "Something else entirely."),
		doc("c", "tests use a real DB.", "Use pgtest"),
		doc("d", "TESTS USE A REAL DB", "use pgtest"),
	}
	require.Equal(t, [][]int{{0, 2, 3}}, consolidate.Clusters(docs))
}

func memoryAt(name, description, body string, created, updated time.Time) memory.Memory {
	return memory.Memory{Document: doc(name, description, body), Revision: 1, CreatedAt: created, UpdatedAt: updated}
}

// TestPlanMergesResolvesAndIndexes: duplicates fold into the oldest name
// with the latest text and the lines only the others had; relative dates
// resolve against each memory's own date; the index lists what is left,
// most recently updated first, keeping the hooks editors chose.
func TestPlanMergesResolvesAndIndexes(t *testing.T) {
	t.Parallel()
	day := func(d int) time.Time { return time.Date(2026, 11, d, 9, 0, 0, 0, time.UTC) }
	rule := "Integration tests hit a real Postgres database through pgtest and never use mocks for the store, so every migration is exercised."
	ms := []memory.Memory{
		memoryAt("testing", "Tests use a real DB", rule, day(1), day(1)),
		memoryAt("testing-2", "tests use a real db", rule+"\nMocks hid a bug.", day(5), day(5)),
		memoryAt("deploys", "Deploy freeze", "The freeze started yesterday.", day(10), day(10)),
		memoryAt("role", "Data scientist", "New to Go.", day(3), day(3)),
	}
	index := []memory.Line{
		{Title: "Role", Name: "role", Hook: "who the user is"},
		{Title: "testing", Name: "testing", Hook: "Tests use a real DB"},
		{Title: "testing-2", Name: "testing-2", Hook: "tests use a real db"},
		{Title: "deploys", Name: "deploys", Hook: "Deploy freeze"},
	}
	res := consolidate.Plan(ms, index, memory.DefaultLimits())
	require.Equal(t, 1, res.Merged)
	require.Equal(t, 1, res.Dates)
	require.Equal(t, []consolidate.Deletion{{Name: "testing-2", Reason: "merged into testing.md"}}, res.Deletes)
	require.Equal(t, []memory.Document{
		doc("testing", "tests use a real db", rule+"\nMocks hid a bug."),
		doc("deploys", "Deploy freeze", "The freeze started on 2026-11-09."),
	}, res.Writes)
	require.Equal(t, "- [deploys](deploys.md) — Deploy freeze\n- [testing](testing.md) — tests use a real db\n- [Role](role.md) — who the user is\n",
		memory.FormatIndex(res.Index), "newest first; a default hook follows the new description; a chosen one stays")

	again := consolidate.Plan([]memory.Memory{
		memoryAt("testing", "tests use a real db", rule+"\nMocks hid a bug.", day(1), day(20)),
		memoryAt("role", "Data scientist", "New to Go.", day(3), day(3)),
	}, res.Index, memory.DefaultLimits())
	require.Empty(t, again.Writes, "a consolidated scope stays as it is")
	require.Empty(t, again.Deletes)
}

// TestFitBringsTheIndexWithinItsBytes: an index over its byte limit has its
// longest lines cut to their share, hooks ending in "…"; lines within it
// stay; every line keeps within the character limit.
func TestFitBringsTheIndexWithinItsBytes(t *testing.T) {
	t.Parallel()
	l := memory.DefaultLimits()
	var lines []memory.Line
	for i := range 190 {
		lines = append(lines, memory.DefaultLine(memory.Name(fmt.Sprintf("memory-%03d", i)), strings.Repeat("a long hook about the memory ", 6), l.IndexLineMaxChars))
	}
	lines = append(lines, memory.Line{Title: "short", Name: "short", Hook: "kept"})
	require.Greater(t, len(memory.FormatIndex(lines)), l.IndexMaxBytes)
	out := consolidate.Fit(lines, l)
	content := memory.FormatIndex(out)
	require.LessOrEqual(t, len(content), l.IndexMaxBytes)
	kept, cut := memory.TruncateIndex(content, l.IndexMaxLines, l.IndexMaxBytes)
	require.False(t, cut.Cut(), "a context loads all of it")
	require.Equal(t, content, kept)
	for _, ln := range out[:190] {
		require.True(t, strings.HasSuffix(ln.Hook, "…"), ln.Hook)
		require.LessOrEqual(t, utf8.RuneCountInString(ln.String()), l.IndexLineMaxChars)
	}
	require.Equal(t, lines[190], out[190], "a short line is left alone")
	require.Equal(t, lines[:3], consolidate.Fit(lines[:3], l), "an index within its limits is left alone")
}

func TestLimitsRoundTrip(t *testing.T) {
	t.Parallel()
	l := memory.Limits{IndexMaxLines: 50, IndexMaxBytes: 9000, IndexLineMaxChars: 160, MaxBytes: 4096}
	got, ok := consolidate.ParseLimits("Before. " + consolidate.FormatLimits(l) + " After.")
	require.True(t, ok)
	require.Equal(t, l, got)
	_, ok = consolidate.ParseLimits("no limits here")
	require.False(t, ok)
}

func TestMergeKeepsWhatOnlyTheOthersSaid(t *testing.T) {
	t.Parallel()
	latest := doc("x", "Latest wording", "Rule one.\nRule two.")
	older := doc("y", "Older wording", "rule one\nRule three, only here.\n\nRule two!")
	got := consolidate.Merge("keep", latest, []memory.Document{older}, 16<<10)
	require.Equal(t, doc("keep", "Latest wording", "Rule one.\nRule two.\nRule three, only here."), got)
	small := consolidate.Merge("keep", latest, []memory.Document{older}, len(doc("keep", "Latest wording", "Rule one.\nRule two.").Markdown())+3)
	require.Equal(t, "Rule one.\nRule two.", small.Body, "lines that would not fit are left out")
}
