package extraction

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/memory"
)

// RuleKind says what kind of explicit statement a rule was found in.
type RuleKind string

// The kinds of statement the builtin extractor saves.
const (
	// KindRemember: "remember that …", "keep in mind …": a fact to keep.
	KindRemember RuleKind = "remember"
	// KindStanding: "from now on …", "always …", "never …", "remember to …":
	// an instruction for the work to come.
	KindStanding RuleKind = "standing"
	// KindCorrection: "don't …", "stop …": the user corrects the agent.
	KindCorrection RuleKind = "correction"
)

// Rule is one explicit request or correction in what the user wrote.
type Rule struct {
	Kind RuleKind
	// Text is the rule or the fact as a sentence of its own, relative
	// dates made absolute: "Use pnpm.", "Don't mock the database in these tests."
	Text string
	// Quote is the user's sentence as written.
	Quote string
}

// maxTextBytes: a text longer than this (tags and code taken out) is
// pasted material or an expanded prompt, not the user's own request.
const maxTextBytes = 2_000

// minRuleWords is the fewest words a rule or fact has: "use pnpm".
const minRuleWords = 2

var (
	// tagSection is an XML-like section agents wrap around what is not the
	// user's typing (<system-reminder>, <command-name>, <local-command-stdout>).
	tagSection = regexp.MustCompile(`(?s)<([A-Za-z][\w:.-]*)(\s[^>]*)?>.*?</[A-Za-z][\w:.-]*>`)
	// codeFence is a fenced code block, closed or running to the end.
	codeFence  = regexp.MustCompile("(?s)```.*?(```|$)")
	listMarker = regexp.MustCompile(`^([-*•+]|\d{1,3}[.)])\s+`)
)

// FindRules returns the explicit requests and corrections in one text the
// user wrote, in order. today, when not zero, makes relative dates
// absolute. It is deliberately narrow — a rule must open its sentence, and
// what is not plainly an instruction is left alone:
//   - "remember (that) X", "keep in mind (that) X", "for future reference, X",
//     "don't forget that X", "make a note that X", "save to memory: X" keep the fact X;
//   - "remember to X", "don't forget to X", "from now on X", "going forward X",
//     "in the future X", "always X", "never X" keep the instruction;
//   - "don't X", "do not X", "stop Xing", "quit Xing" keep the correction;
//   - after an opening "ok", "also", "and", "actually", "please", …;
//   - never in a question, a quoted line ("> …"), a heading, a table, code,
//     a tag section, a bracketed note ("[Request interrupted by user]"), or a
//     text longer than 2,000 bytes;
//   - never for turns of phrase: "don't worry", "don't bother", "never mind",
//     "remember when …", "I don't know" (it does not open with "don't");
//   - never without substance: at least two words, and not only "that",
//     "this", "it" after the verb ("don't do that", "stop doing it").
func FindRules(text string, today time.Time) []Rule {
	text = strings.ReplaceAll(text, "’", "'")
	text = tagSection.ReplaceAllString(text, "\n")
	text = codeFence.ReplaceAllString(text, "\n")
	if len(strings.TrimSpace(text)) > maxTextBytes {
		return nil
	}
	var out []Rule
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.ContainsRune(">#|<[", rune(line[0])) {
			continue
		}
		line = listMarker.ReplaceAllString(line, "")
		for _, s := range sentences(line) {
			if r, ok := matchRule(s, today); ok {
				out = append(out, r)
			}
		}
	}
	return out
}

