package sessionnotes_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
)

func template(t *testing.T) sessionnotes.Document {
	t.Helper()
	d, err := sessionnotes.ParseTemplate(sessionnotes.DefaultTemplate)
	require.NoError(t, err)
	return d
}

// filled is the default template with a body in some sections.
func filled(t *testing.T, bodies map[string]string) sessionnotes.Document {
	t.Helper()
	d := template(t)
	for i := range d.Sections {
		if b, ok := bodies[d.Sections[i].Heading]; ok {
			d.Sections[i].Body = b
		}
	}
	return d
}

func TestDefaultTemplateIsCanonical(t *testing.T) {
	t.Parallel()
	d := template(t)
	require.Len(t, d.Sections, 10)
	require.Equal(t, sessionnotes.Headings(), headingsOf(d))
	require.Equal(t, sessionnotes.DefaultTemplate, d.Render(), "the template renders to itself")
	for _, s := range d.Sections {
		require.True(t, strings.HasPrefix(s.Description, "_") && strings.HasSuffix(s.Description, "_"), s.Description)
		require.Empty(t, s.Body)
	}
}

func headingsOf(d sessionnotes.Document) []string {
	var out []string
	for _, s := range d.Sections {
		out = append(out, s.Heading)
	}
	return out
}

func TestParseRoundTripsAndKeepsCodeInBodies(t *testing.T) {
	t.Parallel()
	d := filled(t, map[string]string{
		sessionnotes.HeadingWorkflow: "Build and test:\n\n```sh\n# run the tests\nmake test\n```\n\n## Deploy\n- `make deploy`",
		sessionnotes.HeadingWorklog:  "- read the code\n- fixed the bug",
	})
	text := d.Render()
	back, err := sessionnotes.Parse(text)
	require.NoError(t, err)
	require.Equal(t, d, back)
	require.NoError(t, back.CheckStructure())
	w, _ := back.Section(sessionnotes.HeadingWorkflow)
	require.Contains(t, w.Body, "# run the tests", "a shell comment inside fenced code is not a heading")
}

func TestParseRefusesBrokenDocuments(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"text before the first heading": "Notes:\n# Session Title\n_t_\n",
		"no description":                "# Session Title\n\nbody\n",
		"description not italic":        "# Session Title\nA title.\n",
		"heading right after heading":   "# Session Title\n# Current State\n_s_\n",
		"unclosed fence":                "# Session Title\n_t_\n```\ncode\n",
		"nothing":                       "\n\n",
	} {
		_, err := sessionnotes.Parse(text)
		require.Error(t, err, name)
	}
}

func TestParseTemplateKeepsTheFixedStructure(t *testing.T) {
	t.Parallel()
	d := template(t)
	swapped := sessionnotes.Document{Sections: append([]sessionnotes.Section(nil), d.Sections...)}
	swapped.Sections[1], swapped.Sections[2] = swapped.Sections[2], swapped.Sections[1]
	missing := sessionnotes.Document{Sections: d.Sections[:9]}
	extra := sessionnotes.Document{Sections: append(append([]sessionnotes.Section(nil), d.Sections...), sessionnotes.Section{Heading: "Extra", Description: "_more_"})}
	renamed := sessionnotes.Document{Sections: append([]sessionnotes.Section(nil), d.Sections...)}
	renamed.Sections[0].Heading = "Title"
	for name, doc := range map[string]sessionnotes.Document{"swapped": swapped, "missing": missing, "extra": extra, "renamed": renamed} {
		_, err := sessionnotes.ParseTemplate(doc.Render())
		require.Error(t, err, name)
	}

	// A tenant's own descriptions and starting content are fine.
	own := filled(t, map[string]string{sessionnotes.HeadingWorkflow: "Always run `make check` first."})
	own.Sections[0].Description = "*What we call this session.*"
	got, err := sessionnotes.ParseTemplate(own.Render())
	require.NoError(t, err)
	require.Equal(t, own, got)
	_, err = sessionnotes.ParseTemplate(strings.Repeat("x", sessionnotes.MaxTemplateBytes+1))
	require.ErrorContains(t, err, "longer than")
}

