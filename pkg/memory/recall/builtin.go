package recall

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Background is the number of notional memories, holding none of the
// request's words, that recall's ranking counts in each scope besides its
// own (search.RankMemories): with three memories, a word one of them holds
// is still a rare word, and a score means about as much in a small scope as
// in a large one.
const Background = 10

// MinScore is the builtin selector's score floor: a memory scoring below
// it is not surfaced, however few the candidates. The score is
// pkg/search's BM25 (k1 1.2, b 0.75, a memory's name weighing 3, its
// description 2 and its body 1) with Background. A word of the request
// that only one memory of the scope holds, once, in a memory of the
// length of those matching, scores in its description from 2.9 (a scope
// of one memory) through 6.8 (two hundred) to 9.0 (a thousand), in its
// body alone 2.1, 5.0 and 6.5, so from a scope of eight memories up; a
// word a third of the memories hold scores 1.6 to 1.9 in a description in
// scopes of 30 to 300, and one three of four hold 2.0. So a memory needs a
// rare word, or two ordinary ones, in common with the request.
const MinScore = 2.5

// Builtin is the builtin provider's recall selector (llm.TaskRecall): no
// model, lexical. It reads the request the Recaller wrote and takes the
// memories whose match (their score by the search's ranking of name,
// description and body) is at least MinScore, best first; it leaves out
// reference memories about a tool just used unless they warn about it
// (ToolReference), and answers with as many as the answer's schema
// allows. A memory listed without a match holds none of the request's
// words and is never picked.
func Builtin(_ context.Context, req llm.Request) (llm.Response, error) {
	in, err := parseRequest(req)
	if err != nil {
		return llm.Response{}, &llm.Error{Kind: llm.KindRequest, Err: err}
	}
	best := slices.DeleteFunc(in.memories, func(m listed) bool { return m.score < MinScore })
	slices.SortStableFunc(best, func(a, b listed) int { return cmp.Compare(b.score, a.score) })
	picks := []string{}
	for _, m := range best {
		if len(picks) == in.max {
			break
		}
		if ToolReference(m.typ, m.name, m.description, in.tools) {
			continue
		}
		picks = append(picks, m.ref)
	}
	out, err := json.Marshal(map[string][]string{answerField: picks})
	if err != nil {
		return llm.Response{}, err
	}
	return llm.Response{Text: string(out)}, nil
}

// ToolReference reports whether a memory is a reference for one of the
// tools just used that does not warn about it: a memory of type reference
// whose name or description names the tool (its whole name, or for an MCP
// tool "mcp__server__tool" the server or the tool), and whose wording has
// none of the marks of a warning — pitfall, gotcha, known issue or
// problem, bug, caveat, careful, beware, avoid, never, don't, cannot,
// fails, broken, breaks, warning, workaround, limitation, quirk, trap,
// hangs, crashes, deprecated, instead. Such a memory is not surfaced (the
// agent already uses the tool); a warning about the tool is.
func ToolReference(typ memory.Type, name memory.Name, description string, tools []string) bool {
	if typ != memory.TypeReference || len(tools) == 0 {
		return false
	}
	text := nameWords(name) + " " + description
	ws := map[string]bool{}
	inWord := func(r rune) bool { return r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 }
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !inWord(r) }) {
		ws[w] = true
	}
	about := false
	for _, tool := range tools {
		for _, n := range toolNames(tool) {
			about = about || ws[n]
		}
	}
	return about && !warns(text)
}

// toolNames are the words a memory about tool would name it by.
func toolNames(tool string) []string {
	t := strings.ToLower(strings.TrimSpace(tool))
	if t == "" {
		return nil
	}
	out := []string{t}
	if rest, ok := strings.CutPrefix(t, "mcp__"); ok {
		if server, name, ok := strings.Cut(rest, "__"); ok {
			out = append(out, server, name)
		}
	}
	return out
}

// warnWords start the words, and warnPhrases are the phrases, that mark a
// memory as a warning.
var (
	warnWords = []string{"pitfall", "gotcha", "bug", "caveat", "careful", "beware", "avoid", "never", "cannot", "fail",
		"broke", "break", "warn", "workaround", "limitation", "quirk", "trap", "hang", "crash", "deprecat", "instead"}
	warnPhrases = []string{"known issue", "known problem", "don't", "do not", "doesn't", "does not", "can't", "won't",
		"work around", "watch out"}
)

func warns(text string) bool {
	lower := strings.ToLower(strings.ReplaceAll(text, "’", "'"))
	for _, p := range warnPhrases {
		if strings.Contains(lower, p) {
			return true
		}
	}
	for _, w := range words(lower) {
		for _, p := range warnWords {
			if strings.HasPrefix(w, p) {
				return true
			}
		}
	}
	return false
}

// words splits text into lowercase runs of letters and digits.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// nameWords is a memory's name as words ("staging-db" → "staging db").
func nameWords(n memory.Name) string {
	return strings.NewReplacer("-", " ", "_", " ").Replace(string(n))
}

// selectorInput is a selector's request as the builtin reads it back.
type selectorInput struct {
	tools    []string
	memories []listed
	max      int
}

type listed struct {
	ref, description string
	name             memory.Name
	typ              memory.Type
	// score is the memory's match, 0 when listed without one.
	score float64
}

// parseRequest reads back what request wrote.
func parseRequest(req llm.Request) (selectorInput, error) {
	var in selectorInput
	var s struct {
		Properties map[string]struct {
			MaxItems int `json:"maxItems"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(req.JSONSchema, &s); err != nil || s.Properties[answerField].MaxItems < 1 {
		return in, errors.New("recall: the request asks for no list of memories")
	}
	in.max = s.Properties[answerField].MaxItems
	if len(req.Messages) != 1 {
		return in, fmt.Errorf("recall: want one message, got %d", len(req.Messages))
	}
	var text strings.Builder
	for _, b := range req.Messages[0].Content {
		if b.Type == turn.BlockText {
			text.WriteString(b.Text)
		}
	}
	head, _, ok := strings.Cut(text.String(), "\n"+requestLine+"\n")
	if !ok {
		return in, errors.New("recall: the message has no request")
	}
	lines := strings.Split(head, "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], toolsLine) {
		return in, errors.New("recall: the message does not start with the tools just used")
	}
	if tools := strings.TrimPrefix(lines[0], toolsLine); tools != noTools {
		in.tools = strings.Split(tools, ", ")
	}
	for _, line := range lines[1:] {
		rest, ok := strings.CutPrefix(line, memoryBullet)
		if !ok {
			continue
		}
		ref, rest, ok1 := strings.Cut(rest, " [")
		meta, desc, ok2 := strings.Cut(rest, "]: ")
		_, name, ok3 := strings.Cut(ref, "/")
		if !ok1 || !ok2 || !ok3 {
			return in, fmt.Errorf("recall: memory line %q is not '- <scope>/<name> [<type>, saved …(, match <score>)]: <description>'", line)
		}
		fields := strings.Split(meta, ", ")
		m := listed{ref: ref, description: desc, name: memory.Name(name), typ: memory.Type(fields[0])}
		for _, f := range fields[1:] {
			if v, ok := strings.CutPrefix(f, matchLabel); ok {
				var err error
				if m.score, err = strconv.ParseFloat(v, 64); err != nil {
					return in, fmt.Errorf("recall: memory line %q: the match is not a number", line)
				}
			}
		}
		in.memories = append(in.memories, m)
	}
	return in, nil
}