// sentences splits a line after ".", "!", "?" or ";" followed by a space,
// keeping each sentence's end mark.
func sentences(line string) []string {
	var out []string
	start := 0
	for i := 0; i < len(line); i++ {
		if strings.IndexByte(".!?;", line[i]) >= 0 && (i+1 == len(line) || line[i+1] == ' ') {
			if s := strings.TrimSpace(line[start : i+1]); s != "" {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(line[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// leads are words a request may open with before the request itself.
var leads = []string{
	"ok", "okay", "alright", "all right", "also", "and also", "and", "but", "so", "oh", "actually",
	"btw", "by the way", "one more thing", "please", "pls", "plz", "just", "hey", "and please", "also please",
}

// factOpeners open a fact to keep; instructionOpeners an instruction.
var (
	factOpeners = []string{
		"remember that", "remember this", "remember", "keep in mind that", "keep in mind", "bear in mind that",
		"bear in mind", "for future reference", "don't forget that", "do not forget that", "make a note that",
		"make a note", "note for the future", "save to memory", "save this to memory", "save to your memory",
		"add to memory", "add this to memory", "add to your memory", "memorize that", "memorize",
	}
	instructionOpeners = []string{
		"remember to", "don't forget to", "do not forget to", "from now on", "going forward", "from here on out",
		"from here on", "in the future", "in future", "henceforth", "as a rule",
	}
	// notAFact follows a bare "remember" in turns of phrase: "remember when …".
	notAFact = []string{"when", "how", "what", "where", "why", "who", "which", "if", "whether", "me", "you", "us", "the time", "that time", "to"}
	// notACorrection follows "don't" in turns of phrase.
	notACorrection = []string{
		"worry", "bother", "mind", "care", "know", "think", "panic", "hesitate", "apologi", "feel", "sweat",
		"get me wrong", "be sorry", "be afraid", "be shy", "understand", "see", "want", "like", "believe",
		"remember", "get it", "forget", "have to worry", "need to worry", "judge",
	}
	// notAnInstruction follows "always" or "never" in descriptions rather
	// than instructions: "never mind", "always was", "never heard".
	notAnInstruction = []string{
		"mind", "was", "were", "is", "are", "am", "has", "have", "had", "did", "does", "do", "knew", "know",
		"thought", "seen", "heard", "been", "got", "gets", "works", "fails", "happens", "seems", "ever",
	}
	// fillers carry no substance after a verb: "don't do that".
	fillers = []string{"that", "this", "it", "them", "so", "again", "yet", "now", "anymore", "here", "there", "please", "either", "too", "any", "more", "ever", "thing", "things", "stuff"}
)

// matchRule reads one sentence.
func matchRule(sentence string, today time.Time) (Rule, bool) {
	quote := strings.TrimSpace(sentence)
	if strings.HasSuffix(quote, "?") {
		return Rule{}, false
	}
	body := strings.TrimSpace(strings.TrimRight(quote, ".!;: "))
	body = stripLeads(body)
	lower := strings.ToLower(body)

	if rest, ok := opener(body, lower, instructionOpeners); ok {
		rest = stripLeads(rest)
		if words(rest) < minRuleWords {
			return Rule{}, false
		}
		return rule(KindStanding, rest, quote, today), true
	}
	if rest, ok := opener(body, lower, factOpeners); ok {
		if strings.HasPrefix(lower, "remember ") && !strings.HasPrefix(lower, "remember that") && !strings.HasPrefix(lower, "remember this") &&
			hasPrefixWord(strings.ToLower(rest), notAFact) {
			return Rule{}, false
		}
		if words(rest) < minRuleWords {
			return Rule{}, false
		}
		return rule(KindRemember, rest, quote, today), true
	}
	first, rest := cutWord(lower)
	switch first {
	case "always", "never":
		if hasPrefixWord(rest, notAnInstruction) || pastTense(firstWord(rest)) || words(rest) < minRuleWords {
			return Rule{}, false
		}
		return rule(KindStanding, body, quote, today), true
	case "don't", "dont", "do", "stop", "quit":
		if first == "do" {
			if !strings.HasPrefix(rest, "not ") {
				return Rule{}, false
			}
			rest = strings.TrimPrefix(rest, "not ")
		}
		verb, object := cutWord(rest)
		if first == "stop" || first == "quit" {
			if !strings.HasSuffix(verb, "ing") || len(verb) < 5 {
				return Rule{}, false
			}
		} else if hasPrefixWord(rest, notACorrection) {
			return Rule{}, false
		}
		if !substantial(object) {
			return Rule{}, false
		}
		return rule(KindCorrection, body, quote, today), true
	}
	return Rule{}, false
}

// opener reports whether lower opens with one of openers (a whole word,
// then a space, ":" or ","), and returns what follows in body.
func opener(body, lower string, openers []string) (string, bool) {
	for _, o := range openers {
		if !strings.HasPrefix(lower, o) || len(lower) == len(o) {
			continue
		}
		next := lower[len(o)]
		if next != ' ' && next != ':' && next != ',' {
			continue
		}
		rest := strings.TrimLeft(body[len(o):], " :,")
		return rest, rest != ""
	}
	return "", false
}

// stripLeads takes opening words such as "ok," or "also" off s.
func stripLeads(s string) string {
	for {
		lower := strings.ToLower(s)
		cut := false
		for _, l := range leads {
			if strings.HasPrefix(lower, l) && len(s) > len(l) && (s[len(l)] == ' ' || s[len(l)] == ',') {
				s = strings.TrimLeft(s[len(l):], " ,")
				cut = true
				break
			}
		}
		if !cut {
			return s
		}
	}
}

func cutWord(s string) (string, string) {
	first, rest, _ := strings.Cut(strings.TrimSpace(s), " ")
	return first, strings.TrimSpace(rest)
}

func firstWord(s string) string {
	w, _ := cutWord(s)
	return strings.Trim(w, ",.;:!")
}

// hasPrefixWord reports whether s opens with one of phrases, as whole words.
func hasPrefixWord(s string, phrases []string) bool {
	for _, p := range phrases {
		if strings.HasPrefix(s, p) && (len(s) == len(p) || !isLetter(s[len(p)]) || strings.HasSuffix(p, "apologi")) {
			return true
		}
	}
	return false
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '\'' }

// pastTense reports a past form after "always"/"never" ("never worked"),
// sparing verbs that end in "ed" anyway.
func pastTense(w string) bool {
	switch w {
	case "need", "embed", "feed", "seed", "proceed", "exceed", "succeed", "shed", "speed", "heed", "bleed":
		return false
	}
	return strings.HasSuffix(w, "ed") && len(w) > 3
}

// words counts the words of s.
func words(s string) int { return len(strings.Fields(s)) }

// substantial reports whether the words after a verb say something:
// at least one that is not a filler ("that", "it", …).
func substantial(object string) bool {
	for _, w := range strings.Fields(strings.ToLower(object)) {
		if !slices.Contains(fillers, strings.Trim(w, ",.;:!'\"`")) {
			return true
		}
	}
	return false
}

// rule makes a Rule of a statement's text.
func rule(kind RuleKind, text, quote string, today time.Time) Rule {
	text = strings.TrimSpace(strings.TrimRight(text, ".!;:, "))
	text = absoluteDates(text, today)
	r, n := utf8.DecodeRuneInString(text)
	text = string(unicode.ToUpper(r)) + text[n:] + "."
	return Rule{Kind: kind, Text: text, Quote: quote}
}

var (
	datedWord = regexp.MustCompile(`(?i)\b(until|till|by|since|from|on|before|after|through)\s+(today|tonight|tomorrow|yesterday)\b`)
	bareDay   = regexp.MustCompile(`(?i)\b(today|tonight|tomorrow|yesterday)\b`)
	weekWord  = regexp.MustCompile(`(?i)\b(this|next|last)\s+week\b`)
)

// absoluteDates turns "today", "tonight", "tomorrow", "yesterday" and
// "this/next/last week" into dates counted from today (when not zero).
func absoluteDates(s string, today time.Time) string {
	if today.IsZero() {
		return s
	}
	day := func(word string) string {
		switch strings.ToLower(word) {
		case "tomorrow":
			return today.AddDate(0, 0, 1).Format(time.DateOnly)
		case "yesterday":
			return today.AddDate(0, 0, -1).Format(time.DateOnly)
		}
		return today.Format(time.DateOnly)
	}
	s = datedWord.ReplaceAllStringFunc(s, func(m string) string {
		sub := datedWord.FindStringSubmatch(m)
		return sub[1] + " " + day(sub[2])
	})
	s = bareDay.ReplaceAllStringFunc(s, func(m string) string { return "on " + day(m) })
	return weekWord.ReplaceAllStringFunc(s, func(m string) string {
		monday := today.AddDate(0, 0, -((int(today.Weekday()) + 6) % 7))
		switch strings.ToLower(weekWord.FindStringSubmatch(m)[1]) {
		case "next":
			monday = monday.AddDate(0, 0, 7)
		case "last":
			monday = monday.AddDate(0, 0, -7)
		}
		return "the week of " + monday.Format(time.DateOnly)
	})
}

// nameStopwords are left out of names.
var nameStopwords = []string{
	"a", "an", "the", "our", "my", "your", "their", "his", "her", "its", "this", "that", "these", "those",
	"is", "are", "was", "were", "be", "been", "am", "to", "of", "in", "on", "at", "for", "and", "or", "but",
	"with", "from", "by", "as", "it", "we", "you", "i", "me", "us", "they", "them", "please", "also", "just",
	"so", "very", "really", "any", "some", "all", "there", "here", "when", "while", "then", "than", "into",
	"about", "what", "which", "who", "do", "does", "did", "dont", "don", "t", "not", "no", "always", "never", "stop", "quit", "s",
}

// maxNameWords and maxNameBytes bound a name made from a rule.
const (
	maxNameWords = 5
	maxNameBytes = 48
)

// Name is the memory name of a rule: up to five of its significant words,
// lowercase, joined by '-', after "no-" for a correction or a "never" rule
// ("no-mock-database-tests"); a digest when no word is left.
func (r Rule) Name() memory.Name {
	lower := strings.ToLower(r.Text)
	prefix := ""
	if r.Kind == KindCorrection || strings.HasPrefix(lower, "never ") {
		prefix = "no-"
	}
	tokens := strings.FieldsFunc(strings.ReplaceAll(lower, "'", ""), func(c rune) bool {
		return (c < 'a' || c > 'z') && (c < '0' || c > '9')
	})
	name := prefix
	n := 0
	for _, w := range tokens {
		if slices.Contains(nameStopwords, w) {
			continue
		}
		if n == maxNameWords || len(name)+len(w)+1 > maxNameBytes {
			break
		}
		if n > 0 {
			name += "-"
		}
		name += w
		n++
	}
	if n == 0 {
		sum := sha256.Sum256([]byte(r.Text))
		name = "rule-" + hex.EncodeToString(sum[:4])
	}
	return memory.Name(name)
}
