package memory_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

const testingMemory = `---
name: testing-style
description: Integration tests hit a real database, never mocks
type: feedback
---

Integration tests run against a real Postgres.

**Why:** a mocked database hid a broken migration last quarter.
**How to apply:** new store code gets a pgtest-backed test.
`

func TestParseDocument(t *testing.T) {
	t.Parallel()
	d, err := memory.ParseDocument(testingMemory)
	require.NoError(t, err)
	require.Equal(t, memory.Name("testing-style"), d.Name)
	require.Equal(t, "Integration tests hit a real database, never mocks", d.Description)
	require.Equal(t, memory.TypeFeedback, d.Type)
	require.True(t, strings.HasPrefix(d.Body, "Integration tests run"))
	require.True(t, strings.HasSuffix(d.Body, "pgtest-backed test."))
	require.Equal(t, testingMemory, d.Markdown(), "the canonical form is written back as it was read")

	crlf := strings.ReplaceAll(testingMemory, "\n", "\r\n")
	d2, err := memory.ParseDocument("\ufeff" + crlf)
	require.NoError(t, err)
	require.Equal(t, d, d2, "CRLF and a byte order mark read the same")

	quoted := "---\nname: \"q\"\ndescription: 'it''s \"quoted\": yes'\ntype: user\n---\n"
	d3, err := memory.ParseDocument(quoted)
	require.NoError(t, err)
	require.Equal(t, `it's "quoted": yes`, d3.Description)
	require.Empty(t, d3.Body)
	lead := d3
	lead.Description = `"leading quote`
	back, err := memory.ParseDocument(lead.Markdown())
	require.NoError(t, err)
	require.Equal(t, lead, back)
}

func TestParseDocumentRefuses(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]memory.Reason{
		"no frontmatter":                  memory.ReasonBadFrontmatter,
		"---\nname: a\n":                  memory.ReasonBadFrontmatter,
		"---\nname: a\ntype: user\n---\n": memory.ReasonBadFrontmatter,
		"---\nname: a\nname: b\n---\n":    memory.ReasonBadFrontmatter,
		"---\nname: a\ndescription: d\ntype: user\nowner: me\n---\n": memory.ReasonBadFrontmatter,
		"---\nname: a\ndescription: \"open\ntype: user\n---\n":       memory.ReasonBadFrontmatter,
		"---\nno colon\n---\n":                                                           memory.ReasonBadFrontmatter,
		"---\nname: a\ndescription: d\ntype: opinion\n---\n":                             memory.ReasonBadType,
		"---\nname: a\ndescription: d\ntype: \n---\n":                                    memory.ReasonBadType,
		"---\nname: ../a\ndescription: d\ntype: user\n---\n":                             memory.ReasonOutOfScope,
		"---\nname: A\ndescription: d\ntype: user\n---\n":                                memory.ReasonBadName,
		"---\nname: a\ndescription:\ntype: user\n---\n":                                  memory.ReasonBadDescription,
		"---\nname: a\ndescription: \"tab\\u0007\"\ntype: user\n---\n":                   memory.ReasonBadDescription,
		"---\nname: a\ndescription: " + strings.Repeat("d", 301) + "\ntype: user\n---\n": memory.ReasonBadDescription,
		"---\nname: a\ndescription: d\ntype: user\n---\nbody \x00":                       memory.ReasonBadBody,
		"---\nname: a\ndescription: d\ntype: user\n---\n\xff":                            memory.ReasonInvalidUTF8,
	} {
		_, err := memory.ParseDocument(in)
		require.Equal(t, want, reasonOf(t, err), "%q", in)
	}
	d, err := memory.ParseDocument(testingMemory)
	require.NoError(t, err)
	d.Body = strings.Repeat("long line of text\n", 1_000)
	require.Equal(t, memory.ReasonTooLarge, reasonOf(t, d.Canonical().Validate(memory.DefaultLimits())))
}

// FuzzParseDocument: no input panics; a document that parses writes back
// to markdown that parses to the same document and writes the same bytes
// again; what is refused is refused with a reason.
func FuzzParseDocument(f *testing.F) {
	for _, s := range []string{
		testingMemory,
		"---\nname: a\ndescription: d\ntype: user\n---\n",
		"---\r\nname: a\r\ndescription: 'x''y'\r\ntype: project\r\n---\r\n\r\nbody\r\n",
		"---\nname: a\ndescription: \"\\\"q\\\"\"\ntype: reference\n---\n---\nnot a second frontmatter\n",
		"---\nname: a\ndescription: d\ntype: user\n---", "---\n---\n", "", "---", "\ufeff---\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := memory.ParseDocument(s)
		if err != nil {
			_, ok := memory.AsError(err)
			require.True(t, ok, "refusals are *memory.Error: %v", err)
			return
		}
		require.Equal(t, d, d.Canonical(), "a parsed document is canonical")
		md := d.Markdown()
		back, err := memory.ParseDocument(md)
		require.NoError(t, err, "%q", md)
		require.Equal(t, d, back)
		require.Equal(t, md, back.Markdown())
		_, err = memory.ParseName(string(d.Name))
		require.NoError(t, err, "a parsed document's name is a valid name")
	})
}
