package consolidate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Relative dates rot: "yesterday" in a memory means nothing a week later.
// ResolveDates rewrites them as absolute dates, counted from the date the
// memory's text was written (its latest revision):
//
//	today, tonight, this morning/afternoon/evening → 2026-11-22 (the day itself)
//	yesterday, last night, the day before yesterday → 2026-11-21, 2026-11-20
//	tomorrow, the day after tomorrow                → 2026-11-23, 2026-11-24
//	N days ago, in N days                           → the day
//	last/this/next week, N weeks ago                → the week of <its Monday>
//	last/this/next month, N months ago              → November 2026
//	last/this/next year, N years ago                → 2025
//	last Monday (the latest before the day), next Monday (the first after),
//	this Monday / on Monday (the Monday of the day's own week)
//
// N is a number or a/an/one…twelve. A day becomes "on 2026-11-21", a week
// "in the week of 2026-11-16", a month "in November 2026", a year "in 2025",
// unless a preposition (since, until, by, before, after, from, …) already
// stands before the phrase; "yesterday's" becomes "the 2026-11-21". Text in
// code (between backticks, or in fenced blocks) is left alone.

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

var numberWords = map[string]int{
	"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
	"seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}

const (
	weekdayRE = `monday|tuesday|wednesday|thursday|friday|saturday|sunday`
	numberRE  = `\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve`
)

// relativeRE finds the phrases, longest alternatives first. Groups:
// 1 number + 2 unit ("ago"), 3 number + 4 unit ("in N …"), 5 which + 6 unit,
// 7 which + 8 weekday, 9 a single-day phrase.
var relativeRE = regexp.MustCompile(`(?i)\b(?:` +
	`(` + numberRE + `)\s+(days?|weeks?|months?|years?)\s+ago` +
	`|in\s+(` + numberRE + `)\s+(days?|weeks?)` +
	`|(last|this|next)\s+(week|month|year)` +
	`|(last|this|next|on)\s+(` + weekdayRE + `)` +
	`|((?:the\s+)?day\s+before\s+yesterday|(?:the\s+)?day\s+after\s+tomorrow|yesterday|today|tonight|tomorrow|last\s+night|this\s+(?:morning|afternoon|evening))` +
	`)\b`)

// prepositions that already say how a date relates to what precedes it.
var prepositions = map[string]bool{
	"on": true, "since": true, "until": true, "till": true, "by": true, "before": true, "after": true,
	"from": true, "of": true, "to": true, "through": true, "during": true, "in": true, "at": true, "as": true,
}

// granularity of a resolved phrase.
type granularity int

const (
	byDay granularity = iota
	byWeek
	byMonth
	byYear
)

// ResolveDates returns text with its relative dates made absolute against
// ref (see above), and how many it rewrote.
func ResolveDates(text string, ref time.Time) (string, int) {
	ref = ref.UTC()
	var out strings.Builder
	n := 0
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if i > 0 {
			out.WriteByte('\n')
		}
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			out.WriteString(line)
			continue
		}
		if fenced {
			out.WriteString(line)
			continue
		}
		// Even segments are prose, odd ones inline code.
		for j, seg := range strings.Split(line, "`") {
			if j > 0 {
				out.WriteByte('`')
			}
			if j%2 == 1 {
				out.WriteString(seg)
				continue
			}
			s, k := resolveProse(seg, ref)
			out.WriteString(s)
			n += k
		}
	}
	return out.String(), n
}

func resolveProse(s string, ref time.Time) (string, int) {
	var out strings.Builder
	n, last := 0, 0
	for _, m := range relativeRE.FindAllStringSubmatchIndex(s, -1) {
		start, end := m[0], m[1]
		group := func(g int) string {
			if m[2*g] < 0 {
				return ""
			}
			return strings.ToLower(s[m[2*g]:m[2*g+1]])
		}
		phrase, gran, ok := resolve(group, ref)
		if !ok {
			continue
		}
		possessive := false
		for _, suffix := range []string{"'s", "’s"} {
			if strings.HasPrefix(s[end:], suffix) {
				possessive, end = true, end+len(suffix)
			}
		}
		repl := phrase
		switch {
		case possessive && strings.HasPrefix(phrase, "the "):
		case possessive:
			repl = "the " + phrase
		case !prepositions[wordBefore(s[:start])] && !strings.HasPrefix(strings.ToLower(s[start:end]), "on ") && !strings.HasPrefix(strings.ToLower(s[start:end]), "in "):
			repl = []string{byDay: "on ", byWeek: "in ", byMonth: "in ", byYear: "in "}[gran] + phrase
		case strings.HasPrefix(strings.ToLower(s[start:end]), "in "):
			repl = "on " + phrase // "in 3 days" → "on <that day>"
			if gran != byDay {
				repl = "in " + phrase
			}
		case strings.HasPrefix(strings.ToLower(s[start:end]), "on "):
			repl = "on " + phrase
		}
		if r, _ := utf8.DecodeRuneInString(s[start:]); unicode.IsUpper(r) {
			repl = capitalize(repl)
		}
		out.WriteString(s[last:start])
		out.WriteString(repl)
		last = end
		n++
	}
	out.WriteString(s[last:])
	return out.String(), n
}