func TestParseEdits(t *testing.T) {
	t.Parallel()
	cur := filled(t, map[string]string{sessionnotes.HeadingState: "Reading the code."})
	desc := func(h string) string { s, _ := cur.Section(h); return s.Description }
	edit := func(h, body string) string { return "# " + h + "\n" + desc(h) + "\n\n" + body + "\n" }

	ok := edit(sessionnotes.HeadingState, "Fixing the parser.") + "\n" + edit(sessionnotes.HeadingWorklog, "- read parse.go\n- fixed it")
	sections, err := sessionnotes.ParseEdits(ok, cur)
	require.NoError(t, err)
	next := sessionnotes.Apply(cur, sections)
	require.Equal(t, []string{sessionnotes.HeadingState, sessionnotes.HeadingWorklog}, sessionnotes.Changed(cur, next))
	s, _ := next.Section(sessionnotes.HeadingState)
	require.Equal(t, "Fixing the parser.", s.Body)
	require.Equal(t, headingsOf(cur), headingsOf(next), "the structure never moves")

	fenced, err := sessionnotes.ParseEdits("```markdown\n"+ok+"```", cur)
	require.NoError(t, err, "a fence around the whole answer is taken off")
	require.Equal(t, sections, fenced)

	for name, answer := range map[string]string{
		"renamed heading":       "# Status\n" + desc(sessionnotes.HeadingState) + "\n\nFixing.\n",
		"changed description":   "# " + sessionnotes.HeadingState + "\n_Where things are._\n\nFixing.\n",
		"description dropped":   "# " + sessionnotes.HeadingState + "\nFixing.\n",
		"written twice":         edit(sessionnotes.HeadingState, "a") + edit(sessionnotes.HeadingState, "b"),
		"text before a heading": "Here are my edits:\n" + edit(sessionnotes.HeadingState, "a"),
		"no section":            "Nothing changed.",
		"empty":                 "  \n",
		"heading hidden in an unclosed fence": edit(sessionnotes.HeadingState, "```\ncode") + "\n" +
			edit(sessionnotes.HeadingWorklog, "- x") + "```\n",
	} {
		_, err := sessionnotes.ParseEdits(answer, cur)
		require.ErrorIs(t, err, sessionnotes.ErrRejected, name)
	}
}

func TestForCompactionRefusesTheEmptyTemplate(t *testing.T) {
	t.Parallel()
	_, err := sessionnotes.ForCompaction(sessionnotes.DefaultTemplate, sessionnotes.DefaultTemplate, 2000, 12000)
	require.ErrorIs(t, err, sessionnotes.ErrEmpty)

	// A tenant template with starting content: notes that only hold it are empty too.
	own := filled(t, map[string]string{sessionnotes.HeadingWorkflow: "Always run `make check` first."})
	_, err = sessionnotes.ForCompaction(own.Render(), own.Render(), 2000, 12000)
	require.ErrorIs(t, err, sessionnotes.ErrEmpty)

	notes := filled(t, map[string]string{sessionnotes.HeadingState: "Fixing the parser."}).Render()
	got, err := sessionnotes.ForCompaction(notes, sessionnotes.DefaultTemplate, 2000, 12000)
	require.NoError(t, err)
	require.Equal(t, notes, got)

	_, err = sessionnotes.ForCompaction("# Notes\n_n_\n\nsomething\n", sessionnotes.DefaultTemplate, 2000, 12000)
	require.Error(t, err, "notes without the fixed structure are not used")
}

func TestTruncateBoundsEachSectionAndTheWhole(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("a long line of notes about the work. ", 1_000) // about 9,250 tokens
	d := filled(t, map[string]string{
		sessionnotes.HeadingFiles:    big,
		sessionnotes.HeadingWorkflow: big,
		sessionnotes.HeadingErrors:   big,
		sessionnotes.HeadingWorklog:  big,
		sessionnotes.HeadingState:    "Short and whole.",
	})

	per := sessionnotes.Truncate(d, 2_000, 0)
	for _, s := range per.Sections {
		require.LessOrEqual(t, int64(len(s.Body)), int64(2_000*4), s.Heading)
	}
	f, _ := per.Section(sessionnotes.HeadingFiles)
	require.Contains(t, f.Body, "truncated")
	require.NoError(t, per.CheckStructure())

	both := sessionnotes.Truncate(d, 2_000, 6_000)
	require.LessOrEqual(t, both.Tokens(), int64(6_000))
	s, _ := both.Section(sessionnotes.HeadingState)
	require.Equal(t, "Short and whole.", s.Body, "a small section is not cut")
	require.Equal(t, headingsOf(d), headingsOf(both))
	back, err := sessionnotes.Parse(both.Render())
	require.NoError(t, err)
	require.NoError(t, back.CheckStructure())

	small := filled(t, map[string]string{sessionnotes.HeadingState: "x"})
	require.Equal(t, small, sessionnotes.Truncate(small, 2_000, 12_000), "notes within the limits stay as they are")
}
