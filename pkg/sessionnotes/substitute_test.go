package sessionnotes_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/sessionnotes"
)

func TestSubstitute(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"a": "A", "b": "{{a}}", "dollar": "$1 $& ${a} \\1"}
	for in, want := range map[string]string{
		"":                     "",
		"plain":                "plain",
		"{{a}}":                "A",
		"x{{a}}y{{a}}z":        "xAyAz",
		"{{b}}":                "{{a}}",
		"{{dollar}}":           "$1 $& ${a} \\1",
		"{{missing}} {{a}}":    "{{missing}} A",
		"{{{a}}}":              "{A}",
		"{{a}":                 "{{a}",
		"{{ a }}":              "{{ a }}",
		"{{}}{{a}}":            "{{}}A",
		"}}{{a}}{{":            "}}A{{",
		"{{a}}{{b}}{{dollar}}": "A{{a}}$1 $& ${a} \\1",
	} {
		require.Equal(t, want, sessionnotes.Substitute(in, vars), "Substitute(%q)", in)
	}
}

// piece is one part of a generated prompt: literal text (no braces), or a
// placeholder of a variable.
type piece struct {
	literal string
	name    string
}

// tricky are fragments that a substitution done twice, or by a regexp
// replacement, would act on.
var tricky = []string{"{{a}}", "{{b}}", "{{other}}", "{{", "}}", "{", "}", "$1", "$&", "${a}", "$$", "\\", "\\1", "\\n", "{{a", "a}}", "{{{{b}}}}", "%s", "\x00", "é", "\n"}

func randomValue(r *rand.Rand) string {
	var b strings.Builder
	for range r.IntN(8) {
		if r.IntN(3) == 0 {
			b.WriteString("plain text ")
		} else {
			b.WriteString(tricky[r.IntN(len(tricky))])
		}
	}
	return b.String()
}

// TestSubstituteNeverExpandsAValue is the single-pass property: for random
// prompts and random values (full of placeholders, braces, regexp
// replacement syntax and backslashes), the result is exactly the literal
// text with each placeholder replaced by its value as it is.
func TestSubstituteNeverExpandsAValue(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "b", "other", "x_1"}
	for i := range 20_000 {
		vars := map[string]string{}
		for _, n := range names {
			if r.IntN(4) > 0 {
				vars[n] = randomValue(r)
			}
		}
		var pieces []piece
		for range r.IntN(10) {
			if r.IntN(2) == 0 {
				pieces = append(pieces, piece{literal: []string{"Update ", "the notes. ", "$1 ", "\\ ", "x", "\n"}[r.IntN(6)]})
			} else {
				pieces = append(pieces, piece{name: names[r.IntN(len(names))]})
			}
		}
		var prompt, want strings.Builder
		for _, p := range pieces {
			if p.name == "" {
				prompt.WriteString(p.literal)
				want.WriteString(p.literal)
				continue
			}
			prompt.WriteString("{{" + p.name + "}}")
			if v, ok := vars[p.name]; ok {
				want.WriteString(v)
			} else {
				want.WriteString("{{" + p.name + "}}")
			}
		}
		require.Equal(t, want.String(), sessionnotes.Substitute(prompt.String(), vars), "case %d: prompt %q, vars %q", i, prompt.String(), vars)
	}
}

// FuzzSubstitute: a value comes out exactly as it is, whatever it holds.
func FuzzSubstitute(f *testing.F) {
	for _, s := range tricky {
		f.Add(s, "x")
	}
	f.Add("{{other}}", "{{a}}")
	f.Fuzz(func(t *testing.T, a, other string) {
		vars := map[string]string{"a": a, "other": other}
		require.Equal(t, a, sessionnotes.Substitute("{{a}}", vars))
		require.Equal(t, "<"+a+"|"+other+">", sessionnotes.Substitute("<{{a}}|{{other}}>", vars))
	})
}

func TestValidatePrompt(t *testing.T) {
	t.Parallel()
	require.NoError(t, sessionnotes.ValidatePrompt(sessionnotes.DefaultPrompt))
	require.NoError(t, sessionnotes.ValidatePrompt("Update the notes; keep sections under {{max_section_tokens}} tokens."))
	require.ErrorContains(t, sessionnotes.ValidatePrompt("Use {{notes}} here."), "{{notes}}")
	require.ErrorContains(t, sessionnotes.ValidatePrompt(" \n"), "blank")
	require.ErrorContains(t, sessionnotes.ValidatePrompt(strings.Repeat("x", sessionnotes.MaxPromptBytes+1)), "longer than")
	require.Equal(t, []string{"a", "b"}, sessionnotes.Placeholders("{{a}} {{b}} {{a}} {{not valid}}"))
}