// resolve turns one match into its absolute phrase.
func resolve(group func(int) string, ref time.Time) (string, granularity, bool) {
	day := func(d time.Time) (string, granularity, bool) { return d.Format("2006-01-02"), byDay, true }
	week := func(d time.Time) (string, granularity, bool) {
		return "the week of " + monday(d).Format("2006-01-02"), byWeek, true
	}
	month := func(d time.Time) (string, granularity, bool) { return d.Format("January 2006"), byMonth, true }
	year := func(d time.Time) (string, granularity, bool) { return strconv.Itoa(d.Year()), byYear, true }
	switch {
	case group(1) != "": // N units ago
		n, ok := count(group(1))
		if !ok {
			return "", 0, false
		}
		switch strings.TrimSuffix(group(2), "s") {
		case "day":
			return day(ref.AddDate(0, 0, -n))
		case "week":
			return week(ref.AddDate(0, 0, -7*n))
		case "month":
			return month(firstOfMonth(ref).AddDate(0, -n, 0))
		default:
			return year(ref.AddDate(-n, 0, 0))
		}
	case group(3) != "": // in N days / weeks
		n, ok := count(group(3))
		if !ok {
			return "", 0, false
		}
		if strings.HasPrefix(group(4), "day") {
			return day(ref.AddDate(0, 0, n))
		}
		return week(ref.AddDate(0, 0, 7*n))
	case group(5) != "": // last/this/next week/month/year
		shift := map[string]int{"last": -1, "this": 0, "next": 1}[group(5)]
		switch group(6) {
		case "week":
			return week(ref.AddDate(0, 0, 7*shift))
		case "month":
			return month(firstOfMonth(ref).AddDate(0, shift, 0))
		default:
			return year(ref.AddDate(shift, 0, 0))
		}
	case group(7) != "": // last/this/next/on <weekday>
		wd := weekdays[group(8)]
		switch group(7) {
		case "last":
			back := (int(ref.Weekday()) - int(wd) + 7) % 7
			if back == 0 {
				back = 7
			}
			return day(ref.AddDate(0, 0, -back))
		case "next":
			ahead := (int(wd) - int(ref.Weekday()) + 7) % 7
			if ahead == 0 {
				ahead = 7
			}
			return day(ref.AddDate(0, 0, ahead))
		default: // this / on: that day of the reference's own week
			return day(monday(ref).AddDate(0, 0, (int(wd)+6)%7))
		}
	}
	p := strings.Join(strings.Fields(group(9)), " ")
	p = strings.TrimPrefix(p, "the ")
	switch p {
	case "today", "this morning", "this afternoon", "this evening", "tonight":
		return day(ref)
	case "yesterday", "last night":
		return day(ref.AddDate(0, 0, -1))
	case "day before yesterday":
		return day(ref.AddDate(0, 0, -2))
	case "tomorrow":
		return day(ref.AddDate(0, 0, 1))
	case "day after tomorrow":
		return day(ref.AddDate(0, 0, 2))
	}
	return "", 0, false
}

func count(s string) (int, bool) {
	if n, ok := numberWords[s]; ok {
		return n, true
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0 && n < 1000
}

// monday is the Monday of d's week (weeks start on Monday).
func monday(d time.Time) time.Time {
	return d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
}

func firstOfMonth(d time.Time) time.Time {
	return time.Date(d.Year(), d.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// wordBefore is the last word of s, lowercased.
func wordBefore(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return strings.ToLower(strings.TrimFunc(f[len(f)-1], func(r rune) bool { return !unicode.IsLetter(r) }))
}

func capitalize(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	return fmt.Sprintf("%c%s", unicode.ToUpper(r), s[size:])
}
