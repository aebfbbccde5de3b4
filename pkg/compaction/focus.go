package compaction

import (
	"slices"
	"strings"
	"unicode"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// A compaction's instructions ("keep the migration details") name what the
// summary must keep. A model follows them; the extractive summary, which has
// no model, keeps the lines of the conversation that name the same things:
// its focus section.

// focusTerms are the words of instructions worth looking for: four letters
// or more, not among the words every instruction uses.
func focusTerms(instructions string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(instructions), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' && r != '.' && r != '/'
	}) {
		w = strings.Trim(w, ".-/")
		if len([]rune(w)) < 4 || focusStopwords[w] || slices.Contains(out, w) {
			continue
		}
		out = append(out, w)
	}
	return out
}

// focusStopwords are words of instructions that name nothing to keep.
var focusStopwords = map[string]bool{
	"keep": true, "keeps": true, "kept": true, "make": true, "sure": true, "that": true, "this": true, "these": true,
	"those": true, "with": true, "from": true, "into": true, "about": true, "every": true, "each": true, "detail": true,
	"details": true, "summary": true, "summarize": true, "include": true, "including": true, "please": true, "focus": true,
	"only": true, "also": true, "short": true, "brief": true, "long": true, "what": true, "when": true, "where": true, "which": true, "have": true, "they": true,
	"them": true, "there": true, "their": true, "should": true, "would": true, "could": true, "must": true, "more": true,
	"less": true, "than": true, "then": true, "will": true, "your": true, "preserve": true, "remember": true, "mention": true,
	"especially": true, "everything": true, "anything": true, "conversation": true, "above": true, "below": true,
}

// focusLines are the lines of msgs, most recent first, that name one of
// the instructions' terms, each clipped to itemChars, at most maxChars in
// all; none when the instructions name nothing.
func focusLines(msgs []view.Message, instructions string, itemChars, maxChars int) []string {
	terms := focusTerms(instructions)
	if len(terms) == 0 {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	used := 0
	for i := len(msgs) - 1; i >= 0 && used < maxChars; i-- {
		for _, line := range messageLines(msgs[i].Content) {
			line = strings.TrimSpace(line)
			lower := strings.ToLower(line)
			if line == "" || seen[lower] || !slices.ContainsFunc(terms, func(t string) bool { return strings.Contains(lower, t) }) {
				continue
			}
			seen[lower] = true
			line = Clip(line, itemChars)
			if used+len(line) > maxChars {
				return out
			}
			used += len(line) + 3
			out = append(out, line)
		}
	}
	return out
}

// messageLines are the lines of a message's text: its text blocks, tool
// results and tool inputs.
func messageLines(c turn.Content) []string {
	var out []string
	for _, b := range c {
		switch {
		case b.Type == turn.BlockText:
			out = append(out, strings.Split(b.Text, "\n")...)
		case b.Type == turn.BlockToolResult && b.Content != nil:
			out = append(out, messageLines(*b.Content)...)
		case b.Type == turn.BlockToolUse && len(b.Input) > 0:
			out = append(out, string(b.Input))
		}
	}
	return out
}

// focusSection is the extractive summary's section for instructions, ""
// without instructions.
func focusSection(msgs []view.Message, lim ExtractLimits) string {
	if strings.TrimSpace(lim.Focus) == "" {
		return ""
	}
	lines := focusLines(msgs, lim.Focus, lim.ItemChars, lim.ListChars)
	var b strings.Builder
	b.WriteString("\nThe compaction's instructions: ")
	b.WriteString(quote(Clip(strings.TrimSpace(lim.Focus), lim.MessageChars)))
	if len(lines) == 0 {
		b.WriteString("\nNo line of the conversation names what they ask to keep.")
		return b.String()
	}
	b.WriteString("\nThe lines of the conversation that name what they ask to keep, most recent first:")
	for _, l := range lines {
		b.WriteString("\n- ")
		b.WriteString(l)
	}
	return b.String()
}
